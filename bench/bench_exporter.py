"""What ``devctl exporter`` costs a node, and how fast ``/metrics`` answers.

1. Cost: a simulated node of 8 plugins x 8 devices and 50 pods; the exporter
   runs as its own process with the default 15 s interval and is scraped every
   15 s (as Prometheus would) for ``--minutes``. Reported: resident memory
   (VmRSS at the end, VmHWM peak) and CPU time over the run after a warm-up of
   a few seconds, as a share of one core: the exporter and its HTTP process summed.
2. Latency: a simulated node of 10 plugins x 1,000 devices (10,000 devices) and
   50 pods, the exporter refreshing every ``--latency-interval`` (2 s) so that
   refreshes (the views and doctor) run during the scrapes too. ``/metrics``
   timed by this process's HTTP client as a scraper sees it: scrapes every
   10 ms while device health flips keep the page being rebuilt, and repeated
   scrapes of an unchanged state.

    python bench/bench_exporter.py                       # 30 s of cost, then latency: about 80 s
    python bench/bench_exporter.py --minutes 10 --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from devctl.lab.sim.scenario import Scenario, parse_scenario
from devctl.lab.sim.thread import running_sim

CLK_TCK = os.sysconf("SC_CLK_TCK")
WARM_UP = 3.0


def scenario(plugins: int, devices: int, pods: int) -> Scenario:
    resources = [
        {
            "name": f"example.com/dev{i}",
            "socket": f"dev{i}.sock",
            "count": devices,
            "numa": [j % 2 for j in range(devices)],
        }
        for i in range(plugins)
    ]
    return parse_scenario(
        {
            "numa_nodes": [{"id": 0, "cpus": "0-63", "memory": "64Gi"}, {"id": 1, "cpus": "64-127", "memory": "64Gi"}],
            "resources": resources,
            "pods": [
                {
                    "namespace": f"team-{p % 5}",
                    "name": f"job-{p}",
                    "containers": [{"name": "main", "requests": {f"example.com/dev{p % plugins}": 1}}],
                }
                for p in range(pods)
            ],
        }
    )


def start_exporter(root: Path, interval: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "devctl", "--root", str(root), "exporter", "--listen", "127.0.0.1:0",
         "--interval", str(interval)],
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("DEVCTL_")},
    )  # fmt: skip
    assert proc.stderr is not None
    match = re.search(r"serving (http://\S+)/metrics", proc.stderr.readline())
    assert match, "the exporter did not start"
    url = match.group(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as reply:
                if reply.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the exporter did not get ready within 60 s")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def scrape(url: str) -> tuple[float, bytes]:
    """One scrape as Prometheus makes it (gzip accepted): its answer time and the page."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Accept-Encoding": "gzip"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as reply:
        body = reply.read()
        gzipped = reply.headers.get("Content-Encoding") == "gzip"
    took = time.perf_counter() - started
    return took, gzip.decompress(body) if gzipped else body


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (the exporter's HTTP process)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of the exporter and its HTTP process, summed."""
    out = {"VmRSS": 0, "VmHWM": 0}
    for p in (pid, *children(pid)):
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in out:
                out[key] += int(value.split()[0])
    return out


def cost(minutes: float, interval: float) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="dcb", dir="/tmp"))
    try:
        with running_sim(root, scenario(8, 8, 50)):
            proc, url = start_exporter(root, interval)
            try:
                time.sleep(WARM_UP)  # ready means refreshed and rendered: a moment more for every stream to settle
                pids = [proc.pid, *children(proc.pid)]
                cpu0, t0 = sum(map(cpu_seconds, pids)), time.monotonic()
                samples = 0
                end = t0 + minutes * 60
                while time.monotonic() < end:
                    _, body = scrape(url)
                    samples = body.count(b"\n")
                    time.sleep(min(interval, max(0.0, end - time.monotonic())))
                cpu, wall = sum(map(cpu_seconds, pids)) - cpu0, time.monotonic() - t0
                mem = memory_kib(proc.pid)
            finally:
                stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "minutes": wall / 60,
        "interval": interval,
        "cpu_percent": 100 * cpu / wall,
        "rss_mib": mem["VmRSS"] / 1024,
        "peak_rss_mib": mem["VmHWM"] / 1024,
        "lines": samples,
    }


WATCHED = b'device="dev0-0",kind="device-plugin",numa="0",resource="example.com/dev0"} '


def scraper(url: str) -> None:
    """``--scrape URL``: scrape every 10 ms until killed; one line per scrape: end time, answer time, dev0-0's health.

    Runs as a process of its own, so that no thread of the simulated node (which
    shares the bench process's interpreter lock) sits in the measured time.
    """
    while True:
        took, body = scrape(url)
        at = body.find(WATCHED)
        health = body[at + len(WATCHED) : at + len(WATCHED) + 3].decode() if at >= 0 else "?"
        print(f"{time.monotonic():.6f} {took:.6f} {health} {len(body)}", flush=True)
        time.sleep(0.01)


