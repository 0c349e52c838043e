"""The node journal: one append-only, checksummed, bounded file of NodeEvents (``devctl record`` / ``events``).

The file is one inode for its whole life, so that its ``flock`` is the lock (a second writer is
refused, never interleaved; readers take no lock) and a reader's open file never goes stale::

    header (64 bytes)  magic, format version, bound, records written, records dropped, CRC32
    records            magic, payload length, sequence, time (ms), CRC32, payload

(byte by byte in ``devctl.node.journal_format``). The payload is ``devctl.model.serial``'s JSON of the
NodeEvent without its time (the record's header holds it, to the millisecond as serial writes it). A
typical plugin health event with one holder is 236 bytes with its 28-byte record header: a 64 MiB
journal holds some 284,000 events (bench/bench_journal.py).

Bounded as a ring, not by moving bytes: records are appended until the next would pass the bound,
then the file is cut (``ftruncate``) just after the last record and writing goes on from the
start of the record area, each new record dropping the oldest records it overwrites (the count
kept in the header). ``fallocate(COLLAPSE_RANGE)`` would keep the file in order but needs an
extent filesystem and block-aligned records; the ring works on any filesystem, never moves a
record once written, and needs no second file. A reader reads the whole file (64 MiB in one
read), walks it record by record (resyncing on the record magic where bytes do not make a
record: the rest of an overwritten record, a torn write, a flipped bit) and orders by sequence;
the time in each record's header filters ``--since`` without decoding the JSON. Nothing before
a torn tail is ever lost: a new writer starts after the newest whole record.

Cost: ``append`` encodes and ``pwrite``s at once (a reader sees it, and a crash of the process
loses nothing); ``fdatasync`` and the header's counters follow at most once a second (``sync``),
and on ``close``. A power loss may lose the last second. ``append_many`` writes a batch in one call.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import fields
from datetime import datetime, timezone
from types import TracebackType

from devctl.base.errors import DevctlError, ErrorKind
from devctl.model import SourceError
from devctl.model.history import JournalRead, NodeEvent
from devctl.model.serial import PlainError, from_plain
from devctl.node.files import FileReadError, read_file
from devctl.node.journal_format import EPOCH as _EPOCH
from devctl.node.journal_format import (
    HEADER_SIZE,
    MAX_PAYLOAD,
    REC_HEADER,
)
from devctl.node.journal_format import MS as _MS
from devctl.node.journal_format import Header as _Header
from devctl.node.journal_format import Scan as _Scan
from devctl.node.journal_format import newest as _newest
from devctl.node.journal_format import pack_header as _pack_header
from devctl.node.journal_format import parse_header as _parse_header
from devctl.node.journal_format import record as _record
from devctl.node.journal_format import scan as _scan
from devctl.node.journal_format import skip_notices as _skip_notices
from devctl.node.journal_format import to_ms as _ms

DEFAULT_MAX_SIZE = 64 * 1024 * 1024
MIN_MAX_SIZE = 4 * (MAX_PAYLOAD + REC_HEADER)  # a ring of a few records at least
MAX_MAX_SIZE = 1024 * 1024 * 1024  # what one read of the reader holds in memory
SYNC_EVERY = 1.0  # seconds: fdatasync and the header's counters at most this often
_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


class JournalError(DevctlError):
    """The journal cannot be opened or written; ``str()`` is one line with the path."""

    def __init__(self, path: str, reason: str, kind: ErrorKind = ErrorKind.OTHER):
        super().__init__(f"journal {path}: {reason}")
        self.path = path
        self.reason = reason
        self.kind = kind


class JournalLocked(JournalError):
    """Another writer holds the journal (its flock); ``holder`` names it when /proc/locks does."""

    def __init__(self, path: str, holder: str | None):
        who = f"by {holder}" if holder else "by another process"
        super().__init__(path, f"already being recorded {who}: a second recorder is refused")
        self.holder = holder


class JournalFormatError(JournalError):
    """Not a journal, or one of another format version: refused, and never overwritten."""

    def __init__(self, path: str, reason: str):
        super().__init__(path, f"{reason}: refused, left as it is", ErrorKind.MALFORMED)


class JournalFull(JournalError):
    """The disk (or a quota, or the file-size limit) is full: recording stops; the journal stays readable."""

    def __init__(self, path: str, reason: str):
        super().__init__(path, f"recording stopped: {reason}", ErrorKind.TOO_LARGE)


# --- the writer ------------------------------------------------------------------------------------------


class JournalWriter:
    """The one writer of a journal file, holding its flock for as long as it is open (``with``)."""

    def __init__(self, path: str, fd: int, bound: int, header: _Header, scan: _Scan):
        self.path = path
        self._fd = fd
        self.bound = bound
        self._created_ms = header.created_ms
        newest = _newest(scan)
        self.seq = max(header.written, scan.seqs[newest] if newest >= 0 else 0)
        self.pos = HEADER_SIZE if newest < 0 else scan.offsets[newest] + REC_HEADER + scan.lengths[newest]
        self.dropped = header.dropped if header.intact else (self.seq - len(scan.seqs))
        # Offsets of the records of this lap (before pos) and of the older lap still ahead of it.
        self._behind = array("q", (o for o in scan.offsets if o < self.pos))
        self._ahead = array("q", (o for o in scan.offsets if o >= self.pos))
        self._ahead_i = 0
        self._last_sync = time.monotonic()
        self.failure: JournalError | None = None

    @classmethod
    def open(cls, path: str, max_size: int = DEFAULT_MAX_SIZE, *, dir_fd: int | None = None) -> JournalWriter:
        """Open (or create) the journal at ``path`` and take its lock; raises JournalError's kinds.

        With ``dir_fd`` (its directory, opened by ``journal_dir.open_dir_under``), the file is opened by its
        name in that directory, ``path`` naming it in messages. A file that is not a journal of this
        version is refused and left as it is. An existing journal already larger than ``max_size`` keeps
        its size as its bound (no record is cut).
        """
        check_bound(path, max_size)
        fd = _open_rw(path, dir_fd)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalLocked(path, _lock_holder(fd)) from None
            size = os.fstat(fd).st_size
            if size == 0:
                created = _ms(datetime.now(timezone.utc))
                _pwrite_all(fd, _pack_header(max_size, 0, 0, created), 0)
                header, data = _Header(max_size, 0, 0, created, True), b""
            else:
                data = _pread_all(fd, size)
                parsed = _parse_header(data)
                if isinstance(parsed, str):
                    raise JournalFormatError(path, parsed)
                header = parsed
            writer = cls(path, fd, max(max_size, size), header, _scan(data))
        except BaseException as err:
            os.close(fd)
            if isinstance(err, OSError):
                raise JournalError(path, _strerror(err), ErrorKind.of_oserror(err)) from None
            raise
        return writer

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def append(self, event: NodeEvent) -> None:
        """Write one event now (a reader sees it at once); raises JournalError (JournalFull: recording stopped)."""
        self.append_many((event,))

    def append_many(self, events: Iterable[NodeEvent]) -> None:
        """Write events in order, contiguous ones in one ``pwrite``; an event over MAX_PAYLOAD is refused alone."""
        if self.failure is not None:
            raise self.failure
        if self._fd < 0:
            raise JournalError(self.path, "closed")
        chunk = bytearray()
        chunk_at = self.pos
        too_large: JournalError | None = None
        for event in events:
            try:
                record = _record(event, self.seq + 1)
            except ValueError as err:
                too_large = JournalError(self.path, f"{err}: not recorded", ErrorKind.TOO_LARGE)
                continue
            if self.pos + len(record) > self.bound:
                self._write(chunk_at, chunk)
                chunk = bytearray()
                self._wrap()
                chunk_at = self.pos
            end = self.pos + len(record)
            ahead = self._ahead
            while self._ahead_i < len(ahead) and ahead[self._ahead_i] < end:
                self._ahead_i += 1  # the oldest record, overwritten
                self.dropped += 1
            self._behind.append(self.pos)
            chunk += record
            self.pos = end
            self.seq += 1
        self._write(chunk_at, chunk)
        if time.monotonic() - self._last_sync >= SYNC_EVERY:
            self.sync()
        if too_large is not None:
            raise too_large

    def sync(self) -> None:
        """The header's counters written and the file's data on disk (``fdatasync``): once a second at most."""
        if self.failure is not None or self._fd < 0:
            return
        self._last_sync = time.monotonic()
        try:
            os.pwrite(self._fd, _pack_header(self.bound, self.seq, self.dropped, self._created_ms), 0)
            os.fdatasync(self._fd)
        except OSError as err:
            self._fail(err)  # kept in ``failure``: the next append raises it

    def close(self) -> None:
        """Sync, then close the file (and so release its lock). Never raises."""
        if self._fd < 0:
            return
        self.sync()
        os.close(self._fd)
        self._fd = -1

    def _wrap(self) -> None:
        """Cut the file after the newest record (the older lap's rest is the oldest: dropped) and start over."""
        self.dropped += len(self._ahead) - self._ahead_i
        try:
            os.ftruncate(self._fd, self.pos)
        except OSError as err:
            raise self._fail(err) from None
        self._ahead, self._ahead_i, self._behind = self._behind, 0, array("q")
        self.pos = HEADER_SIZE

    def _write(self, at: int, chunk: bytearray) -> None:
        if chunk:
            try:
                _pwrite_all(self._fd, chunk, at)
            except OSError as err:
                raise self._fail(err) from None

    def _fail(self, err: OSError) -> JournalError:
        reason = _strerror(err)
        self.failure = JournalFull(self.path, reason) if err.errno in _FULL else JournalError(self.path, reason)
        return self.failure


def check_bound(path: str, max_size: int) -> None:
    """Raise JournalError unless ``max_size`` is a bound a journal may have: checked before anything is made."""
    if not MIN_MAX_SIZE <= max_size <= MAX_MAX_SIZE:
        raise JournalError(path, f"a bound of {max_size} bytes: between {MIN_MAX_SIZE} and {MAX_MAX_SIZE}")


def _open_rw(path: str, dir_fd: int | None = None) -> int:
    """A read-write descriptor on the regular file at ``path`` (its name in ``dir_fd``), made if absent."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW
    name = path if dir_fd is None else os.path.basename(path)
    try:
        return os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=dir_fd)
    except FileExistsError:
        pass
    except OSError as err:
        raise JournalError(path, _strerror(err), ErrorKind.of_oserror(err)) from None
    try:
        handle = os.open(name, getattr(os, "O_PATH", os.O_RDONLY) | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as err:
        raise JournalError(path, _strerror(err), ErrorKind.of_oserror(err)) from None
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise JournalFormatError(path, "not a regular file")
        return os.open(f"/proc/self/fd/{handle}", flags & ~os.O_NOFOLLOW)  # the inode checked, to write
    except OSError as err:
        raise JournalError(path, _strerror(err), ErrorKind.of_oserror(err)) from None
    finally:
        os.close(handle)


def _pwrite_all(fd: int, data: bytes | bytearray, at: int) -> None:
    view = memoryview(data)
    while view:  # a short write (the disk or RLIMIT_FSIZE) goes on: the next write says why it stops
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done


def _pread_all(fd: int, size: int) -> bytes:
    parts, at = [], 0
    while at < size and (part := os.pread(fd, min(size - at, 16 * 1024 * 1024), at)):
        parts.append(part)
        at += len(part)
    return b"".join(parts)


def _lock_holder(fd: int) -> str | None:
    """``pid N (comm)`` of the process whose flock is on this file, from /proc/locks; None when not told."""
    info = os.fstat(fd)
    inode = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        locks = read_file("/proc/locks", 16 * 1024 * 1024).decode("ascii", "replace")
    except FileReadError:
        return None
    for line in locks.splitlines():
        words = line.split()
        if len(words) > 5 and words[1] == "FLOCK" and words[5] == inode and words[4].isdigit():
            pid = words[4]
            try:
                comm = read_file(f"/proc/{pid}/comm", 256).decode("utf-8", "replace").strip()
            except FileReadError:
                return f"pid {pid}"
            return f"pid {pid} ({comm})"
    return None


def _strerror(err: OSError) -> str:
    return (err.strerror or str(err)).lower()


# --- the reader ------------------------------------------------------------------------------------------


def read_journal(path: str, since: datetime | None = None, until: datetime | None = None) -> JournalRead:
    """The events of the journal at ``path`` with ``since <= time <= until``, in the order written.

    Takes no lock (a writer may be appending): a record being written is a torn tail, skipped with a
    notice; every whole record before it is read. A file that cannot be read, or is not a journal of
    this version, is ``error`` and nothing else.
    """
    lo = -(2**63) if since is None else _ms(since)
    hi = 2**63 - 1 if until is None else _ms(until)
    return _read(path, lo, hi, 0)[0]


def _read(path: str, lo: int, hi: int, after: int) -> tuple[JournalRead, list[int]]:
    """read_journal's answer for times in [lo, hi] ms and sequences after ``after``, and those events' sequences."""
    try:
        data = read_file(path, MAX_MAX_SIZE)
    except FileReadError as err:
        return JournalRead(path, error=SourceError(path, err.reason, err.kind)), []
    header = _parse_header(data)
    if isinstance(header, str):
        return JournalRead(path, error=SourceError(path, header, ErrorKind.MALFORMED)), []
    scan = _scan(data)
    notices = _skip_notices(path, data, scan)
    order = sorted(range(len(scan.seqs)), key=scan.seqs.__getitem__)
    events, seqs = [], []
    seen: dict[bytes, tuple[object, ...]] = {}
    for i in order:
        if lo <= scan.times[i] <= hi and scan.seqs[i] > after:
            at = scan.offsets[i] + REC_HEADER
            try:
                events.append(_event(scan.times[i], data[at : at + scan.lengths[i]], seen))
                seqs.append(scan.seqs[i])
            except (ValueError, PlainError) as err:
                notices.append(f"{path}: record {scan.seqs[i]} unreadable ({err}): skipped")
    top = max(scan.seqs, default=0)
    dropped: int | None = header.dropped if header.intact else None
    if dropped is not None and not notices:  # the header's counters lag the writer by up to a second
        dropped = max(dropped, (scan.seqs[order[0]] if order else top + 1) - 1)
    if not header.intact:
        notices.append(f"{path}: the journal's header is damaged: the count of dropped records is unknown")
    read = JournalRead(
        path,
        events=tuple(events),
        first_time=_EPOCH + scan.times[order[0]] * _MS if order else None,
        records=len(order),
        dropped=dropped,
        written=max(header.written, top) if header.intact else top,
        notices=tuple(notices),
    )
    return read, seqs


def _event(ms: int, payload: bytes, seen: dict[bytes, tuple[object, ...]]) -> NodeEvent:
    """A record's event: its payload (an event without its time) read by serial once per distinct payload.

    A flapping device repeats the same payload: each is decoded once (bench/bench_journal.py: a full
    64 MiB journal of 284,600 events in 1.3 s, 1.0 s of it decoding).
    """
    rest = seen.get(payload)
    if rest is None:
        plain = json.loads(payload)
        plain["time"] = "1970-01-01T00:00:00Z"
        template = from_plain(NodeEvent, plain)
        rest = seen[payload] = tuple(getattr(template, name) for name in _AFTER_TIME)
    return NodeEvent(_EPOCH + ms * _MS, *rest)  # type: ignore[arg-type]  # the fields after time, in order


_AFTER_TIME = tuple(f.name for f in fields(NodeEvent))[1:]  # NodeEvent's first field is its time


def follow_journal(
    path: str, after: int = 0, *, poll: float = 0.5, stop: float | None = None
) -> Iterator[tuple[int, NodeEvent]]:
    """(sequence, event) for each record after sequence ``after``, as the writer adds them (``events -w``).

    Polls the file's size and modification time every ``poll`` seconds (no inotify: the path may be
    under ``--root`` on any filesystem) and reads it again when they changed; ends after ``stop``
    seconds if given. Records the ring drops before they are seen are missed.
    """
    last: tuple[int, int] | None = None
    deadline = None if stop is None else time.monotonic() + stop
    while deadline is None or time.monotonic() < deadline:
        try:
            info = os.stat(path)
            mark: tuple[int, int] | None = (info.st_size, info.st_mtime_ns)
        except OSError:
            mark = None
        if mark is not None and mark != last:
            last = mark
            read, seqs = _read(path, -(2**63), 2**63 - 1, after)
            for seq, event in zip(seqs, read.events, strict=True):
                after = seq
                yield seq, event
        time.sleep(poll)
