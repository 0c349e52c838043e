"""What recording costs on the default simulated node at rest (issue 32): CPU % of one core and RSS, beside ``watch``.

Starts ``devctl sim`` (the default scenario) under a fresh root, lets it settle, then runs
``devctl record`` and ``devctl watch -o json`` side by side against it for ``--seconds`` (30 by
default) and reads each process's CPU time (``/proc/PID/stat`` utime + stime) and resident size
(``VmRSS``, and its peak ``VmHWM``) from the kernel: the CPU % is over the measured window only, after
``--settle`` seconds of start-up (imports, the first snapshot). Also prints how many events the journal
holds and its size. Issue 32's target: under 1 % of one core and under 64 MiB RSS, no more than watch.

    python bench/bench_record.py               # 30 s
    python bench/bench_record.py --seconds 60
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEVCTL = [sys.executable, "-m", "devctl"]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)


def memory_kib(pid: int) -> tuple[int, int]:
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


def recorder_rate(n: int = 100_000) -> float:
    """Events/s through the recorder's own path: the coalescer, then ``append_many`` a flush at a time.

    Every event is distinct (nothing coalesced, the worst case), 1,000 to a flush as the flusher would
    find them at 4,000 events/s; the ring wraps (a 4 MiB journal).
    """
    from datetime import datetime, timezone

    from devctl.core.recorder import Coalescer, Recorder
    from devctl.model.history import EventSource, Holder, NodeEvent
    from devctl.node.journal import JournalWriter

    holder = (Holder("ml", "train-0", "trainer"),)
    t = datetime.now(timezone.utc)
    events = [
        NodeEvent(t, EventSource.PLUGIN, "health", "nvidia.com/gpu", f"GPU-{i}", None, holder, "Healthy -> Unhealthy")
        for i in range(n)
    ]
    with tempfile.TemporaryDirectory() as tmp, JournalWriter.open(f"{tmp}/journal", 4 * 1024 * 1024) as writer:
        recorder = Recorder(writer, coalescer=Coalescer(window=0.0, max_pending=2000))
        start = time.perf_counter()
        for i, event in enumerate(events):
            recorder.add(event)
            if i % 1000 == 999:
                recorder.flush()
        recorder.flush(everything=True)
        took = time.perf_counter() - start
    assert recorder.written == n and recorder.failure is None
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="dcb", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVCTL_")}
    env["DEVCTL_ROOT"] = root
    sim = subprocess.Popen(
        [*DEVCTL, "sim", "--root", root], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(f"{root}/var/lib/kubelet/device-plugins/nvidia-gpu.sock"):
            if time.monotonic() > deadline or sim.poll() is not None:
                raise SystemExit("the simulated node did not start")
            time.sleep(0.1)
        time.sleep(1.0)
        journal = f"{root}/journal"
        procs["record"] = subprocess.Popen(
            [*DEVCTL, "record", "--journal", journal], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs["watch"] = subprocess.Popen(
            [*DEVCTL, "watch", "-o", "json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(args.settle)
        start = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - t0
        print(f"default simulated node at rest, {elapsed:.0f} s after {args.settle:.0f} s of start-up:")
        for name, p in procs.items():
            used = cpu_seconds(p.pid) - start[name]
            rss, hwm = memory_kib(p.pid)
            print(
                f"  {name:7} CPU {100 * used / elapsed:5.2f} % of one core ({used:.2f} s)   "
                f"RSS {rss / 1024:5.1f} MiB (peak {hwm / 1024:5.1f} MiB)"
            )
        procs["record"].send_signal(signal.SIGINT)
        procs["record"].wait(30)
        from devctl.node.journal import read_journal

        read = read_journal(journal)
        print(f"  journal: {read.records} events, {os.path.getsize(journal)} bytes")
        rate = recorder_rate()
        print(f"  the recorder writes {rate:,.0f} distinct events/s (coalescer + append_many, 1,000 a flush)")
        load = os.getloadavg()[0]
        print(f"  load average {load:.1f} on {os.cpu_count()} cores")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(20)
        except subprocess.TimeoutExpired:
            sim.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
