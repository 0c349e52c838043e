"""The kernel log reader (devctl.node.kmsg): saved logs in /dev/kmsg's format, bounds, gaps, refusals."""

from __future__ import annotations

import asyncio
import errno
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from devctl.analyze.kernel import describe
from devctl.base.errors import ErrorKind
from devctl.model.kernel import RecordsLost
from devctl.node.kmsg import MAX_LINE, KmsgReader, read_boot_time, read_kmsg

BOOT = datetime(2026, 3, 1, 2, 0, 0, tzinfo=timezone.utc)


def write(tmp_path: Path, data: bytes, name: str = "kmsg") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_records_with_dictionary_and_continuation_lines(tmp_path: Path) -> None:
    """Header fields, the dictionary lines (KEY=value) and other continuation lines land where documented."""
    path = write(
        tmp_path,
        b"6,100,5000000,-;pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200\n"
        b" SUBSYSTEM=pci\n"
        b" DEVICE=+pci:0000:3b:00.0\n"
        b"4,101,6000000,-,caller=T42;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        b" a saved line that is no dictionary\n"
        b"14,102,7000000,-;written by a process\n",
    )
    read = read_kmsg(path, boot_time=BOOT)
    assert read.error is None and read.lost == () and read.skipped == 0
    first, second, third = read.records
    assert (first.seq, first.usec, first.level, first.facility) == (100, 5000000, 6, 0)
    assert first.fields == (("SUBSYSTEM", "pci"), ("DEVICE", "+pci:0000:3b:00.0"))
    assert first.field("DEVICE") == "+pci:0000:3b:00.0"
    assert second.caller == "T42" and second.level == 4
    assert second.more == ("a saved line that is no dictionary",)
    assert second.text.startswith("NVRM: Xid")
    assert (third.facility, third.level, third.from_kernel) == (1, 6, False)
    assert first.from_kernel


