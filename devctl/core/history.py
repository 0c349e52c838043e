"""The node's history as ``devctl events`` reads it: the journal and the live kernel log, merged in time order.

``read_events`` reads the journal (``devctl.node.journal``) and what the kernel log still holds
(``devctl.node.kmsg``), turns each recognised kernel line into a ``NodeEvent``, drops the kernel
lines the journal already holds (the same time to the millisecond, device and words: the recorder
stamps a kernel event with the record's own time), and narrows to the SUBJECTs. ``follow_events``
goes on with both (``events -w``): the journal through ``follow_journal``, the kernel log through
``KmsgReader.follow``. The conversions of one item into an event are ``devctl.analyze.history``'s.

Faces call these and never ``devctl.node``: the journal's failures are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from devctl.analyze.history import matches
from devctl.base.errors import ErrorKind
from devctl.core.history_join import UNJOINED, LiveJoin, Rejoin, read_join
from devctl.model import NodePaths, SourceError
from devctl.model.history import EventSource, JournalRead, NodeEvent
from devctl.model.kernel import KmsgRead, RecordsLost
from devctl.model.serial import json_field
from devctl.node.journal import (
    DEFAULT_MAX_SIZE,
    JournalError,
    JournalFormatError,
    JournalFull,
    JournalLocked,
    JournalWriter,
    check_bound,
    follow_journal,
    read_journal,
)
from devctl.node.journal_dir import open_dir_under
from devctl.node.journal_format import to_ms
from devctl.node.kmsg import KmsgReader, KmsgUnreadable, kmsg_path, read_boot_time, read_kmsg

JOURNAL_UNDER_ROOT = "var/lib/devctl/journal"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

__all__ = [
    "DEFAULT_MAX_SIZE",
    "EventsAnswer",
    "JournalError",
    "JournalFormatError",
    "JournalFull",
    "JournalInfo",
    "JournalLocked",
    "JournalWriter",
    "LiveJoin",
    "check_bound",
    "default_journal",
    "default_kmsg",
    "follow_events",
    "open_journal",
    "parse_when",
    "read_events",
    "read_events_live",
    "read_join",
]


def default_journal(paths: NodePaths) -> str:
    """``<root>/var/lib/devctl/journal``: where ``record`` writes and ``events`` reads without ``--journal``."""
    return f"{paths.root.rstrip('/')}/{JOURNAL_UNDER_ROOT}"


def default_kmsg(paths: NodePaths, path: str | None = None) -> str:
    """``--kmsg`` when given, else ``<root>/dev/kmsg``."""
    return kmsg_path(paths.root, path)


def parse_when(text: str, now: datetime) -> datetime:
    """``10m``, ``2h``, ``1d`` (that long before ``now``) or an ISO 8601 time (UTC when it names no zone).

    Raises ValueError with a one-line reason.
    """
    match = _DURATION.match(text.strip())
    if match is not None:
        return now - timedelta(seconds=float(match.group(1)) * _UNIT[match.group(2)])
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r}: neither a duration (30s, 10m, 2h, 1d) nor a time (2026-12-03T02:47:00Z)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class JournalInfo:
    """cli.md's ``journal`` object: the file read, the oldest record's time, its records and those the bound dropped.

    ``records`` and ``dropped`` are None (unknown, ``null``) when the journal was not read: absent, unreadable or
    not a journal; never 0 for a file nobody read.
    """

    path: str
    from_: datetime | None = json_field("from")  # noqa: RUF009  # serial's marker, not a call per instance
    records: int | None = None
    dropped: int | None = None


@dataclass(frozen=True)
class EventsAnswer:
    """``devctl events``' answer: the events in time order, the journal read, and each failure (one line each).

    ``notices`` are lines for stderr (a torn tail, records lost); ``journal_found`` is
    false when there is no journal file at the path (then only the kernel log is shown).
    """

    events: tuple[NodeEvent, ...]
    journal: JournalInfo
    errors: tuple[SourceError, ...] = ()
    notices: tuple[str, ...] = ()
    journal_found: bool = True
    kernel_read: bool = True
    last_seq: int = 0  # the journal's newest record when read: ``follow_events(after=...)`` goes on from it
    # The kernel log's last record when read (-1: it held none; None: not read): ``follow_events(kernel_after=...)``
    # goes on from it, so a line written between the answer and the follow is not lost.
    kernel_seq: int | None = None

    def body(self) -> dict[str, object]:
        """The JSON document's keys before ``errors``: cli.md's ``events`` and ``journal``."""
        return {"events": self.events, "journal": self.journal}


def _kernel_key(event: NodeEvent) -> tuple[object, ...]:
    """A kernel line's identity across the journal and the live log: its time in whole ms as the journal keeps it."""
    return (to_ms(event.time), event.pci, event.kind, event.what)


