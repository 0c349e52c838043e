"""The node journal's costs (issue 32): append rate, and ``read_journal`` over a full 64 MiB journal.

Three figures, each the best of ``--repeat`` runs (a shared machine's noise only ever adds time):

- append: events/s for ``append`` one at a time (one ``pwrite`` each), and for ``append_many`` in
  batches of 100, into a journal that wraps (the ring's dropping included); the CPU one core spends
  on 1,000 events/s follows from it.
- bytes per event: a typical plugin health event with one holder, header included.
- read: ``read_journal`` over a full 64 MiB journal, the whole of it (``events --since 24h`` when the
  journal holds one day or less), split into the file read, the walk (CRC of every record) and the
  decoding of the events (JSON + devctl.model.serial); and with a ``since`` that keeps 1 %.

    python bench/bench_journal.py            # print the figures
    python bench/bench_journal.py --size 16  # a 16 MiB journal
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import datetime, timedelta, timezone

from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.node import journal
from devctl.node import journal_format as fmt
from devctl.node.files import read_file

T0 = datetime(2026, 3, 4, tzinfo=timezone.utc)


def event(i: int) -> NodeEvent:
    return NodeEvent(
        time=T0 + timedelta(milliseconds=250 * i),
        source=EventSource.PLUGIN,
        kind="health",
        resource="nvidia.com/gpu",
        device=f"GPU-{i % 8}",
        pci=f"0000:{0x3B + i % 8:02x}:00.0",
        holders=(Holder("ml", f"train-{i % 50}", "main"),),
        what="Healthy -> Unhealthy",
    )


def best(repeat: int, fn):  # type: ignore[no-untyped-def]
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, help="the journal's bound, MiB (default 64)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    size = args.size * 1024 * 1024
    per_event = len(fmt.record(event(12345), 12345))
    full = size // per_event * 11 // 10  # a little more than the bound: it has wrapped once
    events = [event(i) for i in range(full)]
    print(
        f"bytes per event: {per_event} (header {fmt.REC_HEADER}); a {args.size} MiB journal holds ~{full * 10 // 11:,}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "journal")
        one = events[:50_000]

        def append_one() -> None:
            os.unlink(path) if os.path.exists(path) else None
            with journal.JournalWriter.open(path, journal.MIN_MAX_SIZE * 8) as w:
                for e in one:
                    w.append(e)

        t, _ = best(args.repeat, append_one)
        print(
            f"append, one at a time: {len(one) / t:,.0f} events/s ({t / len(one) * 1e6:.1f} µs each;"
            f" 1,000 events/s cost {t / len(one) * 1000 * 100:.2f} % of a core)"
        )

        def append_batches() -> None:
            os.unlink(path) if os.path.exists(path) else None
            with journal.JournalWriter.open(path, size) as w:
                for i in range(0, len(events), 100):
                    w.append_many(events[i : i + 100])

        t, _ = best(1, append_batches)
        print(f"append_many of 100: {len(events) / t:,.0f} events/s ({len(events):,} events, the ring wrapped once)")
        print(f"journal file: {os.path.getsize(path) / 2**20:.1f} MiB")

        t_file, data = best(args.repeat, lambda: read_file(path, journal.MAX_MAX_SIZE))
        t_scan, _ = best(args.repeat, lambda: fmt.scan(data))
        t_all, got = best(args.repeat, lambda: journal.read_journal(path))
        print(f"read_journal, everything: {t_all:.2f} s for {got.records:,} events (dropped {got.dropped:,})")
        print(
            f"  of which: file read {t_file:.3f} s, walk with CRCs {t_scan:.3f} s,"
            f" decoding {t_all - t_file - t_scan:.2f} s"
        )
        since = got.events[-1].time - (got.events[-1].time - got.events[0].time) / 100
        t_since, part = best(args.repeat, lambda: journal.read_journal(path, since=since))
        print(f"read_journal, since = the last 1 %: {t_since:.2f} s for {len(part.events):,} events")


if __name__ == "__main__":
    main()
