"""Benchmark of the read commands on a large simulated node, beside a bare grpcio script; start-up and completion.

    .venv/bin/python bench/bench_read.py [--runs N] [--pods 250] [--devices 2000] [--resources 10] [--json FILE]

Builds a scenario of 250 pods x 4 containers and 2,000 devices across 10
resources, starts `devctl sim` on it, then runs each command N times, the
commands taking turns (so a change in the machine's load hits all alike):
`devctl ls -o json` and `devctl devices -o json` beside `bench/bare_client.py
ls` (the same RPCs: List, GetAllocatableResources, options and first
ListAndWatch of every plugin), `devctl pods -o json` beside `bare_client.py
pods` (List and GetAllocatableResources); `devctl --help`, `--version`,
`version`, `devctl ls` on a root with no kubelet, and live shell completions
(on the node, on an empty root, on a pod-resources socket that never answers,
with and without the pod log dirs that answer namespaces without it). It
prints the median wall time and peak RSS of each child alone (os.wait4) and
checks the targets of docs/performance.md; `--json FILE` writes the figures in
the format bench/compare.py reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
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


def run_child(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, int]:
    """Wall and CPU seconds and peak RSS in KiB of one child, its stdout discarded; an exit status not in ``ok``
    stops all."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if code not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


@dataclass
class Case:
    """One command measured: its figure's key, what a person would type, and how it is run."""

    key: str
    shown: str
    argv: list[str]
    env: dict[str, str]
    ok: tuple[int, ...] = (0,)
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    peak_kib: int = 0

    @property
    def ms(self) -> float:
        return statistics.median(self.walls) * 1000

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpus) * 1000


def measure(cases: list[Case], runs: int) -> None:
    """Each case once to warm up (page cache, bytecode), then ``runs`` rounds in which every case runs once."""
    for case in cases:
        run_child(case.argv, case.env, case.ok)
    for _ in range(runs):
        for case in cases:
            time.sleep(0.05)  # the simulated kubelet's pod-resources token bucket (burst 10) refills
            wall, cpu, peak = run_child(case.argv, case.env, case.ok)
            case.walls.append(wall)
            case.cpus.append(cpu)
            case.peak_kib = max(case.peak_kib, peak)