@dataclass(frozen=True)
class _Read:
    """What the journal and the kernel log hold, read; the kernel's records not yet turned into events."""

    journal: JournalRead
    kmsg: KmsgRead


def _read(
    paths: NodePaths, journal: str | None, kmsg: str | None, since: datetime | None, until: datetime | None
) -> _Read:
    jpath = journal or default_journal(paths)
    return _Read(read_journal(jpath, since, until), read_kmsg(default_kmsg(paths, kmsg), proc=paths.proc or "/proc"))


def _kernel_events(read: KmsgRead, join: LiveJoin, since: datetime | None, until: datetime | None) -> list[NodeEvent]:
    events = []
    for record in read.records:
        event = join.kernel(record)
        if event is None or (since is not None and event.time < since) or (until is not None and event.time > until):
            continue
        events.append(event)
    return events


def _answer(
    read: _Read, join: LiveJoin, since: datetime | None, until: datetime | None, subjects: Sequence[str]
) -> EventsAnswer:
    jread = read.journal
    notices = list(jread.notices)
    errors: list[SourceError] = []
    found = True
    if jread.error is not None:
        if jread.error.kind == ErrorKind.MISSING:
            found = False  # a face says so (journal_found): the CLI once on stderr, the TUI not at all
        else:
            errors.append(SourceError("journal", f"{jread.path}: {jread.error.message}", jread.error.kind))
    kernel_error = read.kmsg.error
    kernel = [] if kernel_error is not None else _kernel_events(read.kmsg, join, since, until)
    notices += [] if kernel_error is not None else list(read.kmsg.notices)
    if kernel_error is not None:
        errors.append(kernel_error)
    known = {_kernel_key(e) for e in jread.events if e.source == EventSource.KERNEL}
    live = [e for e in kernel if _kernel_key(e) not in known]
    if subjects:
        live = [e for e in live if any(matches(e, s) for s in subjects)]
    merged = list(jread.events) + live
    merged.sort(key=lambda e: e.time)  # stable: the journal's own order among equal times
    if subjects:
        merged = [e for e in merged if any(matches(e, s) for s in subjects)]
    if live:  # the join's failures, said only when a line shown was joined without what failed
        notices += [e.message for e in join.errors if e.kind == ErrorKind.MISSING]  # no kubelet, no runtime here
        errors += [e for e in join.errors if e.kind != ErrorKind.MISSING]
    return EventsAnswer(
        events=tuple(merged),
        journal=_info(jread),
        errors=tuple(errors),
        notices=tuple(notices),
        journal_found=found,
        kernel_read=kernel_error is None,
        last_seq=jread.written or 0,
        kernel_seq=None if kernel_error is not None else max((r.seq for r in read.kmsg.records), default=-1),
    )


def read_events(
    paths: NodePaths,
    *,
    journal: str | None = None,
    kmsg: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    subjects: Sequence[str] = (),
    join: LiveJoin | None = None,
) -> EventsAnswer:
    """The journal's events and the kernel log's device lines in [since, until], merged, narrowed to ``subjects``.

    The kernel log's lines are joined with ``join`` (``read_join``) when given, else shown with no device and
    no holders; ``read_events_live`` reads the node for it, beside the journal and the kernel log.
    """
    return _answer(_read(paths, journal, kmsg, since, until), join or UNJOINED, since, until, subjects)


async def read_events_live(
    paths: NodePaths,
    *,
    timeout: float,
    journal: str | None = None,
    kmsg: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    subjects: Sequence[str] = (),
) -> EventsAnswer:
    """``read_events`` with the live kernel lines joined to their device and the holders it had at each line's time.

    The journal and the kernel log (in a thread) and the node's snapshot for the join (``read_join``, under
    ``timeout``) are read at once. A part of the join that failed is one line (in ``errors``, or in ``notices``
    for a kubelet or runtime absent from this root), said only when a live line was shown; the lines still appear.
    """
    read, join = await asyncio.gather(
        asyncio.to_thread(_read, paths, journal, kmsg, since, until), read_join(paths, timeout)
    )
    return _answer(read, join, since, until, subjects)


