"""The TUI's data side: one immutable NodeView built from a snapshot and the live events since.

No widgets here and no textual import: these are pure functions over model
objects, so they run in a worker thread and are tested without a terminal.
Every count comes from ``devctl.analyze``; this module only lays live
ListAndWatch changes over the last polled snapshot before analysis, and turns
events and differences between two views into lines of the event log.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from devctl import analyze
from devctl.analyze import (
    AlignmentRow,
    CheckpointEntryRow,
    CheckpointView,
    DeviceRow,
    PodRef,
    ResourceRow,
    TopologyView,
)
from devctl.analyze.hardware import PhysicalJoin, physical_join, with_hardware
from devctl.core.events import (
    ADDED,
    DISCONNECTED,
    HEALTH,
    NO_TOPOLOGY,
    RECONNECTED,
    REMOVED,
    SNAPSHOT,
    TOPOLOGY,
    Notice,
    WatchEvent,
)
from devctl.model import (
    HEALTHY,
    ContainerResources,
    Device,
    NodeSnapshot,
    PluginStatus,
    PodResources,
    SourceError,
)

# What the log shows of live events and of changes found between two polls.
ALLOCATED = "allocated"
RELEASED = "released"
POD_ADDED = "pod-added"
POD_GONE = "pod-gone"
ERROR = "error"
RECOVERED = "recovered"
NOTICE = "notice"


def waiting_text(names: list[str], seconds: float) -> str:
    """``waiting for hung.sock… 3 s`` (``""`` when nothing is awaited); names from outside are shown inert."""
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    shown = "".join(c if c.isprintable() else "?" for c in shown)
    return f"waiting for {shown}… {seconds:.0f} s"


@dataclass(frozen=True)
class LogLine:
    """One line of the event log; ``tone`` says how it should stand out (see widgets.table.TONES)."""

    time: datetime
    event: str
    resource: str = ""
    device: str = ""
    detail: str = ""
    tone: str = ""


@dataclass(frozen=True)
class ContainerDetail:
    """Everything known about one container: pod-resources, NUMA alignment, and the checkpoint's allocation."""

    pod: PodResources
    container: ContainerResources
    pod_uid: str | None
    alignment: AlignmentRow | None
    entries: tuple[CheckpointEntryRow, ...]


@dataclass(frozen=True)
class KeptJoin:
    """The physical view's join (analyze.hardware.physical_join) of one poll of the node, kept across the rebuilds
    the live streams make of it: a health flip changes no lead to a PCI function, and the join of 10,000 devices
    took 150 ms of each rebuild (bench/bench_tui.py rebuild_p50_ms). It stands while the parts of the snapshot it
    reads are the same objects and the devices the same."""

    reads: tuple[object, ...]
    devices: frozenset[tuple[str, str]]
    join: PhysicalJoin

    @staticmethod
    def reads_of(snapshot: NodeSnapshot) -> tuple[object, ...]:
        return (snapshot.cdi, snapshot.checkpoint, snapshot.dra_checkpoint, snapshot.pods)

    def holds_for(self, snapshot: NodeSnapshot, devices: frozenset[tuple[str, str]]) -> bool:
        return self.devices == devices and all(a is b for a, b in zip(self.reads, self.reads_of(snapshot), strict=True))


@dataclass(frozen=True)
class NodeView:
    """Everything the screens show, derived at one moment; widgets only format it."""

    snapshot: NodeSnapshot
    resources: tuple[ResourceRow, ...]
    devices: dict[str, tuple[DeviceRow, ...]]  # by resource, in the plugin's order
    pods: tuple[PodResources, ...]
    topology: TopologyView
    checkpoint: CheckpointView
    errors: tuple[SourceError, ...]
    connected: dict[str, bool]  # plugin socket -> whether our ListAndWatch stream on it is up
    socket_resource: dict[str, str]  # plugin socket -> resource, as far as any source told
    updated: datetime
    alignment: dict[str, AlignmentRow] = field(default_factory=dict)  # by container key
    joined: KeptJoin | None = None  # the physical join made for this view, for the next rebuild

    @property
    def disconnected(self) -> frozenset[str]:
        """Resources whose live stream is down (the plugin died or restarts)."""
        return frozenset(
            self.socket_resource[s] for s, up in self.connected.items() if not up and s in self.socket_resource
        )

    def status_of(self, row: ResourceRow) -> str:
        """The status a person should see: the word ``devctl ls`` uses for the same state.

        While our stream on a plugin is down its probe is marked unreachable
        (``apply_events``); once its socket is gone the analysis says
        ``no-plugin``, as the CLI does. ``disconnected`` is a watch event, not a status.
        """
        return row.status

    def container(self, key: str) -> ContainerDetail | None:
        """The container with this key (``container_key``), or None when it is gone."""
        for pod in self.pods:
            for c in pod.containers:
                if container_key(pod.namespace, pod.name, c.name) != key:
                    continue
                ref = PodRef(pod.namespace, pod.name)
                entries = tuple(
                    e for e in self.checkpoint.entries if e.pod == ref and e.container == c.name and not e.stale
                )
                uids = {e.pod_uid for e in entries}
                uids |= {
                    i.uid
                    for i in self.snapshot.pod_identities
                    if i.namespace == pod.namespace and i.name == pod.name and i.uid
                }
                return ContainerDetail(
                    pod=pod,
                    container=c,
                    pod_uid=sorted(uids)[0] if len(uids) == 1 else None,
                    alignment=self.alignment.get(key),
                    entries=entries,
                )
        return None


