"""The node's history joined: one watch event, kernel record or udev event as a ``NodeEvent``, and a device's story.

Pure functions over model values (no I/O): the recorder (``devctl record``) and ``devctl events`` make
events with ``from_watch``, ``from_kernel`` and ``from_udev``; ``matches`` narrows them to a SUBJECT;
doctor and the TUI ask ``story`` what happened to one device.

A kernel line names a PCI address; the device on that function is found as ``devctl hw`` finds it
(``devctl.analyze.physical.physical_view``: the device nodes of the CDI names handed out for it, an ID that
is itself a PCI address, a time-sliced GPU's replicas on their GPU's function), and its holders are the
containers pod-resources said held it in ``snapshot`` (the node at that moment). A line devctl cannot join
keeps ``device=None``: unknown, not guessed. A line read later than it was written (``devctl events`` reading
the live kernel log) keeps only the holders that already held the device then: ``held_then``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from devctl.analyze.hardware import cdi_addresses
from devctl.analyze.kernel import describe
from devctl.analyze.physical import DEVICE_PLUGIN, DRA, physical_view
from devctl.model import CDI, CHECKPOINT, DRA_CHECKPOINT, HEALTHY, POD_LIST, UNHEALTHY, NodeSnapshot
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.kernel import KernelRecord
from devctl.model.pci import normalize_pci_address
from devctl.model.runtime import PodRuntimeState
from devctl.model.udev import KernelEvent

# The watch words (devctl.core.events: the core sits above this room, so they are repeated here).
_SNAPSHOT, _ADDED, _REMOVED, _HEALTH, _TOPOLOGY = "snapshot", "added", "removed", "health", "topology"
_DISCONNECTED, _RECONNECTED = "disconnected", "reconnected"
# The plugin's (or driver's) own start: it came back on its socket, or the kubelet registered it. A ``snapshot``
# is only the watcher's (the recorder's) first look at a plugin already running: it says nothing of the plugin.
STARTS = (_RECONNECTED, "registered")

BEFORE_WINDOW = timedelta(seconds=60)  # an event this long before a flip may have caused it
FLAP_WINDOW = timedelta(hours=1)

_PCI_IN_PATH = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_TO = re.compile(r"(?:-> |added \()(\w+)")

# (resource or DRA driver, device ID or <pool>/<device>)
DeviceKey = tuple[str, str]


class WatchItem(Protocol):
    """What ``from_watch`` reads of a ``devctl.core.events.WatchEvent``."""

    @property
    def time(self) -> datetime: ...
    @property
    def resource(self) -> str | None: ...
    @property
    def event(self) -> str: ...
    @property
    def device(self) -> str | None: ...
    @property
    def from_(self) -> str | None: ...
    @property
    def to(self) -> str | None: ...
    @property
    def devices(self) -> int | None: ...
    @property
    def healthy(self) -> int | None: ...
    @property
    def message(self) -> str | None: ...


@dataclass(frozen=True)
class NodeIndex:
    """The joins of one snapshot: holders by device, PCI address by device, devices by PCI address."""

    holders: dict[DeviceKey, tuple[Holder, ...]] = field(default_factory=dict)
    pci: dict[DeviceKey, str] = field(default_factory=dict)
    on_pci: dict[str, tuple[DeviceKey, ...]] = field(default_factory=dict)
    dra_drivers: frozenset[str] = frozenset()


def _holders(snapshot: NodeSnapshot) -> tuple[dict[DeviceKey, tuple[Holder, ...]], set[str]]:
    found: dict[DeviceKey, list[Holder]] = {}
    drivers: set[str] = set()
    for pod in snapshot.pods or ():
        for c in pod.containers:
            holder = Holder(pod.namespace, pod.name, c.name)
            for group in c.devices:
                for device_id in group.ids:
                    found.setdefault((group.resource, device_id), []).append(holder)
            for claim in c.dynamic_resources:
                for d in claim.devices:
                    drivers.add(d.driver)
                    found.setdefault((d.driver, f"{d.pool}/{d.device}"), []).append(holder)
    return {k: tuple(dict.fromkeys(v)) for k, v in found.items()}, drivers


def _known_ids(snapshot: NodeSnapshot) -> Iterable[DeviceKey]:
    if snapshot.allocatable is not None:
        for group in snapshot.allocatable.devices:
            yield from ((group.resource, i) for i in group.ids)
    for entry in snapshot.checkpoint.entries if snapshot.checkpoint else ():
        for ids in entry.device_ids.values():
            yield from ((entry.resource, i) for i in ids)


# What ``node_index`` joins from, read by the recorder and by ``events`` for live kernel lines alike: the
# pod-resources List, the CDI specs, the DRA checkpoint and the kubelet's checkpoint (each allocation's CDI
# names: a time-sliced GPU's replicas lead to its function, as in ``devctl hw``): who holds what, where.
INDEX_SOURCES = frozenset({POD_LIST, CDI, DRA_CHECKPOINT, CHECKPOINT})


def node_index(snapshot: NodeSnapshot | None) -> NodeIndex:
    """The joins ``from_*`` use, made once per snapshot (callers converting many events may keep it)."""
    if snapshot is None:
        return NodeIndex()
    holders, drivers = _holders(snapshot)
    for claim in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        drivers.update(d.driver for d in claim.devices)
    # The join ``devctl hw`` shows (analyze.physical): CDI names, device nodes, an ID that is an address, and a
    # time-sliced GPU's replicas ``<id>::<n>`` on the function their GPU is on.
    view = physical_view(snapshot)
    pci = {(d.resource, d.id): p.pci for p in view.devices for d in p.logical if d.kind in (DEVICE_PLUGIN, DRA)}
    for key, address in cdi_addresses(snapshot).items():
        pci.setdefault(key, address)
    for key in [*holders, *_known_ids(snapshot)]:
        own = normalize_pci_address(key[1])
        if own is not None:
            pci.setdefault(key, own)  # an SR-IOV VF is listed by its address
    on_pci: dict[str, list[DeviceKey]] = {}
    for key, address in pci.items():
        on_pci.setdefault(address, []).append(key)
    return NodeIndex(holders, pci, {a: tuple(sorted(k)) for a, k in on_pci.items()}, frozenset(drivers))


def _index(snapshot: NodeSnapshot | NodeIndex | None) -> NodeIndex:
    return snapshot if isinstance(snapshot, NodeIndex) else node_index(snapshot)


def _is_dra(name: str | None, index: NodeIndex) -> bool:
    return name is not None and (name in index.dra_drivers or "/" not in name)


def _watch_what(event: WatchItem) -> str:
    if event.event in (_SNAPSHOT, _RECONNECTED, _DISCONNECTED):
        counts = f"{event.devices} devices, {event.healthy} healthy" if event.devices is not None else ""
        return ", ".join(x for x in (event.event, counts, event.message or "") if x)
    if event.event == _ADDED:
        text = f"added ({event.to})" if event.to else "added"
    elif event.event == _REMOVED:
        text = f"removed ({event.from_})" if event.from_ else "removed"
    elif event.event == _TOPOLOGY:
        text = f"NUMA {event.from_} -> {event.to}"
    else:
        text = f"{event.from_} -> {event.to}" if event.from_ is not None else f"-> {event.to}"
    return f"{text}: {event.message}" if event.message else text


def from_watch(event: WatchItem, snapshot: NodeSnapshot | NodeIndex | None) -> NodeEvent | None:
    """A plugin's or DRA driver's watch event: ``plugin`` or ``dra``, its device's PCI address and holders.

    ``snapshot``/``reconnected`` (the whole list seen: the plugin started or came back) and
    ``disconnected`` keep the watch's word as ``kind``; an event with no resource is ``None``.
    """
    if event.resource is None:
        return None
    index = _index(snapshot)
    dra = _is_dra(event.resource, index)
    key = (event.resource, event.device) if event.device is not None else None
    return NodeEvent(
        time=event.time,
        source=EventSource.DRA if dra else EventSource.PLUGIN,
        kind=event.event,
        resource=None if dra else event.resource,
        device=event.device,
        pci=index.pci.get(key) if key else None,
        holders=index.holders.get(key, ()) if key else (),
        what=_watch_what(event),
        driver=event.resource if dra else None,
        health=event.to if event.event == _HEALTH else None,
    )


def _joined(pci: str | None, index: NodeIndex) -> tuple[str | None, str | None, str | None, tuple[Holder, ...]]:
    """(resource, DRA driver, device, holders) of the device on ``pci``; a held device first."""
    keys = index.on_pci.get(pci, ()) if pci else ()
    if not keys:
        return None, None, None, ()
    name, device = max(keys, key=lambda k: bool(index.holders.get(k)))
    holders = tuple(dict.fromkeys(h for k in keys for h in index.holders.get(k, ())))
    if _is_dra(name, index):
        return None, name, device, holders
    return name, None, device, holders


def from_kernel(record: KernelRecord, snapshot: NodeSnapshot | NodeIndex | None) -> NodeEvent | None:
    """A kernel line that names a device: source ``kernel``, kind ``xid``/``aer``/``fallen-off-bus``/``pci``.

    The device on its PCI function and that device's holders come from ``snapshot``; ``None`` for a
    line that names no device, or one whose time is unknown (no boot time).
    """
    described = record if record.device is not None else describe(record)
    mention = described.device
    if mention is None or described.time is None:
        return None
    resource, driver, device, holders = _joined(mention.pci, _index(snapshot))
    return NodeEvent(
        time=described.time,
        source=EventSource.KERNEL,
        kind=mention.kind,
        resource=resource,
        device=device or mention.gpu_uuid,
        pci=mention.pci,
        holders=holders,
        what=mention.what,
        driver=driver or mention.driver,
    )


def _created(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def held_since(holder: Holder, pod: PodRuntimeState | None, *, dra: bool) -> datetime | None:
    """The newest time by which ``holder`` surely held what it holds now; None when the runtime does not say.

    A device plugin's devices are allocated to a container for the life of its pod (the kubelet keeps them by pod
    UID and container name across restarts), and a DRA claim is prepared before its pod's sandbox is made: so the
    earliest creation the runtime knows of that container (DRA: of the pod's sandbox), among the sandboxes of the
    pod's current UID (a pod of the same name made later is another pod), is a time at which it already held it.
    """
    if pod is None or not pod.sandboxes:
        return None
    current = next((s for s in pod.sandboxes if s.state == "ready"), pod.sandboxes[0])
    mine = [s for s in pod.sandboxes if s.uid == current.uid]
    if dra or holder.container is None:
        stamps = [s.created_at for s in mine]
    else:
        ids = {s.id for s in mine}
        stamps = [c.created_at for c in pod.containers if c.sandbox_id in ids and c.name == holder.container]
    known = [t for t in map(_created, stamps) if t is not None]
    return min(known) if known else None


def held_then(
    event: NodeEvent, runtime: Mapping[tuple[str, str], PodRuntimeState] | None, *, now: bool = False
) -> NodeEvent:
    """``event`` with only the holders that already held its device at ``event.time``.

    ``from_kernel`` joins a line to the holders of a snapshot read now, but a live kernel line may be hours
    old: a holder of now held the device then exactly when its container (DRA: its pod sandbox) existed then,
    since a device plugin's devices and a DRA claim are fixed for that life. So a holder is kept only when the
    CRI runtime (``runtime``: (namespace, pod) -> its sandboxes and containers) says it was created at or
    before the line's time (``held_since``); when the runtime was not read (``None``) or does not say, none is
    kept: a holder that cannot be shown to have held it is left out, never guessed. A past line of a device
    with none kept has its holders unknown (``holders_known`` False: a pod gone since may have held it); a line
    written ``now`` (``events -w``) has the holders of now.
    """
    if now or event.device is None:
        return event  # the holders of now, or a line joined to no device (``driver`` is then the kernel's)
    kept = []
    if runtime is not None:
        dra = event.resource is None  # from_kernel joined it to a DRA driver's device
        for holder in event.holders:
            since = held_since(holder, runtime.get((holder.namespace, holder.pod)), dra=dra)
            if since is not None and since <= event.time:
                kept.append(holder)
    return replace(event, holders=tuple(kept), holders_known=None if kept else False)


def from_udev(event: KernelEvent, snapshot: NodeSnapshot | NodeIndex | None) -> NodeEvent | None:
    """A udev event: its PCI function (the name, else the last function in its devpath) and the device on it."""
    pci = normalize_pci_address(event.name)
    if pci is None:
        found = _PCI_IN_PATH.findall(event.devpath)
        pci = normalize_pci_address(found[-1]) if found else None
    resource, driver, device, holders = _joined(pci, _index(snapshot))
    what = f"{event.action} {event.subsystem} {event.name}" + (f" ({event.driver})" if event.driver else "")
    return NodeEvent(
        time=event.time,
        source=EventSource.UDEV,
        kind=event.action,
        resource=resource,
        device=device,
        pci=pci,
        holders=holders,
        what=what,
        driver=driver or event.driver,
    )


def matches(event: NodeEvent, subject: str) -> bool:
    """Whether ``subject`` names the event's resource, driver, device, PCI address (any spelling) or a holder.

    A DRA device matches by ``<pool>/<device>`` or by its name alone; a holder by ``ns/name`` or ``name``.
    """
    subject = subject.strip()
    if not subject:
        return False
    if subject in (event.resource, event.driver, event.device):
        return True
    if event.device is not None and "/" in event.device and subject == event.device.rpartition("/")[2]:
        return True
    if event.pci is not None and normalize_pci_address(subject) == event.pci:
        return True
    return any(subject in (h.pod, f"{h.namespace}/{h.pod}") for h in event.holders)


# --- a device's story ----------------------------------------------------------------------------


def health_after(event: NodeEvent) -> str | None:
    """The health an ``added`` or ``health`` event left the device in (``Healthy``, ``Unhealthy``...), else None."""
    if event.kind not in (_HEALTH, _ADDED) or event.source not in (EventSource.PLUGIN, EventSource.DRA):
        return None
    match = _TO.search(event.what)
    return match.group(1) if match else None


def _of(event: NodeEvent, resource: str, device: str) -> bool:
    return event.device == device and resource in (event.resource, event.driver)


def _starts_of(event: NodeEvent, resource: str) -> bool:
    return event.kind in STARTS and resource in (event.resource, event.driver) and event.device is None


def _since_start(
    resource: str, device: str, pci: str | None, flip: NodeEvent | None, started: datetime | None, flips: int
) -> DeviceStory | None:
    """The story of a device unhealthy ever since its plugin listed it (``added`` unhealthy, or no flip since its
    plugin's own start); None when the journal holds a flip to unhealthy after that."""
    if flip is not None and flip.kind == _ADDED:
        at = flip.time
    elif flip is None and started is not None:
        at = started
    else:
        return None
    return DeviceStory(resource, device, pci, UNHEALTHY, at, True, flips=flips, started=at)


@dataclass(frozen=True)
class DeviceStory:
    """What the journal says of one device: since when it is unhealthy, what came just before, its flips.

    ``unhealthy_since`` is the flip to unhealthy that still holds (or the plugin's start when
    ``since_start``); ``None`` when the device is healthy or the journal does not say. ``before`` is the
    last event within 60 s before that flip on its PCI address (or naming the device), ``gap`` the seconds
    between them. ``flips`` counts health changes within the hour before ``now``.
    """

    resource: str
    device: str
    pci: str | None = None
    health: str | None = None
    unhealthy_since: datetime | None = None
    since_start: bool = False
    before: NodeEvent | None = None
    gap: float | None = None
    flips: int = 0
    started: datetime | None = None

    @property
    def line(self) -> str | None:
        """``unhealthy since 02:47:12, 0.4 s after Xid 79 on 0000:3b:00.0`` (times UTC), None when healthy."""
        if self.unhealthy_since is None:
            return None
        text = f"unhealthy since {self.unhealthy_since:%H:%M:%S}"
        if self.since_start:
            text += " (since its plugin started, never re-evaluated)"
        if self.before is not None and self.gap is not None:
            where = f" on {self.before.pci}" if self.before.pci else ""
            text += f", {self.gap:.1f} s after {self.before.what}{where}"
        return text


def _before(
    events: Sequence[NodeEvent], flip: NodeEvent, pci: str | None, resource: str, device: str
) -> NodeEvent | None:
    found = None
    for e in events:
        if e is flip or e.time > flip.time or flip.time - e.time > BEFORE_WINDOW:
            continue
        if e.kind == _HEALTH and _of(e, resource, device):
            continue
        if (pci is not None and e.pci == pci) or (e.source == EventSource.KERNEL and _of(e, resource, device)):
            found = e  # events come in journal order: the last one wins
    return found


def story(
    events: Sequence[NodeEvent],
    resource: str,
    device: str,
    now: datetime,
    *,
    unhealthy: bool | None = None,
) -> DeviceStory:
    """The story of ``device`` of ``resource`` (or DRA driver) in ``events`` (journal order) up to ``now``.

    ``unhealthy`` is what the node says now (the snapshot): a device unhealthy with no flip since its
    plugin's last start has been so ``since_start``.
    """
    mine = [e for e in events if e.time <= now]
    health, flip, flips, started, pci = None, None, 0, None, None
    for e in mine:
        if _starts_of(e, resource):
            started, health, flip = e.time, None, None
            continue
        if not _of(e, resource, device):
            continue
        pci = e.pci or pci
        to = health_after(e)
        if to is None:
            continue
        if health is not None and to != health and now - e.time <= FLAP_WINDOW:
            flips += 1
        if to != health:
            flip = e if to != HEALTHY else None
        health = to
    bad = unhealthy if unhealthy is not None else (health is not None and health != HEALTHY)
    if not bad:
        return DeviceStory(resource, device, pci, health, flips=flips, started=started)
    if health in (None, UNHEALTHY):
        told = _since_start(resource, device, pci, flip, started, flips)
        if told is not None:
            return told
    if flip is None:  # the journal does not say since when
        return DeviceStory(resource, device, pci, UNHEALTHY, flips=flips, started=started)
    before = _before(mine, flip, pci, resource, device)
    gap = (flip.time - before.time).total_seconds() if before is not None else None
    return DeviceStory(resource, device, pci, health, flip.time, False, before, gap, flips, started)
