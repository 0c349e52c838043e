"""Benchmark of `devctl who`: the <proc> scan against the kernel's floor, and `devices -o wide` against `devices`.

    .venv/bin/python bench/bench_who.py [--processes 10000] [--fds 20] [--runs 3] [--holders 500]
                                        [--cli-runs 3] [--no-cli] [--json FILE]

The default is CI-sized (10,000 processes); the issue's figure is
``--processes 50000``. The scan's target scales with the size: 1 s for
50,000 processes x 20 fds, so 200 ms for 10,000.

The fixture: a fake proc tree in a temporary directory (on tmpfs, /dev/shm,
where there is one, as /proc is in memory too), each process with a cmdline,
a cgroup file and ``--fds`` fd links, mostly to files, sockets and pipes, a
few under /dev (a tty, /dev/null), one process in a hundred holding a watched
GPU node. The watch is a node's whose GPU nodes exist (a major:minor for each,
so a link under /dev/ that does not name one is stat'ed, as on a real node).
Each of ``--runs`` rounds times, on the same tree: devctl.node.procs.scan with
its default (the caller and one worker process, each claiming slices of 256
processes until none is left) and in one process (``workers=1``); the floor in
Python (os.open,
os.listdir and os.readlink per fd, nothing matched); and the floor in C
(bench/who_floor.c, the same system calls, built with ``cc`` when there is
one). Reported: medians of wall and CPU time (user and system apart; CPU time
counts every thread and child), the larger of the caller's and the worker's
CPU time (the default scan's wall time on an idle two-CPU machine), the share
of the slices the caller read, a worker's start (an interpreter importing
devctl/fast/fdscan.py, no slice) in wall time, and the one-process
scan's CPU time as a ratio to each floor's from the same rounds: on a loaded
machine wall time mostly measures the other jobs, the ratio does not.

Real procfs: symlinks on tmpfs cost the kernel differently from /proc's fd
links, so the one-process scan and the C floor also read this machine's /proc, with
``--holders`` extra processes (``sleep``, each holding 20 fds: /dev/null,
pipes, sockets, a file) to give it size; reported per fd, and scaled to the
issue's 1,000,000 fds. Needs root to read every process (else only one's own).

The columns: starts `devctl sim` on its default node and runs `devctl devices`
and `devctl devices -o wide` (which adds the <proc> scan and the CRI calls)
``--cli-runs`` times each, alternately, as child processes; the ratio of their
median wall times has the target <= 1.3. Then the same with the simulated
node's <proc> replaced by the fixture (DEVCTL_PROC): the bench node, of
``--processes`` processes (10,000 by default, 50,000 with the issue's size).
``--no-cli`` skips both.

Prints a table; ``--json FILE`` writes the figures for `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from devctl.fast import fdscan  # noqa: E402 (the path above first)
from devctl.node import procs  # noqa: E402 (the path above first)
from devctl.node.procs import Watch, scan  # noqa: E402

GPUS = [f"/dev/nvidia{i}" for i in range(8)]
GPU_MAJOR = 195  # the NVIDIA driver's; nothing in the fixture or on this machine is expected to have it
OTHER = ["/var/log/app.log", "socket:[{n}]", "pipe:[{n}]", "/dev/pts/0", "/dev/null", "anon_inode:[eventfd]"]
DIR = os.O_RDONLY | os.O_DIRECTORY
Figures = dict[str, dict[str, object]]


def _write(name: str, data: bytes, dir_fd: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def build(proc: Path, processes: int, fds: int) -> None:
    """The tree, made relative to open directory fds (a path walk per link would double the build time)."""
    proc.mkdir(parents=True)
    top = os.open(proc, DIR)
    try:
        for pid in range(1, processes + 1):
            os.mkdir(str(pid), dir_fd=top)
            d = os.open(str(pid), DIR, dir_fd=top)
            try:
                _write("cmdline", f"worker\0--id\0{pid}\0".encode(), d)
                _write("cgroup", f"0::/system.slice/worker-{pid}.service\n".encode(), d)
                os.mkdir("fd", dir_fd=d)
                f = os.open("fd", DIR, dir_fd=d)
                try:
                    for fd in range(fds):
                        target = OTHER[fd % len(OTHER)].format(n=pid * 100 + fd)
                        if pid % 100 == 0 and fd == fds - 1:
                            target = GPUS[pid % len(GPUS)]
                        os.symlink(target, str(fd), dir_fd=f)
                finally:
                    os.close(f)
            finally:
                os.close(d)
    finally:
        os.close(top)


def gpu_watch() -> Watch:
    """The watch of a node whose GPU nodes exist: by path, and by a major:minor each."""
    return Watch(frozenset(GPUS), {os.makedev(GPU_MAJOR, i): p for i, p in enumerate(GPUS)})


def python_floor(proc: str) -> int:
    """The fds under ``proc`` read with the fewest Python calls: nothing matched, nothing kept."""
    count = 0
    with os.scandir(proc) as entries:
        pids = [e.name for e in entries if e.name.isdigit()]
    for pid in pids:
        try:
            d = os.open(f"{proc}/{pid}/fd", DIR)
        except OSError:
            continue
        try:
            for name in os.listdir(d):
                try:
                    os.readlink(name, dir_fd=d)
                    count += 1
                except OSError:
                    pass
        finally:
            os.close(d)
    return count


def c_floor(tmp: str) -> str | None:
    """bench/who_floor.c built into ``tmp``, or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out = os.path.join(tmp, "who_floor")
    done = subprocess.run([cc, "-O2", "-o", out, str(HERE / "who_floor.c")], capture_output=True, text=True)
    return out if done.returncode == 0 else None