def container_key(namespace: str, pod: str, container: str) -> str:
    return f"{namespace}/{pod}/{container}"


def _abs(path: str) -> str:
    return os.path.abspath(path)


# --- live events laid over the polled snapshot ------------------------------------------------


def _numa_of(text: str | None) -> tuple[int, ...]:
    if not text or text == NO_TOPOLOGY:
        return ()
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        return ()


def _patch_devices(devices: Sequence[Device], events: Sequence[WatchEvent]) -> tuple[Device, ...]:
    """A plugin's device list after these changes; each change is idempotent, so replaying is safe."""
    by_id = {d.id: d for d in devices}
    for e in events:
        if e.device is None:
            continue
        if e.event == ADDED:
            # The event carries the health; the NUMA nodes arrive with the next poll.
            old = by_id.get(e.device)
            by_id[e.device] = Device(e.device, e.to or HEALTHY, old.numa_nodes if old else ())
        elif e.event == REMOVED:
            by_id.pop(e.device, None)
        elif e.event == HEALTH and e.device in by_id:
            by_id[e.device] = replace(by_id[e.device], health=e.to or HEALTHY)
        elif e.event == TOPOLOGY and e.device in by_id:
            by_id[e.device] = replace(by_id[e.device], numa_nodes=_numa_of(e.to))
    return tuple(by_id.values())


def apply_events(snapshot: NodeSnapshot, items: Iterable[object]) -> tuple[NodeSnapshot, dict[str, bool]]:
    """The snapshot with each plugin's devices and status as its live stream last said.

    Returns the patched snapshot and, per socket that had an event, whether the
    stream is up. A disconnected plugin is marked unreachable, so that the
    analysis falls back to what the kubelet says (all its devices unhealthy,
    as the device manager marks them when the stream ends:
    pkg/kubelet/cm/devicemanager/endpoint.go, stop -> callback with no devices).
    """
    per_socket: dict[str, list[WatchEvent]] = {}
    connected: dict[str, bool] = {}
    for item in items:
        if not isinstance(item, WatchEvent) or item.socket is None:
            continue
        socket = _abs(item.socket)
        if item.event == DISCONNECTED:
            connected[socket] = False
        elif item.event in (SNAPSHOT, RECONNECTED):
            connected[socket] = True
        per_socket.setdefault(socket, []).append(item)
    if not per_socket:
        return snapshot, connected
    plugins = []
    for probe in snapshot.plugins:
        socket = _abs(probe.socket)
        events = per_socket.get(socket)
        if not events:
            plugins.append(probe)
            continue
        up = connected.get(socket)
        if up is False:
            probe = replace(probe, status=PluginStatus.UNREACHABLE, error="ListAndWatch stream ended; reconnecting")
        elif up is True and probe.status != PluginStatus.SERVING and probe.options is not None:
            probe = replace(probe, status=PluginStatus.SERVING, error=None)
        plugins.append(replace(probe, devices=_patch_devices(probe.devices, events)))
    return replace(snapshot, plugins=tuple(plugins)), connected


# --- the view ----------------------------------------------------------------------------------


def build_view(
    base: NodeSnapshot,
    items: Sequence[object],
    now: datetime,
    previous: NodeView | None = None,
) -> NodeView:
    """Analyse the snapshot with the live events since it was taken; the work of one refresh."""
    snapshot, connected = apply_events(base, items)
    socket_resource = dict(previous.socket_resource) if previous else {}
    for p in base.plugins:
        if p.resource is not None:
            socket_resource[_abs(p.socket)] = p.resource
    for item in items:
        if isinstance(item, WatchEvent) and item.socket and item.resource:
            socket_resource[_abs(item.socket)] = item.resource
    live = dict(previous.connected) if previous else {}
    live.update(connected)
    devices: dict[str, list[DeviceRow]] = {}
    rows = analyze.devices_view(snapshot)
    ids = frozenset((d.resource, d.id) for d in rows)
    kept = previous.joined if previous is not None and previous.joined is not None else None
    joined = kept if kept is not None and kept.holds_for(snapshot, ids) else None

    def join() -> PhysicalJoin:
        nonlocal joined
        if joined is None:
            joined = KeptJoin(KeptJoin.reads_of(snapshot), ids, physical_join(snapshot))
        return joined.join

    # Each row with the PCI function behind it (address, vendor, model, driver), for the device detail.
    for d in with_hardware(rows, snapshot, join=join):
        devices.setdefault(d.resource, []).append(d)
    topology = analyze.topology_view(snapshot)
    return NodeView(
        snapshot=snapshot,
        resources=analyze.resources_view(snapshot),
        devices={r: tuple(rows) for r, rows in devices.items()},
        pods=analyze.pods_view(snapshot),
        topology=topology,
        checkpoint=analyze.checkpoint_view(snapshot),
        errors=analyze.errors_of(snapshot),
        connected=live,
        socket_resource=socket_resource,
        updated=now,
        alignment={container_key(a.namespace, a.pod, a.container): a for a in topology.alignment},
        joined=joined,
    )