def start_sim(root: Path, scenario_file: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """`devctl sim` on the scenario; ready when it prints its export line. Its log goes to a file."""
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


def stop_sim(sim: subprocess.Popen, wait: float = 30.0) -> None:
    """Stop a `devctl sim` as Ctrl-C does, and kill it when it has not ended within ``wait`` seconds."""
    sim.send_signal(signal.SIGINT)
    try:
        sim.wait(wait)
    except subprocess.TimeoutExpired:
        sim.kill()


def completing(words: str, env: dict[str, str], **more: str) -> dict[str, str]:
    """The environment in which bash's completion script calls devctl back for ``words`` (the last one being typed)."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    return {**env, "_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword), **more}


def cases(root: Path, empty: Path, frozen: Path, env: dict[str, str]) -> list[Case]:
    no_node = {**env, "DEVCTL_ROOT": str(empty)}
    return [
        Case("ls_json", "devctl ls -o json", [*DEVCTL, "ls", "-o", "json"], env),
        Case("devices_json", "devctl devices -o json", [*DEVCTL, "devices", "-o", "json"], env),
        Case("bare_ls", "bare_client.py ls", [*BARE, str(root), "ls"], env),
        Case("pods_json", "devctl pods -o json", [*DEVCTL, "pods", "-o", "json"], env),
        Case("bare_pods", "bare_client.py pods", [*BARE, str(root), "pods"], env),
        Case("help", "devctl --help", [*DEVCTL, "--help"], env),
        Case("version", "devctl --version", [*DEVCTL, "--version"], env),
        Case("version_command", "devctl version", [*DEVCTL, "version"], env),
        Case("ls_no_kubelet", "devctl ls (no kubelet)", [*DEVCTL, "ls"], no_node, ok=(3,)),
        Case("complete_ls", "complete: ls <TAB>", DEVCTL, completing("devctl ls ", env)),
        Case("complete_namespace", "complete: pods -n <TAB>", DEVCTL, completing("devctl pods -n ", env)),
        Case("complete_call_rpc", "complete: call R <TAB>", DEVCTL, completing("devctl call bench.example/r0 ", env)),
        Case("complete_no_node", "complete: pods -n (no node)", DEVCTL, completing("devctl pods -n ", no_node)),
        Case(
            "complete_hung",
            "complete: pods -n (hung)",
            DEVCTL,
            completing("devctl pods -n ", env, DEVCTL_POD_RESOURCES=str(frozen)),
        ),
        # The same without pod log dirs to list: the List is made and its deadline (the budget's rest) ends it.
        Case(
            "complete_hung_no_logs",
            "complete: pods -n (hung, no logs)",
            DEVCTL,
            completing("devctl pods -n ", env, DEVCTL_POD_RESOURCES=str(frozen), DEVCTL_POD_LOGS=str(empty / "none")),
        ),
        Case("python", "python -c pass", [PYTHON, "-c", "pass"], env),
    ]


# (figure, what it is measured against, target): devctl's wall time as a multiple of the bare script's.
RATIOS = (("ls_json", "bare_ls", 1.2), ("devices_json", "bare_ls", 1.2), ("pods_json", "bare_pods", 1.2))
# Wall time targets in ms (docs/performance.md).
TARGETS_MS = {"help": 100, "version": 100, "version_command": 100, "ls_no_kubelet": 200}
TARGETS_MS |= {k: 300 for k in ("complete_ls", "complete_namespace", "complete_call_rpc")}
TARGETS_MS |= {k: 300 for k in ("complete_no_node", "complete_hung", "complete_hung_no_logs")}


def figures(by: dict[str, Case]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for key, base, target in RATIOS:
        out[f"{key}_ratio"] = {"value": round(by[key].ms / by[base].ms, 3), "unit": "ratio", "target": target}
        # The child's own CPU time (the simulator's is not in it): steadier than wall time on a loaded machine.
        cpu = round(by[key].cpu_ms / by[base].cpu_ms, 3)
        out[f"{key}_cpu_ratio"] = {"value": cpu, "unit": "ratio", "target": None}
    for key, case in by.items():
        out[f"{key}_ms"] = {"value": round(case.ms, 1), "unit": "ms", "target": TARGETS_MS.get(key)}
    for key in ("ls_json", "bare_ls", "pods_json", "bare_pods"):
        out[f"{key}_rss"] = {"value": round(by[key].peak_kib / 1024, 1), "unit": "MiB", "target": None}
    for figure in out.values():
        figure["better"] = "lower"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pods", type=int, default=250)
    parser.add_argument("--containers", type=int, default=4)
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--resources", type=int, default=10)
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON (bench/compare.py's format)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="dcb", dir="/tmp"))
    empty = Path(tempfile.mkdtemp(prefix="dcb-empty", dir="/tmp"))
    # devctl as installed runs from cached bytecode: a caller's PYTHONDONTWRITEBYTECODE would compile every module
    # on every run (hundreds of ms of devctl's own modules, none of the bare script's). No DEVCTL_* of the caller's.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(HERE.parent), "COLUMNS": "80"}
    scenario_file, log = root.with_suffix(".yaml"), root.with_suffix(".log")
    scenario_file.write_text(yaml.safe_dump(scenario(args.pods, args.containers, args.devices, args.resources)))
    # A pod-resources socket that listens and never accepts (a kubelet stopped with SIGSTOP): completion gives up.
    frozen_path = empty / "frozen.sock"
    frozen = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    frozen.bind(str(frozen_path))
    frozen.listen(64)
    t0 = time.perf_counter()
    sim = start_sim(root, scenario_file, env, log)
    print(
        f"node: {args.pods} pods x {args.containers} containers, {args.devices} devices in {args.resources} "
        f"resources; simulator ready in {time.perf_counter() - t0:.1f}s"
    )
    load_before = os.getloadavg()
    try:
        measured = cases(root, empty, frozen_path, env)
        measure(measured, args.runs)
    finally:
        stop_sim(sim)
        frozen.close()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)
        scenario_file.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
    load = os.getloadavg()

    by = {c.key: c for c in measured}
    figs = figures(by)
    print(f"load average {load_before[0]:.2f} before, {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after")
    print(f"\n{'command':<30}{'median wall':>12}{'CPU':>9}{'peak RSS':>12}  target")
    for c in measured:
        target = TARGETS_MS.get(c.key)
        mark = "" if target is None else f"< {target}" + ("" if c.ms < target else " MISSED")
        print(f"{c.shown:<30}{c.ms:>9.0f} ms{c.cpu_ms:>6.0f} ms{c.peak_kib / 1024:>8.1f} MiB  {mark}")
    print()
    for key, base, target in RATIOS:
        ratio = figs[f"{key}_ratio"]["value"]
        verdict = "met" if ratio <= target else "MISSED"
        cpu = figs[f"{key}_cpu_ratio"]["value"]
        print(f"{by[key].shown}: {ratio:.2f}x {by[base].shown} (target <= {target}x): {verdict}; CPU {cpu:.2f}x")
    if args.json:
        doc = {"bench": "read", "load": [round(x, 2) for x in (load_before[0], *load)], "figures": figs}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