Timed = tuple[float, float, float, float, object]


def timed(run: Callable[[], object]) -> Timed:
    """(wall, user, system, children) seconds of ``run()``, and its result: user and system of this process (every
    thread), children the CPU time of the child processes it waited for (devctl's workers, the C floor)."""
    start, before = time.perf_counter(), os.times()
    result = run()
    wall, after = time.perf_counter() - start, os.times()
    children = after.children_user - before.children_user + after.children_system - before.children_system
    return wall, after.user - before.user, after.system - before.system, children, result


def _wall(rows: list[Timed]) -> float:
    return statistics.median(r[0] for r in rows)


def _cpu(rows: list[Timed]) -> float:
    """All of it: this process' and its children's."""
    return statistics.median(r[1] + r[2] + r[3] for r in rows)


def run_c_floor(binary: str, proc: str) -> tuple[int, int]:
    """(processes, fds) the C floor read under ``proc``."""
    out = subprocess.run([binary, proc], capture_output=True, text=True, check=True).stdout.split()
    return int(out[1]), int(out[3])


def devctl_scan(proc: str, watch: Watch, workers: int | None, expect: int | None) -> int:
    """The scan; on the fixture (``expect`` holders) without an error, on a real /proc (None) whatever it says."""
    result, errors = scan(proc, watch, workers)
    assert result is not None
    if expect is not None:
        assert not errors and len(result.processes) == expect, (errors, len(result.processes))
    return result.scanned


def _ms(value: float, target: float | None = None, unit: str = "ms") -> dict[str, object]:
    return {"value": round(value * 1000) if unit == "ms" else value, "unit": unit, "target": target, "better": "lower"}


class _Counted(procs.Matcher):
    """The caller's reader, counting the slices it reads (the worker reads the rest)."""

    slices = 0

    def read(self, pids: list[str]) -> tuple[list[fdscan.Row], int]:  # type: ignore[override]
        type(self).slices += 1
        return super().read(pids)


