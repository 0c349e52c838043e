"""Benchmark of the read commands on a large simulated node, beside a bare grpcio script.

    .venv/bin/python bench/bench_read.py [--runs N] [--pods 250] [--devices 2000] [--resources 10]

Builds a scenario of 250 pods x 4 containers and 2,000 devices across 10
resources, starts `devctl sim` on it, then runs, one after another and each
N times: `devctl ls -o json`, `bench/bare_client.py ls` (the same RPCs: List,
GetAllocatableResources, options and first ListAndWatch of every plugin),
`devctl pods -o json` and `bench/bare_client.py pods` (List and
GetAllocatableResources), and `devctl --help`. It reports the median wall time
and the peak RSS of each (os.wait4 of that child alone) and checks the targets:
devctl within 1.5x of the bare script, `devctl --help` under 150 ms.
Figures go to docs/performance.md by hand; this script only prints them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
DEVCTL = [PYTHON, "-m", "devctl"]
BARE = [PYTHON, str(HERE / "bare_client.py")]


def scenario(pods: int, containers: int, devices: int, resources: int) -> dict:
    """Every container holds one device of one resource, round robin; half the devices stay free."""
    per_resource = devices // resources
    res = [
        {
            "name": f"bench.example/r{k}",
            "socket": f"r{k}.sock",
            "count": per_resource,
            "numa": [i % 2 for i in range(per_resource)],
            "preferred_allocation": False,
            "allocate": {"envs": {f"R{k}_DEVICES": "{ids}"}},
        }
        for k in range(resources)
    ]
    pod_list = []
    for i in range(pods):
        cs = []
        for j in range(containers):
            n = i * containers + j
            cs.append(
                {
                    "name": f"c{j}",
                    "requests": {f"bench.example/r{n % resources}": 1},
                    "memory": [{"type": "memory", "size": "1Gi", "numa": [n % 2]}],
                }
            )
        pod_list.append({"namespace": f"ns-{i % 10}", "name": f"pod-{i:04d}", "containers": cs})
    return {
        "numa_nodes": [
            {"id": 0, "cpus": "0-63", "memory": "1024Gi"},
            {"id": 1, "cpus": "64-127", "memory": "1024Gi"},
        ],
        "reserved_cpus": "0-1",
        "resources": res,
        "pods": pod_list,
    }


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """Wall seconds, peak RSS in KiB and exit status of one child, its stdout discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_maxrss, proc.returncode


def measure(name: str, argv: list[str], env: dict[str, str], runs: int) -> dict:
    run_child(argv, env)  # warm the page cache and the rate-limit bucket's first burst
    walls, rss = [], []
    for _ in range(runs):
        time.sleep(0.25)  # let the pod-resources token bucket (burst 10) refill
        wall, peak, _ = run_child(argv, env)
        walls.append(wall)
        rss.append(peak)
    return {"name": name, "wall_ms": statistics.median(walls) * 1000, "rss_mib": max(rss) / 1024}


def start_sim(root: Path, scenario_file: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """`devctl sim` on the scenario; ready when it prints its export line. Its log (one line per RPC) goes to a file."""
    with open(log, "w") as log_file:
        proc = subprocess.Popen(
            [*DEVCTL, "sim", "--root", str(root), "--scenario", str(scenario_file)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("export DEVCTL_ROOT="):
        proc.kill()
        raise SystemExit(f"devctl sim did not start: {line}{log.read_text()[-2000:]}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pods", type=int, default=250)
    parser.add_argument("--containers", type=int, default=4)
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--resources", type=int, default=10)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="dcb", dir="/tmp"))
    env = {**os.environ, "NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(HERE.parent)}
    scenario_file, log = root.with_suffix(".yaml"), root.with_suffix(".log")
    scenario_file.write_text(yaml.safe_dump(scenario(args.pods, args.containers, args.devices, args.resources)))
    t0 = time.perf_counter()
    sim = start_sim(root, scenario_file, env, log)
    print(
        f"node: {args.pods} pods x {args.containers} containers, {args.devices} devices in {args.resources} "
        f"resources; simulator ready in {time.perf_counter() - t0:.1f}s"
    )
    try:
        rows = [
            measure("devctl ls -o json", [*DEVCTL, "ls", "-o", "json"], env, args.runs),
            measure("bare_client.py ls", [*BARE, str(root), "ls"], env, args.runs),
            measure("devctl pods -o json", [*DEVCTL, "pods", "-o", "json"], env, args.runs),
            measure("bare_client.py pods", [*BARE, str(root), "pods"], env, args.runs),
            measure("devctl --help", [*DEVCTL, "--help"], env, max(args.runs, 10)),
            measure("python -c pass", [PYTHON, "-c", "pass"], env, max(args.runs, 10)),
        ]
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(30)
        except subprocess.TimeoutExpired:
            sim.kill()
        shutil.rmtree(root, ignore_errors=True)
        scenario_file.unlink(missing_ok=True)
        log.unlink(missing_ok=True)

    by = {r["name"]: r for r in rows}
    print(f"\n{'command':<22}{'median wall':>14}{'peak RSS':>12}")
    for r in rows:
        print(f"{r['name']:<22}{r['wall_ms']:>11.0f} ms{r['rss_mib']:>8.1f} MiB")
    print()
    for cmd in ("ls", "pods"):
        ratio = by[f"devctl {cmd} -o json"]["wall_ms"] / by[f"bare_client.py {cmd}"]["wall_ms"]
        print(f"devctl {cmd}: {ratio:.2f}x the bare script (target <= 1.5x): {'met' if ratio <= 1.5 else 'MISSED'}")
    help_ms = by["devctl --help"]["wall_ms"]
    print(f"devctl --help: {help_ms:.0f} ms (target < 150 ms): {'met' if help_ms < 150 else 'MISSED'}")


if __name__ == "__main__":
    main()
