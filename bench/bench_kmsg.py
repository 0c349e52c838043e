"""Bench: reading a kernel log of 100,000 records (devctl.node.kmsg) and recognising its lines (analyze.kernel).

Writes a saved log in /dev/kmsg's format (a mix of plain lines, driver lines with their dictionary,
Xids and AER lines) into a temporary directory, then reads it with ``read_kmsg`` and runs ``describe``
over every record. Prints records per second for each step: a figure to note, not an assertion.

    .venv/bin/python bench/bench_kmsg.py [--records 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import datetime, timezone

from devctl.analyze.kernel import describe
from devctl.node.kmsg import read_kmsg

LINES = (
    b"6,%d,%d,-;EXT4-fs (vda): mounted filesystem with ordered data mode. Quota mode: none.\n",
    b"6,%d,%d,-;mlx5_core 0000:5e:00.0 ens1f0np0: Link up\n SUBSYSTEM=pci\n DEVICE=+pci:0000:5e:00.0\n",
    b"4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n",
    b"3,%d,%d,-;pcieport 0000:00:03.0: AER: Corrected error message received from 0000:3b:00.0\n",
    b"14,%d,%d,-;systemd[1]: Started session-42.scope - Session 42 of User root.\n",
)


def write_log(path: str, records: int) -> int:
    with open(path, "wb") as out:
        for seq in range(records):
            out.write(LINES[seq % len(LINES)] % (seq, seq * 1000))
    return os.path.getsize(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    boot = datetime(2026, 3, 1, tzinfo=timezone.utc)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kmsg")
        size = write_log(path, args.records)
        print(f"log: {args.records} records, {size / 1e6:.1f} MB")
        best_read = best_describe = float("inf")
        for _ in range(args.rounds):
            start = time.perf_counter()
            read = read_kmsg(path, boot_time=boot, max_records=args.records)
            mid = time.perf_counter()
            described = [describe(record) for record in read.records]
            end = time.perf_counter()
            best_read, best_describe = min(best_read, mid - start), min(best_describe, end - mid)
        assert len(described) == args.records and read.skipped == 0
        named = sum(1 for record in described if record.device is not None)
        print(f"read:     {best_read:.3f} s, {args.records / best_read:,.0f} records/s (best of {args.rounds})")
        print(f"describe: {best_describe:.3f} s, {args.records / best_describe:,.0f} records/s ({named} name a device)")


if __name__ == "__main__":
    main()
