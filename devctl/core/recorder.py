"""``devctl record``: the node followed as ``watch`` follows it, each event appended to the journal.

Sources, all on one loop: ``devctl.core.watch.watch`` (the one follower: every plugin and DRA driver,
their restarts and the kubelet's as the follower reports them, udev when asked), the pod-resources
List read every ``pods_every`` seconds and diffed (``kubelet`` ``allocated``/``freed`` with holders;
the newest List also gives every other event its holders), and the kernel log
(``KmsgReader.follow``: recognised device lines and records-lost notices; unreadable without root:
one line, the rest still recorded).

Nothing here blocks the follower: each item is turned into a ``NodeEvent`` and handed to the
``Coalescer`` at once (O(1)); a flusher writes what is due every ``FLUSH_EVERY`` seconds in one
``append_many``. The same (source, kind, resource, device, PCI address) again within ``WINDOW`` is
one event with its ``count``; at most ``MAX_PENDING`` distinct events wait, and past that new ones
are dropped and counted (said in a notice), never queued without bound. A full disk stops recording
(``Recorder.failure``); the caller says it in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from devctl.analyze.history import INDEX_SOURCES, NodeIndex, from_kernel, from_udev, from_watch, node_index
from devctl.core.collect import collect
from devctl.core.events import Notice, WatchEvent
from devctl.core.watch import watch
from devctl.model import NodePaths, NodeSnapshot, PodResources
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.kernel import RecordsLost
from devctl.model.udev import KernelEvent
from devctl.node.journal import JournalError, JournalWriter, read_journal
from devctl.node.journal_format import to_ms
from devctl.node.kmsg import KmsgReader, KmsgUnreadable, read_boot_time

WINDOW = 1.0  # seconds: the same event again within this is counted, not written again
MAX_PENDING = 4096  # distinct events waiting for their window to close
FLUSH_EVERY = 0.25  # seconds between the flusher's looks
PODS_EVERY = 10.0  # seconds between pod-resources Lists

Key = tuple[object, ...]


def _key(event: NodeEvent) -> Key:
    return (event.source, event.kind, event.resource, event.driver, event.device, event.pci)


class Coalescer:
    """Events waiting for their window: the first of a key is kept, repeats add to its count (bounded)."""

    def __init__(
        self, window: float = WINDOW, max_pending: int = MAX_PENDING, clock: Callable[[], float] = time.monotonic
    ):
        self.window = window
        self.max_pending = max_pending
        self.clock = clock
        self._pending: dict[Key, tuple[float, NodeEvent]] = {}  # key -> (when first seen, the event so far)
        self.dropped = 0  # events refused because too many distinct ones were waiting
        self.coalesced = 0  # repeats folded into an earlier event's count

    def add(self, event: NodeEvent) -> None:
        """Take one event; O(1), never blocks."""
        key = _key(event)
        held = self._pending.get(key)
        if held is not None:
            first, kept = held
            # The newest words and holders, the first time, every repeat counted.
            self._pending[key] = (first, replace(event, time=kept.time, count=kept.count + event.count))
            self.coalesced += 1
        elif len(self._pending) >= self.max_pending:
            self.dropped += 1
        else:
            self._pending[key] = (self.clock(), event)

    def due(self, everything: bool = False) -> list[NodeEvent]:
        """The events whose window has closed (all of them with ``everything``), oldest first, taken out."""
        now = self.clock()
        out = []
        for key, (first, event) in list(self._pending.items()):
            if everything or now - first >= self.window:
                del self._pending[key]
                out.append(event)
        return out

    def __len__(self) -> int:
        return len(self._pending)


def _allocations(pods: tuple[PodResources, ...] | None) -> dict[tuple[str, str], tuple[Holder, ...]]:
    """(resource, device ID) -> the containers holding it, from a pod-resources List."""
    index: dict[tuple[str, str], list[Holder]] = {}
    for pod in pods or ():
        for container in pod.containers:
            for devices in container.devices:
                for device_id in devices.ids:
                    holder = Holder(pod.namespace, pod.name, container.name)
                    index.setdefault((devices.resource, device_id), []).append(holder)
    return {key: tuple(dict.fromkeys(value)) for key, value in index.items()}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def allocation_events(
    before: dict[tuple[str, str], tuple[Holder, ...]], after: dict[tuple[str, str], tuple[Holder, ...]], at: datetime
) -> list[NodeEvent]:
    """``kubelet`` ``allocated``/``freed`` events between two pod-resources Lists (as holder indexes)."""
    out = []
    for key in sorted(
        after.keys() - before.keys() | {k for k in after.keys() & before.keys() if after[k] != before[k]}
    ):
        gained = tuple(h for h in after[key] if h not in before.get(key, ()))
        who = ", ".join(f"{h.namespace}/{h.pod}" + (f"/{h.container}" if h.container else "") for h in gained)
        out.append(
            NodeEvent(at, EventSource.KUBELET, "allocated", key[0], key[1], holders=gained, what=f"allocated to {who}")
        )
    for key in sorted(before.keys() - after.keys()):
        who = ", ".join(f"{h.namespace}/{h.pod}" for h in before[key])
        out.append(
            NodeEvent(at, EventSource.KUBELET, "freed", key[0], key[1], holders=before[key], what=f"freed by {who}")
        )
    return out


@dataclass
class RecordStats:
    """What one recording did: events written, repeats folded, events dropped under overload."""

    written: int = 0
    coalesced: int = 0
    dropped: int = 0


class Recorder:
    """Turns the node's items into journal records through a ``Coalescer``; ``put_nowait`` is a follower's timeline."""

    def __init__(
        self,
        writer: JournalWriter,
        *,
        coalescer: Coalescer | None = None,
        on_notice: Callable[[str], None] | None = None,
    ):
        self.writer = writer
        self.coalescer = coalescer if coalescer is not None else Coalescer()
        self.on_notice = on_notice or (lambda _m: None)
        self.snapshot: NodeIndex | None = None  # the joins of the newest pod-resources List (and CDI specs)
        self.failure: JournalError | None = None
        self.written = 0
        self._said_dropped = 0
        self._pods_seen: dict[tuple[str, str], tuple[Holder, ...]] | None = None
        self._claims_seen: set[ClaimDevice] | None = None

    # --- taking items (never blocks) -------------------------------------------------------------

    def put_nowait(self, item: WatchEvent | KernelEvent | Notice, /) -> None:
        """One item of the follower's timeline: events are recorded, notices passed on."""
        if isinstance(item, Notice):
            self.on_notice(item.message)
            return
        event = from_watch(item, self.snapshot) if isinstance(item, WatchEvent) else from_udev(item, self.snapshot)
        if event is not None:
            self.add(event)

    def add(self, event: NodeEvent) -> None:
        """One event to record (after its window)."""
        if self.failure is None:
            self.coalescer.add(event)

    # --- writing ---------------------------------------------------------------------------------

    def flush(self, everything: bool = False) -> None:
        """Write the events that are due; a failure is kept in ``failure`` (recording stops), never raised."""
        events = self.coalescer.due(everything)
        if self.coalescer.dropped > self._said_dropped:
            self.on_notice(f"recording falls behind: {self.coalescer.dropped - self._said_dropped} events dropped")
            self._said_dropped = self.coalescer.dropped
        if not events or self.failure is not None:
            return
        try:
            self.writer.append_many(events)
            self.written += len(events)
        except JournalError as err:
            self.failure = err

    def stats(self) -> RecordStats:
        return RecordStats(self.written, self.coalescer.coalesced, self.coalescer.dropped)

    # --- the sources -----------------------------------------------------------------------------

    async def _pods(self, paths: NodePaths, timeout: float, every: float) -> None:
        before = self._pods_seen
        while True:
            await asyncio.sleep(every)
            snapshot = await _node(paths, timeout)
            if snapshot.pods is None:
                continue  # the kubelet is not answering: no List is not "every device freed"
            after = _allocations(snapshot.pods)
            if before is not None:
                for event in allocation_events(before, after, _now()):
                    self.add(event)
            index = node_index(snapshot)
            claims = _claims(snapshot)
            if claims is not None and self._claims_seen is not None:
                for event in claim_events(self._claims_seen, claims, _now()):
                    # The holders then: the new List's for a prepared claim, the last one's for an unprepared one.
                    held = index if event.kind == "prepared" or self.snapshot is None else self.snapshot
                    self.add(replace(event, holders=held.holders.get((event.driver or "", event.device or ""), ())))
            self._claims_seen = claims if claims is not None else self._claims_seen
            self.snapshot, before = index, after

    async def _kernel(self, path: str, proc: str) -> None:
        last = _last_kernel_time(self.writer.path)
        try:
            reader = KmsgReader(path, boot_time=read_boot_time(proc))
        except KmsgUnreadable as failure:
            self.on_notice(f"{failure.error.message}: recording goes on without the kernel log")
            return
        with reader:
            async for item in reader.follow():
                if isinstance(item, RecordsLost):
                    self.on_notice(item.notice)
                    continue
                event = from_kernel(item, self.snapshot)
                if event is not None and (last is None or to_ms(event.time) > last):
                    self.add(event)

    async def _follow(self, paths: NodePaths, timeout: float, udev: bool) -> None:
        async with contextlib.aclosing(watch(paths, wait=True, udev=udev, timeout=timeout)) as items:
            async for item in items:
                self.put_nowait(item)

    async def _flusher(self) -> None:
        while self.failure is None:
            await asyncio.sleep(FLUSH_EVERY)
            self.flush()

    async def run(
        self,
        paths: NodePaths,
        stop: asyncio.Event,
        *,
        kmsg: str | None,
        timeout: float = 5.0,
        udev: bool = False,
        pods_every: float = PODS_EVERY,
    ) -> RecordStats:
        """Record until ``stop`` is set or the journal fails; everything waiting is written before it returns."""
        first = await _node(paths, timeout)
        if first.pods is not None:
            self.snapshot, self._pods_seen = node_index(first), _allocations(first.pods)
        self._claims_seen = _claims(first)
        tasks = [
            asyncio.ensure_future(self._follow(paths, timeout, udev)),
            asyncio.ensure_future(self._pods(paths, timeout, pods_every)),
            asyncio.ensure_future(self._flusher()),
        ]
        if kmsg is not None:
            tasks.append(asyncio.ensure_future(self._kernel(kmsg, paths.proc or "/proc")))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({stopper, tasks[2]}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*tasks, stopper):
                task.cancel()
            await asyncio.gather(*tasks, stopper, return_exceptions=True)
            self.flush(everything=True)
            self.writer.close()
        return self.stats()