def latency(flips: int, interval: float) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="dcb", dir="/tmp"))
    try:
        with running_sim(root, scenario(10, 1000, 50)) as node:
            proc, url = start_exporter(root, interval)
            try:
                # Wait until every stream reports its devices.
                while scrape(url)[1].count(b"devctl_device_health{") < 10_000:
                    time.sleep(0.2)
                client = subprocess.Popen(
                    [sys.executable, __file__, "--scrape", url], stdout=subprocess.PIPE, text=True
                )
                assert client.stdout is not None
                try:
                    answers, visible = [], []

                    def until(health: str, since: float) -> float:
                        """Read the scraper's lines until one made after ``since`` shows ``health``; its end time."""
                        assert client.stdout is not None
                        while True:
                            at, took, seen, _ = client.stdout.readline().split()
                            answers.append(float(took))
                            if seen == health and float(at) - float(took) > since:
                                return float(at)

                    for i in range(flips):
                        health = "0.0" if i % 2 == 0 else "1.0"
                        flipped = time.monotonic()
                        node.set_health("example.com/dev0", "dev0-0", "Unhealthy" if i % 2 == 0 else "Healthy")
                        visible.append(until(health, flipped) - flipped)
                    during = len(answers)
                    # The state is unchanged from here on; refreshes go on.
                    for _ in range(50):
                        _, took, _, size = client.stdout.readline().split()
                        answers.append(float(took))
                    steady = answers[during:]
                    answers = answers[:during]
                finally:
                    client.kill()
                    client.wait()
            finally:
                stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def pct(values: list[float], q: int) -> float:
        return 1000 * statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else 1000 * values[0]

    return {
        "answer_p50_ms": 1000 * statistics.median(answers),
        "answer_p95_ms": pct(answers, 95),
        "answer_max_ms": 1000 * max(answers),
        "steady_p50_ms": 1000 * statistics.median(steady),
        "steady_p95_ms": pct(steady, 95),
        "visible_p50_ms": 1000 * statistics.median(visible),
        "visible_p95_ms": pct(visible, 95),
        "page_kib": int(size) / 1024,
        "scrapes": len(answers),
        "interval": interval,
    }


def report(c: dict[str, Any] | None, lat: dict[str, Any], command: str) -> str:
    rows = []
    if c is not None:
        rows += [
            f"| 8 plugins x 8 devices, 50 pods, {c['interval']:g} s interval and scrape | CPU, share of one core "
            f"over {c['minutes']:.1f} min | {c['cpu_percent']:.2f} % |",
            f"| | resident memory at the end (VmRSS) | {c['rss_mib']:.1f} MiB |",
            f"| | peak resident memory (VmHWM) | {c['peak_rss_mib']:.1f} MiB |",
            f"| | lines on /metrics | {c['lines']} |",
        ]
    rows += [
        f"| 10 plugins x 1,000 devices, 50 pods, {lat['interval']:g} s interval | /metrics answer during rebuilds, "
        "p50 / p95 / max "
        f"({lat['scrapes']}) | {lat['answer_p50_ms']:.1f} / {lat['answer_p95_ms']:.1f} / "
        f"{lat['answer_max_ms']:.1f} ms |",
        f"| | /metrics answer of an unchanged state (refreshes go on), p50 / p95 of 50 scrapes | "
        f"{lat['steady_p50_ms']:.1f} / {lat['steady_p95_ms']:.1f} ms |",
        f"| | a health flip until /metrics shows it, p50 / p95 | {lat['visible_p50_ms']:.0f} / "
        f"{lat['visible_p95_ms']:.0f} ms |",
        f"| | page size (uncompressed) | {lat['page_kib']:.0f} KiB |",
    ]
    head = (
        f"Measured with `{command}` on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end.\n\n"
        "| node | figure | value |\n|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=0.5, help="how long the cost run lasts; 0: none [0.5]")
    parser.add_argument("--interval", type=float, default=15.0, help="the exporter's --interval and scrape period [15]")
    parser.add_argument("--flips", type=int, default=10, help="health flips in the latency run [10]")
    parser.add_argument("--latency-interval", type=float, default=2.0, help="--interval of the latency run [2]")
    parser.add_argument("--write", metavar="FILE", help="also write the figures as Markdown to FILE")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE (make bench)")
    parser.add_argument("--scrape", metavar="URL", help=argparse.SUPPRESS)  # the scraper process (latency)
    args = parser.parse_args()
    if args.scrape:
        scraper(args.scrape)
        return
    command = "python bench/bench_exporter.py " + " ".join(sys.argv[1:])
    c = cost(args.minutes, args.interval) if args.minutes > 0 else None
    lat = latency(args.flips, args.latency_interval)
    text = report(c, lat, command.strip())
    print(text)
    if args.write:
        Path(args.write).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(figures(c, lat), indent=2) + "\n")


def figures(c: dict[str, Any] | None, lat: dict[str, Any]) -> dict[str, Any]:
    """The bench's figures in the shape ``make bench`` collects and the compare script checks."""

    def fig(value: float, unit: str, target: float | None) -> dict[str, Any]:
        return {"value": round(value, 3), "unit": unit, "target": target, "better": "lower"}

    out = {
        "metrics_p95_during_rebuilds": fig(lat["answer_p95_ms"], "ms", 50),
        "metrics_p50_during_rebuilds": fig(lat["answer_p50_ms"], "ms", None),
        "metrics_p95_unchanged": fig(lat["steady_p95_ms"], "ms", 50),
        "flip_visible_p95": fig(lat["visible_p95_ms"], "ms", None),
    }
    if c is not None:
        out["cpu_share_of_one_core"] = fig(c["cpu_percent"], "%", 1)
        out["rss"] = fig(c["rss_mib"], "MiB", 80)
    return {"bench": "exporter", "figures": out}


if __name__ == "__main__":
    main()
