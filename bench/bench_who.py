"""Benchmark of the /proc scan behind `devctl who`: 50,000 processes x 20 fds.

    .venv/bin/python bench/bench_who.py [--processes 50000] [--fds 20] [--runs 5]

Builds a fake proc tree in a temporary directory: each process has a cmdline,
a cgroup file and ``--fds`` fd links, mostly to files, sockets and pipes, a
few under /dev (the tty, /dev/null) and one process in a hundred holding a
watched GPU node. Then scans it ``--runs`` times with devctl.node.procs.scan
and reports the median wall time and the peak RSS growth of the scan (target:
under 1 s). The tree is built on tmpfs (/dev/shm) where there is one, as /proc
is in memory too; a disk-backed tmp dir measures the disk instead. Building the
tree takes longer than scanning it. Figures go to docs/performance.md by hand;
this script only prints them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devctl.node.procs import Watch, scan

GPUS = [f"/dev/nvidia{i}" for i in range(8)]
OTHER = ["/var/log/app.log", "socket:[{n}]", "pipe:[{n}]", "/dev/pts/0", "/dev/null", "anon_inode:[eventfd]"]


def build(proc: Path, processes: int, fds: int) -> None:
    for pid in range(1, processes + 1):
        d = proc / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "cmdline").write_bytes(f"worker\0--id\0{pid}\0".encode())
        (d / "cgroup").write_text(f"0::/system.slice/worker-{pid}.service\n")
        for fd in range(fds):
            target = OTHER[fd % len(OTHER)].format(n=pid * 100 + fd)
            if pid % 100 == 0 and fd == fds - 1:
                target = GPUS[pid % len(GPUS)]
            os.symlink(target, d / "fd" / str(fd))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=50_000)
    parser.add_argument("--fds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None, help="where to build it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="devctl-bench-who-", dir=args.dir) as tmp:
        proc = Path(tmp, "proc")
        start = time.perf_counter()
        build(proc, args.processes, args.fds)
        print(f"built {args.processes} processes x {args.fds} fds in {time.perf_counter() - start:.1f} s")
        watch = Watch.of(GPUS, tmp)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        times, cpu = [], []
        for _ in range(args.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            result, errors = scan(str(proc), watch)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        assert result is not None and not errors, errors
        assert len(result.processes) == args.processes // 100, len(result.processes)
        median = statistics.median(times)
        print(
            f"scan: median {median * 1000:.0f} ms (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}) "
            f"over {args.runs} runs, CPU time median {statistics.median(cpu) * 1000:.0f} ms; "
            f"{len(result.processes)} holders; peak RSS growth {rss_growth / 1024:.1f} MiB"
        )
        print("target < 1000 ms:", "met" if median < 1.0 else "NOT met")


if __name__ == "__main__":
    main()