def _info(read: JournalRead) -> JournalInfo:
    if read.error is not None:  # nothing read: its counts are unknown, not 0
        return JournalInfo(read.path)
    return JournalInfo(read.path, read.first_time, read.records, read.dropped)


async def follow_events(
    paths: NodePaths,
    *,
    journal: str | None = None,
    kmsg: str | None = None,
    subjects: Sequence[str] = (),
    poll: float = 0.5,
    after: int | None = None,
    timeout: float | None = None,
    kernel_after: int | None = None,
) -> AsyncGenerator[NodeEvent | str, None]:
    """New events as they come (``events -w``), journal records after sequence ``after`` and new kernel lines.

    A ``str`` is a notice for stderr (records lost, the kernel log unreadable, a failure of the join). The
    journal is polled in a thread (``follow_journal`` sleeps between looks); the kernel log is followed from
    after record ``kernel_after`` (the answer's ``kernel_seq``), else from its end. Kernel lines the journal
    also records are shown once: the first seen. With ``timeout``, each new kernel line is joined to its device
    and its holders now (the holders at that moment: the line was just written), the node read again at most
    every ``history_join.REFRESH`` seconds (``Rejoin``), each read under ``timeout``.
    """
    out: asyncio.Queue[NodeEvent | str] = asyncio.Queue(maxsize=10_000)
    loop = asyncio.get_running_loop()
    seen: dict[tuple[object, ...], None] = {}
    stopping = False

    def offer(item: NodeEvent | str) -> None:
        if isinstance(item, NodeEvent):
            if subjects and not any(matches(item, s) for s in subjects):
                return
            if item.source == EventSource.KERNEL:
                key = _kernel_key(item)
                if key in seen:
                    return
                seen[key] = None
                if len(seen) > 4096:
                    del seen[next(iter(seen))]
        with contextlib.suppress(asyncio.QueueFull):  # a reader that cannot keep up loses the newest, never blocks
            out.put_nowait(item)

    jpath = journal or default_journal(paths)
    # ``after``: the sequence read_events saw last (EventsAnswer.last_seq), so that nothing falls between the two.
    seq = max(read_journal(jpath).written or 0, 0) if after is None else after

    def journal_thread() -> None:
        nonlocal seq
        while not stopping:  # a second at a time, so that the thread ends soon after the caller stops
            for got, event in follow_journal(jpath, seq, poll=poll, stop=1.0):
                seq = got
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(offer, event)

    async def kernel() -> None:
        try:
            reader = KmsgReader(
                default_kmsg(paths, kmsg),
                boot_time=read_boot_time(paths.proc or "/proc"),
                start="end" if kernel_after is None else "begin",
                after_seq=kernel_after,
            )
        except KmsgUnreadable as failure:
            offer(failure.error.message)
            return
        rejoin = Rejoin(paths, timeout, lambda e: offer(e.message)) if timeout is not None else None
        with reader:
            async for item in reader.follow(interval=poll):
                if isinstance(item, RecordsLost):
                    offer(item.notice)
                    continue
                join = await rejoin.current() if rejoin is not None else UNJOINED
                event = join.kernel(item, now=True)
                if event is not None:
                    offer(event)

    tasks = [asyncio.ensure_future(asyncio.to_thread(journal_thread)), asyncio.ensure_future(kernel())]
    try:
        while True:
            yield await out.get()
    finally:
        stopping = True
        for task in tasks:
            task.cancel()  # the journal's thread itself ends within a second
        await asyncio.gather(tasks[1], return_exceptions=True)


def open_journal(
    path: str, max_size: int = DEFAULT_MAX_SIZE, *, make_dir: bool = False, root: str | None = None
) -> JournalWriter:
    """The journal at ``path`` open for writing, its lock held; raises JournalLocked, JournalFormatError...

    The bound is checked first, before anything is made. With ``make_dir`` its directory is made if absent;
    with ``root`` too, that directory must stay under ``root`` (the default ``<root>/var/lib/devctl``): made
    and opened component by component, never through a link that leads out of the root (``node.journal_dir``).
    """
    check_bound(path, max_size)
    directory = os.path.dirname(path) or "."
    if root is None:
        if make_dir:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as err:
                raise JournalError(path, (err.strerror or str(err)).lower(), ErrorKind.of_oserror(err)) from None
        return JournalWriter.open(path, max_size)
    fd = open_dir_under(root, directory, path)
    try:
        return JournalWriter.open(path, max_size, dir_fd=fd)
    finally:
        os.close(fd)
