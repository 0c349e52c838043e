"""How long ``devctl fleet ls`` takes over a fleet of 1,000 nodes' series in a real Prometheus.

The series of ``--nodes`` exporters (8 resources of 8 devices each per node,
half of them held) are written as OpenMetrics text, backfilled into a fresh
TSDB with ``promtool tsdb create-blocks-from openmetrics``, and served by a
real ``prometheus`` on loopback. ``devctl fleet ls -o json`` and ``fleet
devices --unhealthy-held -o json`` then run as a person runs them (a new
process each time); the median of ``--runs`` wall times is reported.

    python bench/bench_fleet.py                  # 1,000 nodes, about 60 s
    python bench/bench_fleet.py --json out.json  # also the figures for make bench
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from devctl.fleet.views import NODES, RESOURCE_SERIES, UNHEALTHY_HELD

RESOURCES = 8
DEVICES = 8


def openmetrics(nodes: int, at: float) -> str:
    """Two scrapes' worth of every node's series, 30 s apart, ending at ``at``."""
    families: dict[str, list[str]] = {
        "devctl_resource_capacity": [],
        "devctl_resource_allocatable": [],
        "devctl_resource_allocated": [],
        "devctl_last_refresh_timestamp_seconds": [],
        "devctl_device_health": [],
        "devctl_device_allocated": [],
    }
    for ts in (at - 30, at):
        for n in range(nodes):
            target = f'job="devctl",instance="10.0.{n // 250}.{n % 250}:9477",node="node-{n:04d}"'
            families["devctl_last_refresh_timestamp_seconds"].append(f"{{{target}}} {ts:.3f} {ts:.3f}")
            for r in range(RESOURCES):
                res = f'{target},kind="device-plugin",resource="example.com/dev{r}"'
                unhealthy = 1 if (n + r) % 7 == 0 else 0
                families["devctl_resource_capacity"].append(f"{{{res}}} {DEVICES} {ts:.3f}")
                families["devctl_resource_allocatable"].append(f"{{{res}}} {DEVICES - unhealthy} {ts:.3f}")
                families["devctl_resource_allocated"].append(f"{{{res}}} {DEVICES // 2} {ts:.3f}")
                for d in range(DEVICES):
                    dev = f'{res},device="dev{r}-{d}"'
                    health = 0 if unhealthy and d == 0 else 1
                    families["devctl_device_health"].append(f'{{{dev},numa="{d % 2}"}} {health} {ts:.3f}')
                    if d < DEVICES // 2:
                        holder = f'{dev},namespace="team-{d}",pod="job-{n}-{r}",container="main"'
                        families["devctl_device_allocated"].append(f"{{{holder}}} 1 {ts:.3f}")
    lines = []
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{s}" for s in samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_of(pid: int) -> float:
    """CPU seconds a process has used so far (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(args: list[str], url: str, server: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of the devctl process, CPU seconds of Prometheus) of one ``devctl fleet`` run.

    The two CPU figures do not depend on how busy the machine is; the wall time
    does (on a loaded machine it is mostly waiting for a core).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    served = cpu_of(server)
    started = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "devctl", "--timeout", "30", "fleet", "--prometheus", url, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):
        raise SystemExit(f"fleet {' '.join(args)} failed: {p.stderr}")
    own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, own, cpu_of(server) - served


def eval_seconds(url: str, promql: str) -> float:
    """Prometheus' own evaluation time of one instant query (its ``stats=all`` timings)."""
    query = urllib.parse.urlencode({"query": promql, "stats": "all"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as reply:
        return float(json.load(reply)["data"]["stats"]["timings"]["evalTotalTime"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE (make bench)")
    args = parser.parse_args()
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        raise SystemExit("needs prometheus and promtool on PATH (Debian: apt-get install prometheus)")
    work = Path(tempfile.mkdtemp(prefix="devctl-fleet-bench-"))
    try:
        source = work / "series.om"
        source.write_text(openmetrics(args.nodes, time.time() - 60))
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(work / "data")],
                       check=True, capture_output=True)  # fmt: skip
        (work / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(work / "prometheus.log", "w") as log:
            proc = subprocess.Popen(
                [prometheus, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as reply:
                            if reply.status == 200:
                                break
                    except OSError:
                        pass
                    if time.monotonic() > deadline:
                        raise SystemExit("prometheus did not get ready")
                    time.sleep(0.5)
                timed(["ls"], url, proc.pid)  # Prometheus loads the blocks' index on first use
                ls = [timed(["ls"], url, proc.pid) for _ in range(args.runs)]
                held = [timed(["devices", "--unhealthy-held"], url, proc.pid) for _ in range(args.runs)]
                queries = [*RESOURCE_SERIES, NODES, UNHEALTHY_HELD]
                evals = {q: statistics.median(eval_seconds(url, q) for _ in range(args.runs)) for q in queries}
            finally:
                proc.terminate()
                proc.wait(30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    series = args.nodes * (1 + RESOURCES * 3 + RESOURCES * DEVICES + RESOURCES * DEVICES // 2)
    print(f"{args.nodes} nodes, {series} series, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    figures = {}
    for key, name, runs in (("ls", "fleet ls", ls), ("unhealthy_held", "fleet devices --unhealthy-held", held)):
        wall, cpu, prom = (statistics.median(r[i] for r in runs) for i in range(3))
        print(
            f"devctl {name} -o json: median wall {wall:.2f} s, devctl's CPU {cpu:.2f} s, Prometheus' CPU {prom:.2f} s"
        )
        figures[f"{key}_wall"] = {"value": round(wall, 3), "unit": "s", "target": 2 if key == "ls" else None}
        figures[f"{key}_devctl_cpu"] = {"value": round(cpu, 3), "unit": "s", "target": None}
        figures[f"{key}_prometheus_cpu"] = {"value": round(prom, 3), "unit": "s", "target": None}
    for q, took in evals.items():
        print(f"Prometheus evaluates {q!r} in {1000 * took:.1f} ms (median)")
    if args.json:
        for figure in figures.values():
            figure["better"] = "lower"
        Path(args.json).write_text(json.dumps({"bench": "fleet", "figures": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