async def _node(paths: NodePaths, timeout: float) -> NodeSnapshot:
    """What the events are joined with: who holds what, where (analyze.history.INDEX_SOURCES)."""
    return await collect(paths, timeout, want=INDEX_SOURCES)


ClaimDevice = tuple[str, str, str, str]  # namespace, claim, driver, pool/device


def _claims(snapshot: NodeSnapshot) -> set[ClaimDevice] | None:
    """Each prepared claim's devices in the DRA checkpoint; ``None`` when it was not read (unknown, not empty)."""
    if snapshot.dra_checkpoint is None:
        return None
    return {
        (c.namespace, c.name, d.driver, f"{d.pool}/{d.device}")
        for c in snapshot.dra_checkpoint.claims
        for d in c.devices
    }


def claim_events(before: set[ClaimDevice], after: set[ClaimDevice], at: datetime) -> list[NodeEvent]:
    """``dra`` ``prepared``/``unprepared`` events between two reads of the DRA checkpoint, a device each."""
    out = []
    for kind, keys in (("prepared", after - before), ("unprepared", before - after)):
        for ns, claim, driver, device in sorted(keys):
            what = f"claim {ns}/{claim} {kind}"
            out.append(NodeEvent(at, EventSource.DRA, kind, device=device, what=what, driver=driver))
    return out


def _last_kernel_time(path: str) -> int | None:
    """The newest kernel event's time in the journal (ms, as kept): a restarted recorder records only later lines."""
    read = read_journal(path)
    times = [to_ms(e.time) for e in read.events if e.source == EventSource.KERNEL]
    return max(times) if times else None
