"""The kernel's log: ``<root>/dev/kmsg`` (or a saved file in its format), read without blocking, bounded.

The record format (the kernel's Documentation/ABI/testing/dev-kmsg)::

    PRI,SEQ,USEC,FLAGS[,caller=T123];text
     SUBSYSTEM=pci
     DEVICE=+pci:0000:3b:00.0

``PRI`` is ``facility * 8 + level``; ``SEQ`` a 64-bit sequence number; ``USEC`` microseconds since boot
on the printk clock; continuation lines start with one space (the kernel writes only ``KEY=value``
dictionary lines there; a saved log may hold others, kept in ``KernelRecord.more``).

The live device: every ``read()`` returns exactly one record; with ``O_NONBLOCK`` an empty buffer says
EAGAIN; EPIPE says the kernel overwrote the record devctl was about to read (the next read goes on from
the oldest one left, and the sequence gap says how many were lost). Only the character device 1:11
(``/dev/kmsg``) or a regular file is opened: a FIFO, a socket or any other device is refused from its
``stat`` before any ``open()`` (a FIFO would block an open, ``/dev/zero`` would read without end), and
the descriptor opened must be the inode checked. Reading ``/dev/kmsg`` needs root (CAP_SYSLOG when
``kernel.dmesg_restrict`` is 1): a PermissionError is one line, never an exception out of ``read_kmsg``.

Bounds: a line longer than ``MAX_LINE`` (8 KiB; the kernel's own longest record is 8 KiB with its
dictionary) is cut (``KernelRecord.cut``); bytes that are not UTF-8 are decoded with U+FFFD (escaping
for a terminal is the faces' job); a line that is not a record is counted and skipped; at most
``MAX_RECORDS`` records (20,000: the kernel's buffer, 128 KiB to a few MiB, holds fewer) are kept, the
newest. ``KmsgReader.follow`` waits for the device with the event loop's ``add_reader`` (``/dev/kmsg``
supports poll) and polls a regular file every ``interval`` seconds (0.5 s by default), so a recorder
can also call ``KmsgReader.poll()`` itself, which never blocks. A regular file's record ends at each
poll's end of file: its writer appends a record and its continuation lines in one write (the simulator
does), else a continuation line written later is counted as skipped.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone

from devctl.base.errors import DevctlError, ErrorKind
from devctl.model import SourceError
from devctl.model.kernel import KernelRecord, KmsgRead, RecordsLost
from devctl.node.files import FileReadError, file_type, read_file

MAX_LINE = 8 * 1024
MAX_RECORDS = 20_000
KMSG_DEVICE = (1, 11)  # major, minor of /dev/kmsg
SOURCE = "kmsg"
_READ_SIZE = 16 * 1024  # one record of the device: larger than the kernel's longest (8 KiB)
_CHUNK = 1024 * 1024  # a regular file is read in chunks of this
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEEDS_ROOT = "reading the kernel log needs root"

Opener = Callable[[str, int], int]
Item = KernelRecord | RecordsLost


class KmsgUnreadable(DevctlError):
    """The kernel log cannot be read; ``error`` is the one-line failure to show."""

    def __init__(self, error: SourceError):
        super().__init__(error.message)
        self.error = error
        self.kind = error.kind


def kmsg_path(root: str = "/", path: str | None = None) -> str:
    """``path`` when given (``--kmsg``), else ``<root>/dev/kmsg``."""
    return path if path else os.path.join(root, "dev", "kmsg")


def read_boot_time(proc: str = "/proc") -> datetime | None:
    """The boot time from ``<proc>/stat``'s ``btime`` (whole seconds, UTC), ``None`` when it does not say."""
    try:
        data = read_file(os.path.join(proc, "stat"), 4 * 1024 * 1024)
    except FileReadError:
        return None
    for line in data.splitlines():
        if line.startswith(b"btime "):
            try:
                return datetime.fromtimestamp(int(line.split()[1]), timezone.utc)
            except (ValueError, IndexError, OverflowError, OSError):
                return None
    return None


def parse_header(line: bytes) -> tuple[int, int, int, str | None, bytes] | None:
    """``(pri, seq, usec, caller, text)`` of a record's first line, or ``None`` if it is not one."""
    head, sep, text = line.partition(b";")
    if not sep:
        return None
    parts = head.split(b",")
    if len(parts) < 3:
        return None
    try:
        pri, seq, usec = int(parts[0]), int(parts[1]), int(parts[2])
    except ValueError:
        return None
    if pri < 0 or seq < 0 or usec < 0 or not parts[0].isdigit():
        return None
    caller = None
    for extra in parts[4:]:
        if extra.startswith(b"caller="):
            caller = extra[7:].decode("ascii", "replace")
    return pri, seq, usec, caller, text