def worker_start(runs: int) -> float:
    """The median wall time of a worker process that starts and finds no slice to claim."""
    walls = []
    for _ in range(runs):
        read_end, write_end = os.pipe()
        os.close(write_end)  # an empty pipe: the worker claims nothing and answers at once
        job = os.memfd_create("bench-job")
        os.write(job, json.dumps({"proc": "/", "paths": [], "rdevs": [], "pids": [], "slice": 1}).encode())
        start = time.perf_counter()
        argv = [sys.executable, "-I", "-S", "-c", procs._WORKER, procs._PACKAGE_ROOT, str(job), str(read_end)]
        subprocess.run(argv, pass_fds=(job, read_end), capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        os.close(job)
        os.close(read_end)
    return statistics.median(walls)


def bench_scan(args: argparse.Namespace, proc: str, floor: str | None) -> Figures:
    watch = gpu_watch()
    expect = args.processes // 100
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    default, one, py, c, shares = [], [], [], [], []
    slices = -(-args.processes // max(procs.SLICE, -(-args.processes // fdscan.MAX_SLICES)))
    for _ in range(args.runs):
        procs.Matcher = _Counted  # type: ignore[misc]
        _Counted.slices = 0
        default.append(timed(lambda: devctl_scan(proc, watch, None, expect)))
        procs.Matcher = fdscan.Matcher  # type: ignore[misc]
        shares.append(_Counted.slices / slices)
        one.append(timed(lambda: devctl_scan(proc, watch, 1, expect)))
        py.append(timed(lambda: python_floor(proc)))
        if floor is not None:
            c.append(timed(lambda: run_c_floor(floor, proc)))
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    # On an idle machine the default scan takes as long as the larger of the caller's CPU time (its own) and the
    # worker's (its children's), as each reads until no slice is left: the figure a loaded machine cannot show.
    critical = statistics.median(max(r[1] + r[2], r[3]) for r in default)
    target = round(1000 * args.processes / 50_000)
    figures: Figures = {
        "scan_wall_ms": _ms(_wall(default), target),
        "scan_cpu_ms": _ms(_cpu(default)),
        "scan_longer_half_cpu_ms": _ms(critical, target),
        "scan_caller_share": _ms(round(statistics.median(shares), 2), None, "ratio"),
        "worker_start_wall_ms": _ms(worker_start(args.runs)),
        "scan_one_process_wall_ms": _ms(_wall(one)),
        "scan_one_process_cpu_ms": _ms(_cpu(one), target),
        "scan_one_process_user_cpu_ms": _ms(statistics.median(r[1] for r in one)),
        "scan_one_process_system_cpu_ms": _ms(statistics.median(r[2] for r in one)),
        "python_floor_cpu_ms": _ms(_cpu(py)),
        "scan_to_python_floor": _ms(round(_cpu(one) / _cpu(py), 2), None, "ratio"),
    }
    if c:
        figures["c_floor_cpu_ms"] = _ms(_cpu(c))
        figures["c_floor_wall_ms"] = _ms(_wall(c))
        figures["scan_to_c_floor"] = _ms(round(_cpu(one) / _cpu(c), 2), None, "ratio")
    figures["scan_rss_growth_mib"] = _ms(round(rss_growth, 1), None, "MiB")
    return figures


def _holders(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` sleeping processes, each holding the same 20 fds: /dev/null, pipes, sockets, a file."""
    fds: list[int] = []
    try:
        fds += [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
        for _ in range(4):
            fds += os.pipe()
        for _ in range(2):
            fds += [s.detach() for s in socket.socketpair()]
        fds += [os.open(__file__, os.O_RDONLY) for _ in range(4)]
        return [
            subprocess.Popen(["sleep", "3600"], pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            for _ in range(count)
        ]
    finally:
        for fd in fds:
            os.close(fd)


def bench_real(args: argparse.Namespace, floor: str | None) -> Figures:
    """The scan and the C floor on this machine's /proc, per fd and scaled to 1,000,000 fds."""
    if floor is None:
        print("real /proc: no C compiler for the floor, skipped")
        return {}
    holders = _holders(args.holders)
    try:
        watch = gpu_watch()
        scans, floors = [], []
        for _ in range(args.runs):
            scans.append(timed(lambda: devctl_scan("/proc", watch, 1, None)))
            floors.append(timed(lambda: run_c_floor(floor, "/proc")))
    finally:
        for h in holders:
            h.kill()
        for h in holders:
            h.wait()
    counts = floors[-1][4]
    assert isinstance(counts, tuple)
    processes, fds = counts
    scan_cpu, floor_cpu = _cpu(scans), _cpu(floors)
    print(
        f"real /proc: {processes} processes, {fds} fds (with {args.holders} holders): "
        f"{1e6 * scan_cpu / fds:.2f} us of CPU per fd, the C floor {1e6 * floor_cpu / fds:.2f} us"
    )
    if not floor_cpu or not scan_cpu:  # too few fds for the clock's ticks (a small /proc, --holders 0): no ratio
        return {}
    return {
        "real_scan_to_c_floor": _ms(round(scan_cpu / floor_cpu, 2), None, "ratio"),
        "real_scan_1m_fds_cpu_ms": _ms(scan_cpu * 1_000_000 / fds, 1000),
        "real_c_floor_1m_fds_cpu_ms": _ms(floor_cpu * 1_000_000 / fds),
    }


def _run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} exited {done.returncode}: {done.stderr.strip()}")
    return wall


def _devices_ratio(devctl: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    plain, wide = [], []
    for _ in range(runs):
        plain.append(_run([*devctl, "devices"], env))
        wide.append(_run([*devctl, "devices", "-o", "wide"], env))
    return statistics.median(plain), statistics.median(wide)


def bench_columns(args: argparse.Namespace, proc: str) -> Figures:
    root = Path(tempfile.mkdtemp(prefix="dcw", dir="/tmp"))
    env = {**os.environ, "NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(HERE.parent)}
    devctl = [sys.executable, "-m", "devctl"]
    sim = subprocess.Popen(
        [*devctl, "sim", "--root", str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        line = sim.stdout.readline() if sim.stdout else ""
        if not line.startswith("export DEVCTL_ROOT="):
            raise SystemExit(f"devctl sim did not start: {line}")
        p, w = _devices_ratio(devctl, env, args.cli_runs)
        bp, bw = _devices_ratio(devctl, {**env, "DEVCTL_PROC": proc}, args.cli_runs)
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(30)
        except subprocess.TimeoutExpired:
            sim.kill()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "devices_ms": _ms(p),
        "devices_wide_ms": _ms(w),
        "devices_wide_ratio": _ms(round(w / p, 2), 1.3, "ratio"),
        "bench_node_processes": _ms(args.processes, None, "count"),
        "bench_node_devices_ms": _ms(bp),
        "bench_node_devices_wide_ms": _ms(bw),
        "bench_node_devices_wide_ratio": _ms(round(bw / bp, 2), 1.3, "ratio"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10_000)
    parser.add_argument("--fds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--holders", type=int, default=500, help="extra processes on the real /proc (0: none)")
    parser.add_argument("--cli-runs", type=int, default=3)
    parser.add_argument("--no-cli", action="store_true", help="skip devices -o wide against devices")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None, help="where to build it")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="devctl-bench-who-", dir=args.dir) as tmp:
        proc = Path(tmp, "proc")
        start = time.perf_counter()
        build(proc, args.processes, args.fds)
        print(f"built {args.processes} processes x {args.fds} fds in {time.perf_counter() - start:.1f} s")
        floor = c_floor(tmp)
        figures = bench_scan(args, str(proc), floor)
        figures.update(bench_real(args, floor))
        if not args.no_cli:
            figures.update(bench_columns(args, str(proc)))
    end = os.getloadavg()[0]
    print(f"\n{'figure':<32}{'value':>10}  target   (load average {load:.1f} at the start, {end:.1f} at the end)")
    for key, f in figures.items():
        target = f["target"]
        verdict = "" if target is None else ("met" if f["value"] <= target else "NOT met")  # type: ignore[operator]
        print(f"{key:<32}{f['value']:>10} {f['unit']:<6}{'' if target is None else target:>6}  {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps({"bench": "who", "figures": figures}, indent=1) + "\n")


if __name__ == "__main__":
    main()
