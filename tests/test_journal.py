"""The node journal (devctl.node.journal, issue 32): what a recorder writes is what `devctl events` reads back.

Every case is judged as a user would: the events read back, the counters of `journal` in the JSON, the
one notice line, the refusal's one line, the file's bytes left alone. Writers that must be other
processes (flock is per open file description; RLIMIT_FSIZE is per process) run as subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from devctl.base.errors import ErrorKind
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.node import journal
from devctl.node import journal_format as fmt
from devctl.node.journal import (
    MIN_MAX_SIZE,
    JournalError,
    JournalFormatError,
    JournalFull,
    JournalLocked,
    JournalWriter,
    read_journal,
)

T0 = datetime(2026, 3, 4, 2, 47, 12, 345000, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[1]


def event(i: int, at: datetime | None = None) -> NodeEvent:
    """A plugin health flip of GPU-i, i seconds after T0, held by one container."""
    return NodeEvent(
        time=at or T0 + timedelta(seconds=i),
        source=EventSource.PLUGIN,
        kind="health",
        resource="nvidia.com/gpu",
        device=f"GPU-{i}",
        pci="0000:3b:00.0",
        holders=(Holder("ml", "train-0", "main"),),
        what=f"Healthy -> Unhealthy #{i}",
    )


def numbers(events: tuple[NodeEvent, ...]) -> list[int]:
    return [int(e.device.split("-")[1]) for e in events if e.device]


# A writer in a process of its own: `python -c WRITER path n [fsize-limit]`.
WRITER = textwrap.dedent(
    """
    import resource, signal, sys
    from datetime import datetime, timedelta, timezone
    from devctl.model.history import EventSource, NodeEvent
    from devctl.node.journal import JournalFull, JournalWriter, MIN_MAX_SIZE
    path, n = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:  # a full disk: writes past this size fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
    t0 = datetime(2026, 3, 4, tzinfo=timezone.utc)
    with JournalWriter.open(path, 4 * MIN_MAX_SIZE) as w:
        print("ready", flush=True)
        if n < 0:  # hold the lock until stdin closes
            sys.stdin.read()
        for i in range(max(n, 0)):
            try:
                at = t0 + timedelta(seconds=i)
                w.append(NodeEvent(at, EventSource.KERNEL, "xid", None, f"GPU-{i}", what="x" * 200))
            except JournalFull as err:
                print("FULL", i, err, flush=True)
                try:
                    w.append(NodeEvent(t0, EventSource.KERNEL, "xid"))
                except JournalFull as again:
                    print("AGAIN", again, flush=True)
                break
    print("done", flush=True)
    """
)


def writer_process(path: Path, n: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(n), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_events_read_back_equal_in_write_order_and_filtered_by_time(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    odd = NodeEvent(
        T0 + timedelta(seconds=2),
        EventSource.DRA,
        "health",
        "gpu.example.com",
        "pool/gpu-1",
        None,  # unknown stays unknown
        (Holder("ns", "p\x1b[2J", None),),
        "ECC ☃\nline",
        count=7,
        driver="gpu.example.com",
    )
    # The clock went back 1 h for the third event: kept where it was written, with the time it said.
    written = [event(0), event(1), odd, event(3, at=T0 - timedelta(hours=1)), event(4)]
    with JournalWriter.open(str(path)) as w:
        w.append(written[0])
        w.append_many(written[1:])
    got = read_journal(str(path))
    assert got.events == tuple(written)
    assert (got.records, got.dropped, got.written, got.notices, got.error) == (5, 0, 5, (), None)
    assert got.first_time == T0
    since = read_journal(str(path), since=T0 + timedelta(seconds=1), until=T0 + timedelta(seconds=2))
    assert since.events == (written[1], odd)
    assert since.records == 5  # the file still holds all of them


def test_a_second_writer_is_refused_naming_the_holder_and_nothing_is_interleaved(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    holder = writer_process(path, -1)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        before = path.read_bytes()
        with pytest.raises(JournalLocked) as refused:
            JournalWriter.open(str(path))
        assert "\n" not in str(refused.value)
        assert str(path) in str(refused.value) and "refused" in str(refused.value)
        if refused.value.holder is not None:  # /proc/locks told who
            assert f"pid {holder.pid}" in str(refused.value)
        assert path.read_bytes() == before
    finally:
        holder.communicate("", timeout=30)
    with JournalWriter.open(str(path)) as w:  # the lock went with the process
        w.append(event(1))
    assert numbers(read_journal(str(path)).events) == [1]


@pytest.mark.parametrize(
    "content",
    [
        b"# my notes, not a journal\n" * 10,
        fmt.MAGIC + b"\x02\x00" + bytes(200),  # format version 2
        fmt.MAGIC[:5],
    ],
    ids=["other-file", "version-2", "short"],
)
def test_a_file_that_is_not_a_journal_of_this_version_is_refused_and_left_byte_for_byte(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "journal"
    path.write_bytes(content)
    with pytest.raises(JournalFormatError) as refused:
        JournalWriter.open(str(path))
    assert "\n" not in str(refused.value) and refused.value.kind is ErrorKind.MALFORMED
    assert path.read_bytes() == content
    got = read_journal(str(path))
    assert got.error is not None and got.error.kind is ErrorKind.MALFORMED and got.events == ()
    assert path.read_bytes() == content
    if content.startswith(fmt.MAGIC + b"\x02"):
        assert "version 2" in str(refused.value)


def test_a_torn_tail_is_skipped_with_one_notice_and_the_next_writer_keeps_everything_before(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with JournalWriter.open(str(path)) as w:
        w.append_many(event(i) for i in range(10))
    size = path.stat().st_size
    os.truncate(path, size - 40)  # the last record cut mid-payload, as by a crash
    got = read_journal(str(path))
    assert numbers(got.events) == list(range(9))
    assert len(got.notices) == 1 and "cut short" in got.notices[0]
    with JournalWriter.open(str(path)) as w:
        w.append(event(10))
    again = read_journal(str(path))
    assert numbers(again.events) == [*range(9), 10]
    assert again.notices == ()  # the torn bytes were overwritten


def test_a_corrupt_record_in_the_middle_is_skipped_alone(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with JournalWriter.open(str(path)) as w:
        w.append_many(event(i) for i in range(10))
    data = bytearray(path.read_bytes())
    fifth = data.find(b"GPU-4")
    data[fifth] ^= 0x01  # one bit of record 5's payload
    path.write_bytes(bytes(data))
    got = read_journal(str(path))
    assert numbers(got.events) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert len(got.notices) == 1 and "corrupt" in got.notices[0]
    # A flipped length field (the record can no longer be walked over) costs that record alone too.
    data[fifth] ^= 0x01
    third = fmt.scan(bytes(data)).offsets[2]
    data[third + 4] ^= 0x80  # record 3's length: 128 bytes off
    path.write_bytes(bytes(data))
    got = read_journal(str(path))
    assert numbers(got.events) == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    assert len(got.notices) == 1


def test_bounded_the_file_never_passes_its_size_and_the_oldest_go_first_counted(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    bound = MIN_MAX_SIZE
    record = len(fmt.record(event(10_000), 10_000))
    total = 3 * bound // record  # three times the bound
    with JournalWriter.open(str(path), bound) as w:
        for start in range(0, total, 97):
            w.append_many(event(i) for i in range(start, min(start + 97, total)))
            assert path.stat().st_size <= bound
    got = read_journal(str(path))
    kept = numbers(got.events)
    assert kept == list(range(total - len(kept), total))  # the newest, all of them, in order
    assert len(kept) > (bound - fmt.HEADER_SIZE) // record // 2
    assert (got.dropped, got.written, got.records, got.notices) == (total - len(kept), total, len(kept), ())
    header = fmt.parse_header(path.read_bytes())  # the counts kept in the file itself, as closed
    assert not isinstance(header, str) and (header.written, header.dropped) == (total, total - len(kept))
    # A new writer goes on after the newest record, and the count goes on.
    with JournalWriter.open(str(path), bound) as w:
        w.append_many(event(i) for i in range(total, total + 500))
    again = read_journal(str(path))
    kept = numbers(again.events)
    assert kept[-1] == total + 499 and kept == list(range(kept[0], total + 500))
    assert again.dropped == total + 500 - len(kept) and path.stat().st_size <= bound


def test_a_reader_beside_a_writing_process_sees_whole_records_only(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    n = 20_000  # several laps of the writer's ring (4 x MIN_MAX_SIZE)
    proc = writer_process(path, n)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    reads = 0
    deadline = time.monotonic() + 60  # does not hang
    while proc.poll() is None and time.monotonic() < deadline:
        got = read_journal(str(path))
        assert got.error is None
        seen = numbers(got.events)
        if seen:  # no hole, no stranger
            assert seen == list(range(seen[0], seen[0] + len(seen)))
        assert all(e.what == "x" * 200 for e in got.events)
        assert all("cut short" in line for line in got.notices)  # a record being written, nothing else
        reads += 1
    assert proc.wait(timeout=60) == 0 and reads > 0
    final = read_journal(str(path))
    assert numbers(final.events)[-1] == n - 1 and final.written == n and final.notices == ()


def test_a_full_disk_stops_recording_with_one_failure_and_the_reader_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    limit = 64 * 1024
    proc = writer_process(path, 100_000, str(limit))
    out, _ = proc.communicate(timeout=60)
    lines = out.splitlines()
    full = [line for line in lines if line.startswith("FULL")]
    assert len(full) == 1 and "recording stopped" in full[0], out
    assert any(line.startswith("AGAIN") for line in lines)  # stopped stays stopped
    written = int(full[0].split()[1])
    got = read_journal(str(path))
    assert got.error is None and numbers(got.events) == list(range(written))
    assert len(got.notices) <= 1  # the record the disk cut, at most


def test_an_io_error_stops_recording_with_one_typed_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal"
    with JournalWriter.open(str(path)) as w:
        w.append(event(0))

        def failing(fd: int, data: object, at: int) -> int:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(journal.os, "pwrite", failing)
        with pytest.raises(JournalError) as failed:
            w.append(event(1))
        assert not isinstance(failed.value, JournalFull) and "input/output error" in str(failed.value)
        with pytest.raises(JournalError):
            w.append(event(2))
        monkeypatch.undo()
    assert numbers(read_journal(str(path)).events) == [0]


def test_a_missing_journal_is_one_error_not_an_exception(tmp_path: Path) -> None:
    got = read_journal(str(tmp_path / "nothing"))
    assert got.error is not None and got.error.kind is ErrorKind.MISSING and got.events == ()


def test_follow_journal_yields_new_records_in_order(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with JournalWriter.open(str(path)) as w:
        w.append_many(event(i) for i in range(3))
        followed = journal.follow_journal(str(path), after=2, poll=0.01, stop=30)  # sequences start at 1
        assert next(followed) == (3, event(2))
        w.append(event(3))
        assert next(followed) == (4, event(3))