def make_record(lines: list[bytes], boot: datetime | None, cut: bool = False) -> KernelRecord | None:
    """One record from its first line and its continuation lines (each without its newline)."""
    header = parse_header(lines[0])
    if header is None:
        return None
    pri, seq, usec, caller, text = header
    fields: list[tuple[str, str]] = []
    more: list[str] = []
    for extra in lines[1:]:
        value = extra[1:].decode("utf-8", "replace")
        key, eq, rest = value.partition("=")
        if eq and key and key.replace("_", "").isalnum() and key.isupper():
            fields.append((key, rest))
        else:
            more.append(value)
    return KernelRecord(
        seq=seq,
        usec=usec,
        time=None if boot is None else boot + timedelta(microseconds=usec),
        level=pri & 7,
        facility=pri >> 3,
        text=text.decode("utf-8", "replace"),
        fields=tuple(fields),
        more=tuple(more),
        caller=caller,
        cut=cut,
    )


class KmsgReader:
    """A kernel log open for reading: ``poll()`` returns what is there now and never blocks.

    ``start="end"`` skips what the log holds already (only new records); ``after_seq`` skips records up
    to that sequence number (a recorder that restarts goes on where it stopped). Raises
    ``KmsgUnreadable`` from the constructor only.
    """

    def __init__(
        self,
        path: str,
        *,
        boot_time: datetime | None = None,
        start: str = "begin",
        after_seq: int | None = None,
        opener: Opener = os.open,
    ):
        self.path = path
        self.boot_time = boot_time
        self.after_seq = after_seq
        self.skipped = 0
        self.fd, self.is_device = _open_kmsg(path, opener)
        self._last_seq: int | None = None
        self._carry = b""  # a regular file's unfinished last line
        self._carry_cut = False  # the carried line passed MAX_LINE: the rest of it is dropped
        self._pending: list[bytes] = []  # a regular file's record still taking continuation lines
        self._pending_cut = False
        if start == "end":
            os.lseek(self.fd, 0, os.SEEK_END)

    def fileno(self) -> int:
        """The descriptor: readable when the device has a record (a regular file always is)."""
        return self.fd

    def close(self) -> None:
        """Close the descriptor (again: nothing)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> KmsgReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def poll(self) -> list[Item]:
        """Every record there is now, with a ``RecordsLost`` before a record after a sequence gap."""
        out: list[Item] = []
        if self.is_device:
            self._poll_device(out)
        else:
            self._poll_file(out)
        return out

    async def follow(self, *, interval: float = 0.5) -> AsyncIterator[Item]:
        """Yield records (and gaps) as they come, until the caller stops iterating."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        if self.is_device:
            loop.add_reader(self.fd, ready.set)
        try:
            while True:
                for item in self.poll():
                    yield item
                if self.is_device:
                    await ready.wait()
                    ready.clear()
                else:
                    await asyncio.sleep(interval)
        finally:
            if self.is_device and self.fd >= 0:
                loop.remove_reader(self.fd)

    # --- the device: one record per read ------------------------------------------------------

    def _poll_device(self, out: list[Item]) -> None:
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            except BrokenPipeError:
                continue  # overwritten before read: the next record's sequence number says how many
            except InterruptedError:
                continue
            except OSError as err:
                if err.errno == errno.EINVAL:  # a record longer than the buffer: it cannot be read
                    self.skipped += 1
                return
            if not data:
                return
            lines = data.rstrip(b"\n").split(b"\n")
            cut = any(len(line) > MAX_LINE for line in lines)
            self._emit([line[:MAX_LINE] for line in lines], cut, out)

    # --- a regular file: lines, records begun by a header line -------------------------------

    def _poll_file(self, out: list[Item]) -> None:
        try:
            if os.fstat(self.fd).st_size < os.lseek(self.fd, 0, os.SEEK_CUR):  # truncated: read it anew
                os.lseek(self.fd, 0, os.SEEK_SET)
                self._carry, self._carry_cut = b"", False
            while chunk := os.read(self.fd, _CHUNK):
                self._feed(chunk, out)
        except OSError:
            pass  # an I/O error on a file: what was read stands; the next poll tries again
        self._flush(out)

    def _feed(self, chunk: bytes, out: list[Item]) -> None:
        lines = chunk.split(b"\n")
        tail = lines.pop()  # the unfinished last line (b"" after a newline)
        if lines:
            first = lines[0]
            if self._carry_cut:  # the end of a line already cut and shown: dropped
                self._carry_cut = False
            else:
                first = self._carry + first
                self._line(first[:MAX_LINE], len(first) > MAX_LINE, out)
            self._carry = b""
            for line in lines[1:]:
                self._line(line[:MAX_LINE], len(line) > MAX_LINE, out)
        if self._carry_cut:
            return
        self._carry += tail
        if len(self._carry) > MAX_LINE:  # never held beyond the bound: cut now, the rest dropped
            self._line(self._carry[:MAX_LINE], True, out)
            self._carry, self._carry_cut = b"", True

    def _line(self, line: bytes, cut: bool, out: list[Item]) -> None:
        if line.startswith(b" "):
            if self._pending:
                self._pending.append(line)
                self._pending_cut |= cut
            else:
                self.skipped += 1  # a continuation line with no record before it
            return
        self._flush(out)
        if line.strip():
            self._pending = [line]
            self._pending_cut = cut

    def _flush(self, out: list[Item]) -> None:
        if self._pending:
            lines, self._pending = self._pending, []
            self._emit(lines, self._pending_cut, out)

    def finish(self) -> list[Item]:
        """The last line of a file that does not end in a newline, as a record (a one-shot read's end)."""
        out: list[Item] = []
        if self._carry and not self.is_device:
            carry, self._carry = self._carry, b""
            self._line(carry[:MAX_LINE], False, out)
            self._flush(out)
        return out

    def _emit(self, lines: list[bytes], cut: bool, out: list[Item]) -> None:
        record = make_record(lines, self.boot_time, cut)
        if record is None:
            self.skipped += 1
            return
        last = self._last_seq
        self._last_seq = record.seq
        if self.after_seq is not None and record.seq <= self.after_seq:
            return
        if last is not None and record.seq > last + 1:
            out.append(RecordsLost(after=last, before=record.seq))
        out.append(record)