def test_boot_time_turns_usec_into_wall_time(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  1 2 3 4\nintr 5\nbtime 1772330400\nprocesses 9\n")
    assert read_boot_time(str(proc)) == datetime(2026, 3, 1, 2, 0, 0, tzinfo=timezone.utc)
    path = write(tmp_path, b"6,1,2500000,-;hello\n")
    (record,) = read_kmsg(path, proc=str(proc)).records
    assert record.time == datetime(2026, 3, 1, 2, 0, 2, 500000, tzinfo=timezone.utc)


def test_unknown_boot_time_is_no_time_not_the_epoch(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  1 2 3 4\n")  # no btime line
    path = write(tmp_path, b"6,1,2500000,-;hello\n")
    read = read_kmsg(path, proc=str(proc))
    assert read.boot_time is None and read.records[0].time is None


def test_long_line_is_cut_at_8_kib_and_the_next_record_survives(tmp_path: Path) -> None:
    long_text = b"x" * (3 * MAX_LINE)
    path = write(tmp_path, b"6,1,1,-;" + long_text + b"\n 6,2,2,-;not a header: a continuation\n6,3,3,-;after\n")
    read = read_kmsg(path, boot_time=BOOT)
    assert [r.seq for r in read.records] == [1, 3]
    assert read.records[0].cut and len(read.records[0].text) == MAX_LINE - len(b"6,1,1,-;")
    assert read.records[1].text == "after" and not read.records[1].cut


def test_long_line_across_many_small_reads_is_cut_once(tmp_path: Path) -> None:
    """A file followed while it is written: a line growing past 8 KiB over several polls is one cut record."""
    path = write(tmp_path, b"")
    reader = KmsgReader(path, boot_time=BOOT)
    with open(path, "ab") as out:
        out.write(b"6,1,1,-;" + b"y" * 5000)
        out.flush()
        assert reader.poll() == []
        out.write(b"y" * 5000)
        out.flush()
        got = reader.poll()
        out.write(b"y" * 5000 + b"\n6,2,2,-;next\n")
        out.flush()
        got += reader.poll()
    reader.close()
    assert [(r.seq, r.cut) for r in got if not isinstance(r, RecordsLost)] == [(1, True), (2, False)]


def test_binary_junk_never_raises_and_is_counted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        b"\x00\xff\xfe garbage\n"  # a continuation with no record before it
        b"\x1b[2J\x9b;not,a,header\n"
        b"6,1,1,-;caf\xc3\xa9 \xff\xfe\x1b[31m red\n"
        b"\n"
        b"6,2,2,-;ok\n",
    )
    read = read_kmsg(path, boot_time=BOOT)
    assert [r.seq for r in read.records] == [1, 2]
    assert read.records[0].text == "café \ufffd\ufffd\x1b[31m red"  # decoded, escaped later by the faces
    assert read.skipped == 2
    assert any("not records" in line for line in read.notices)


def test_sequence_gap_is_reported_with_its_count(tmp_path: Path) -> None:
    path = write(tmp_path, b"6,10,1,-;a\n6,11,2,-;b\n6,15,3,-;c\n6,16,4,-;d\n")
    read = read_kmsg(path, boot_time=BOOT)
    assert [r.seq for r in read.records] == [10, 11, 15, 16]
    (gap,) = read.lost
    assert (gap.after, gap.before, gap.count) == (11, 15, 3)
    assert "3 records lost (sequence 12..14)" in read.notices[0]


def test_bound_keeps_the_newest_and_says_how_many_were_not_kept(tmp_path: Path) -> None:
    path = write(tmp_path, b"".join(b"6,%d,%d,-;line %d\n" % (i, i, i) for i in range(50)))
    read = read_kmsg(path, boot_time=BOOT, max_records=10)
    assert [r.seq for r in read.records] == list(range(40, 50))
    assert read.dropped == 40


def test_empty_file_is_no_records_and_no_error(tmp_path: Path) -> None:
    read = read_kmsg(write(tmp_path, b""), boot_time=BOOT)
    assert read.error is None and read.records == () and read.notices == ()


def test_last_line_without_newline_is_read(tmp_path: Path) -> None:
    read = read_kmsg(write(tmp_path, b"6,1,1,-;first\n6,2,2,-;last"), boot_time=BOOT)
    assert [r.text for r in read.records] == ["first", "last"]


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes: it must be refused from its stat."""
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)

    async def run() -> object:
        return await asyncio.wait_for(asyncio.to_thread(read_kmsg, str(fifo), boot_time=BOOT), timeout=30)

    read = asyncio.run(run())
    assert read.error is not None  # type: ignore[attr-defined]
    assert "FIFO" in read.error.message and read.error.kind == ErrorKind.WRONG_API  # type: ignore[attr-defined]


def test_other_character_device_is_refused(tmp_path: Path) -> None:
    """/dev/null is a character device but not the kernel log (1:3, not 1:11): never read as one."""
    read = read_kmsg("/dev/null", boot_time=BOOT)
    assert read.error is not None and "another character device" in read.error.message


def test_permission_denied_is_one_line_saying_root_is_needed(tmp_path: Path) -> None:
    """The suite may run as root (CI): EACCES is injected through the opener, as /dev/kmsg gives it."""
    path = write(tmp_path, b"6,1,1,-;secret\n")

    def opener(p: str, flags: int) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", p)

    read = read_kmsg(path, boot_time=BOOT, opener=opener)
    assert read.error is not None and read.records == ()
    assert read.error.kind == ErrorKind.PERMISSION_DENIED
    assert read.error.message.startswith("reading the kernel log needs root")
    assert "\n" not in read.error.message


def test_missing_log_is_one_line(tmp_path: Path) -> None:
    read = read_kmsg(str(tmp_path / "nope"), boot_time=BOOT)
    assert read.error is not None and read.error.kind == ErrorKind.MISSING


def test_after_seq_skips_what_a_recorder_already_has(tmp_path: Path) -> None:
    path = write(tmp_path, b"6,1,1,-;a\n6,2,2,-;b\n6,3,3,-;c\n")
    with KmsgReader(path, boot_time=BOOT, after_seq=2) as reader:
        assert [getattr(item, "seq", None) for item in reader.poll()] == [3]


def append(path: str, data: bytes) -> None:
    with open(path, "ab") as out:
        out.write(data)


def test_follow_yields_records_appended_later(tmp_path: Path) -> None:
    path = write(tmp_path, b"6,1,1,-;before\n")

    async def run() -> list[int]:
        seen: list[int] = []
        with KmsgReader(path, boot_time=BOOT, start="end") as reader:
            follower = reader.follow(interval=0.05)
            append(path, b"6,2,2,-;after\n6,5,3,-;later\n")
            async for item in follower:
                seen.append(-1 if isinstance(item, RecordsLost) else item.seq)
                if len(seen) == 3:
                    break
            await follower.aclose()
        return seen

    assert asyncio.run(asyncio.wait_for(run(), timeout=30)) == [2, -1, 5]


def test_saved_log_joined_to_its_devices(tmp_path: Path) -> None:
    """The reader and the recogniser together: the DEVICE dictionary names the device a line's text does not."""
    path = write(
        tmp_path,
        b"3,7,10,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=2, GPU has fallen off the bus.\n"
        b"6,8,11,-;link is down\n SUBSYSTEM=pci\n DEVICE=+pci:0000:5E:00.1\n"
        b"6,9,12,-;systemd[1]: Started foo.\n",
    )
    described = [describe(r) for r in read_kmsg(path, boot_time=BOOT).records]
    assert [(r.device.kind, r.device.pci) if r.device else None for r in described] == [
        ("xid", "0000:3b:00.0"),
        ("pci", "0000:5e:00.1"),
        None,
    ]


@pytest.mark.skipif(not os.path.exists("/dev/kmsg"), reason="no /dev/kmsg on this machine")
def test_live_device_never_blocks() -> None:
    """The real /dev/kmsg (read only): either read until EAGAIN, or one line saying why not."""

    async def run() -> object:
        return await asyncio.wait_for(asyncio.to_thread(read_kmsg, "/dev/kmsg"), timeout=60)

    read = asyncio.run(run())
    if read.error is not None:  # type: ignore[attr-defined]
        assert "\n" not in read.error.message  # type: ignore[attr-defined]
    else:
        seqs = [r.seq for r in read.records]  # type: ignore[attr-defined]
        assert seqs == sorted(seqs)