# --- the event log -----------------------------------------------------------------------------


def _counts(e: WatchEvent) -> str:
    if e.devices is None:
        return ""
    return f"{e.devices} devices, {e.healthy} healthy"


def event_line(item: object, socket_resource: dict[str, str]) -> LogLine | None:
    """One live item (a watch event or a notice) as a log line; None for items the log does not show."""
    if isinstance(item, Notice):
        resource = item.resource or (socket_resource.get(_abs(item.socket)) if item.socket else None) or ""
        return LogLine(item.time, NOTICE, resource, "", item.message, "dim")
    if not isinstance(item, WatchEvent):
        return None
    named = item.resource or (socket_resource.get(_abs(item.socket)) if item.socket else None)
    resource = named or (os.path.basename(item.socket) if item.socket else "")
    device = item.device or ""
    if item.event == HEALTH:
        tone = "ok" if item.to == HEALTHY else "bad"
        said = f" · {item.message}" if item.message else ""  # a DRA driver says why
        return LogLine(item.time, item.event, resource, device, f"{item.from_} → {item.to}{said}", tone)
    if item.event == TOPOLOGY:
        return LogLine(item.time, item.event, resource, device, f"NUMA {item.from_} → {item.to}", "warn")
    if item.event == ADDED:
        return LogLine(item.time, item.event, resource, device, f"{item.to} · {_counts(item)}", "hot")
    if item.event == REMOVED:
        return LogLine(item.time, item.event, resource, device, f"was {item.from_} · {_counts(item)}", "warn")
    if item.event == DISCONNECTED:
        return LogLine(item.time, item.event, resource, "", "stream ended; retrying", "bad")
    if item.event == RECONNECTED:
        return LogLine(item.time, item.event, resource, "", _counts(item), "ok")
    return LogLine(item.time, item.event, resource, device, _counts(item), "")


def _holders(view: NodeView) -> dict[tuple[str, str], frozenset[str]]:
    return {
        (d.resource, d.id): frozenset(f"{h.namespace}/{h.pod}/{h.container}" for h in d.allocated_to)
        for rows in view.devices.values()
        for d in rows
        if d.allocated_to
    }


def view_changes(old: NodeView, new: NodeView) -> list[LogLine]:
    """What a poll found changed: devices given to or taken from containers, pods, failing sources.

    These come from pod-resources and the checkpoint, which have no watch RPC
    (kubelet-contract.md): the only way to see them is to compare two polls.
    """
    now = new.updated
    lines: list[LogLine] = []
    if old.snapshot.pods is not None and new.snapshot.pods is not None:
        before = {(p.namespace, p.name) for p in old.pods}
        after = {(p.namespace, p.name) for p in new.pods}
        lines += [LogLine(now, POD_GONE, "", "", f"{ns}/{name}", "dim") for ns, name in sorted(before - after)]
        lines += [LogLine(now, POD_ADDED, "", "", f"{ns}/{name}", "hot") for ns, name in sorted(after - before)]
        old_holders, new_holders = _holders(old), _holders(new)
        for key in sorted(set(old_holders) | set(new_holders)):
            resource, device = key
            gone = old_holders.get(key, frozenset()) - new_holders.get(key, frozenset())
            came = new_holders.get(key, frozenset()) - old_holders.get(key, frozenset())
            lines += [LogLine(now, RELEASED, resource, device, f"from {h}", "dim") for h in sorted(gone)]
            lines += [LogLine(now, ALLOCATED, resource, device, f"to {h}", "hot") for h in sorted(came)]
    old_errors = {(e.source, e.message) for e in old.errors}
    new_errors = {(e.source, e.message) for e in new.errors}
    lines += [LogLine(now, ERROR, "", "", f"{s}: {m}", "bad") for s, m in sorted(new_errors - old_errors)]
    failing = {s for s, _ in new_errors}
    lines += [LogLine(now, RECOVERED, "", "", s, "ok") for s in sorted({s for s, _ in old_errors} - failing)]
    return lines