def _open_kmsg(path: str, opener: Opener) -> tuple[int, bool]:
    """A non-blocking descriptor on the kernel log device or a regular file, and whether it is the device."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise KmsgUnreadable(_failure(path, err)) from None
    is_device = stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == KMSG_DEVICE
    if not is_device and not stat.S_ISREG(info.st_mode):
        # /dev/kmsg is a character device itself: any other one is "another"
        what = "another character device" if stat.S_ISCHR(info.st_mode) else file_type(info.st_mode)
        raise KmsgUnreadable(
            SourceError(SOURCE, f"{path}: not the kernel log but {what}: not read", ErrorKind.WRONG_API)
        )
    try:
        fd = opener(path, _OPEN_FLAGS)
    except OSError as err:
        raise KmsgUnreadable(_failure(path, err)) from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise KmsgUnreadable(SourceError(SOURCE, f"{path}: changed while it was opened", ErrorKind.OTHER))
    return fd, is_device


def _failure(path: str, err: OSError) -> SourceError:
    if isinstance(err, PermissionError):
        return SourceError(SOURCE, f"{_NEEDS_ROOT} ({path}: permission denied)", ErrorKind.PERMISSION_DENIED)
    if isinstance(err, FileNotFoundError):
        return SourceError(SOURCE, f"{path}: no such file", ErrorKind.MISSING)
    return SourceError(SOURCE, f"{path}: {(err.strerror or str(err)).lower()}", ErrorKind.of_oserror(err))


def read_kmsg(
    path: str,
    *,
    proc: str = "/proc",
    boot_time: datetime | None = None,
    max_records: int = MAX_RECORDS,
    opener: Opener = os.open,
) -> KmsgRead:
    """Everything the kernel log holds now, the newest ``max_records`` kept; never raises, never blocks.

    ``boot_time`` defaults to ``<proc>/stat``'s; without one, every record's ``time`` is ``None``.
    """
    boot = boot_time if boot_time is not None else read_boot_time(proc)
    try:
        reader = KmsgReader(path, boot_time=boot, opener=opener)
    except KmsgUnreadable as failure:
        return KmsgRead(path=path, boot_time=boot, error=failure.error)
    kept: deque[KernelRecord] = deque(maxlen=max(1, max_records))
    lost: list[RecordsLost] = []
    seen = 0
    with reader:
        for item in reader.poll() + reader.finish():
            if isinstance(item, RecordsLost):
                lost.append(item)
            else:
                kept.append(item)
                seen += 1
    return KmsgRead(
        path=path,
        records=tuple(kept),
        lost=tuple(lost),
        skipped=reader.skipped,
        dropped=seen - len(kept),
        boot_time=boot,
    )
