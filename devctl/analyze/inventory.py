"""Every device of each resource, and the two views read from it: ``devctl ls`` and ``devctl devices``.

One per-resource inventory, built from every source at once, is what the views
share (the topology view counts devices from it too): the plugin's word first,
the kubelet's when no plugin answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from devctl.model import HEALTHY, NodeSnapshot, PluginOptions, PluginProbe, PluginStatus

# Health shown for a device that no source vouches for either way.
UNKNOWN = "Unknown"
# Health shown for a device a container holds but its serving plugin no longer lists.
MISSING = "Missing"


@dataclass(frozen=True)
class ResourceRow:
    """One extended resource (``devctl ls``)."""

    name: str
    socket: str | None
    status: str
    capacity: int
    allocatable: int
    allocated: int
    free: int
    unhealthy: int
    numa_nodes: tuple[int, ...]
    options: PluginOptions | None


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class DeviceRow:
    """One device (``devctl devices``); ``state`` is free, allocated, unhealthy or unhealthy-allocated."""

    resource: str
    id: str
    health: str
    numa_nodes: tuple[int, ...]
    state: str
    allocated_to: tuple[Holder, ...]


@dataclass
class Inventory:
    """Every device of one resource with its health and NUMA nodes, and who holds it."""

    health: dict[str, str] = field(default_factory=dict)
    numa: dict[str, tuple[int, ...]] = field(default_factory=dict)
    holders: dict[str, list[Holder]] = field(default_factory=dict)
    probe: PluginProbe | None = None
    # Devices no source vouches for either way (no plugin, no allocatable list, no
    # checkpoint): shown as "Unknown" and not counted as unhealthy.
    unknown: set[str] = field(default_factory=set)
    # Devices a container holds that the serving plugin no longer lists (removed
    # or renamed since Allocate): shown by `devices`, outside the plugin's capacity.
    unlisted: set[str] = field(default_factory=set)

    def listed(self) -> list[str]:
        return [i for i in self.health if i not in self.unlisted]

    def healthy(self, dev_id: str) -> bool:
        # The kubelet treats any string but "Healthy" as unhealthy.
        return self.health.get(dev_id) == HEALTHY or dev_id in self.unknown


def _merge_numa(a: Iterable[int], b: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set(a) | set(b)))


def _pick_probe(probes: list[PluginProbe]) -> PluginProbe | None:
    """The socket that speaks for a resource: a serving one if any (first by path), else the first."""
    if not probes:
        return None
    serving = [p for p in probes if p.status == PluginStatus.SERVING]
    return sorted(serving or probes, key=lambda p: p.socket)[0]


# The last snapshot's inventories: the TUI and `doctor` build several views of one
# snapshot in turn, and this is the costly part of each (a node of 2,000 devices).
_last: tuple[NodeSnapshot, dict[str, Inventory]] | None = None


def inventories(snapshot: NodeSnapshot) -> dict[str, Inventory]:
    """Each resource known from any source with its inventory; ``ls``, ``devices`` and ``topo`` count from it.

    Built once per snapshot and shared by the views that ask: read it, never change it.
    """
    global _last
    last = _last
    if last is not None and last[0] is snapshot:
        return last[1]
    inv = _build(snapshot)
    _last = (snapshot, inv)
    return inv


def _build(snapshot: NodeSnapshot) -> dict[str, Inventory]:
    inv: dict[str, Inventory] = {}

    def get(resource: str) -> Inventory:
        return inv.setdefault(resource, Inventory())

    by_resource: dict[str, list[PluginProbe]] = {}
    for p in snapshot.plugins:
        if p.resource is not None and (p.registry is None or p.registry.type == "DevicePlugin"):
            by_resource.setdefault(p.resource, []).append(p)
    for resource, probes in by_resource.items():
        get(resource).probe = _pick_probe(probes)

    # Who holds what, from pod-resources (one entry per device per NUMA node).
    kubelet_numa: dict[tuple[str, str], tuple[int, ...]] = {}
    for pod in snapshot.pods or ():
        for c in pod.containers:
            for d in c.devices:
                r = get(d.resource)
                for dev_id in d.ids:
                    holders = r.holders.setdefault(dev_id, [])
                    holder = Holder(pod.namespace, pod.name, c.name)
                    if holder not in holders:
                        holders.append(holder)
                    key = (d.resource, dev_id)
                    kubelet_numa[key] = _merge_numa(kubelet_numa.get(key, ()), d.numa_nodes)

    healthy_known: dict[str, set[str]] = {}
    for d in snapshot.allocatable.devices if snapshot.allocatable else ():
        get(d.resource)
        for dev_id in d.ids:
            healthy_known.setdefault(d.resource, set()).add(dev_id)
            kubelet_numa[(d.resource, dev_id)] = _merge_numa(kubelet_numa.get((d.resource, dev_id), ()), d.numa_nodes)
    registered = snapshot.checkpoint.registered_devices if snapshot.checkpoint else {}
    for resource in registered:
        get(resource)
    for e in snapshot.checkpoint.entries if snapshot.checkpoint else ():
        get(e.resource)

    for resource, r in inv.items():
        if r.probe is not None and r.probe.status == PluginStatus.SERVING:
            for d in r.probe.devices:
                r.health[d.id] = d.health
                r.numa[d.id] = d.numa_nodes
            for dev_id in r.holders:
                if dev_id not in r.health:
                    r.health[dev_id] = MISSING
                    r.numa[dev_id] = kubelet_numa.get((resource, dev_id), ())
                    r.unlisted.add(dev_id)
            continue
        # No plugin answers: what the kubelet knows. GetAllocatableResources lists
        # healthy devices only; a device it omits but a container holds is unhealthy.
        if snapshot.allocatable is not None:
            healthy = healthy_known.get(resource, set())
        elif snapshot.checkpoint is not None:
            healthy = set(registered.get(resource, ()))
        else:
            healthy = None
        ids = list(dict.fromkeys([*sorted(healthy or ()), *r.holders, *registered.get(resource, ())]))
        for dev_id in ids:
            if healthy is None:
                r.health[dev_id] = UNKNOWN
                r.unknown.add(dev_id)
            else:
                r.health[dev_id] = HEALTHY if dev_id in healthy else "Unhealthy"
            r.numa[dev_id] = kubelet_numa.get((resource, dev_id), ())
    return inv


def _wanted(name: str, resources: Iterable[str] | None) -> bool:
    wanted = set(resources or ())
    return not wanted or name in wanted


def resources_view(snapshot: NodeSnapshot, resources: Iterable[str] | None = None) -> tuple[ResourceRow, ...]:
    """One row per extended resource known from any source, sorted by name."""
    rows = []
    for name, r in sorted(inventories(snapshot).items()):
        if not _wanted(name, resources):
            continue
        healthy = {i for i in r.listed() if r.healthy(i)}
        allocated = set(r.holders)
        capacity = len(r.listed())
        numa = sorted({n for nodes in r.numa.values() for n in nodes})
        probe = r.probe
        rows.append(
            ResourceRow(
                name=name,
                socket=probe.socket if probe else None,
                status=probe.status.value if probe else PluginStatus.NO_PLUGIN.value,
                capacity=capacity,
                allocatable=len(healthy),
                allocated=len(allocated),
                free=len(healthy - allocated),
                unhealthy=capacity - len(healthy),
                numa_nodes=tuple(numa),
                options=probe.options if probe else None,
            )
        )
    return tuple(rows)


def _state(healthy: bool, allocated: bool) -> str:
    if healthy:
        return "allocated" if allocated else "free"
    return "unhealthy-allocated" if allocated else "unhealthy"


def devices_view(snapshot: NodeSnapshot, resources: Iterable[str] | None = None) -> tuple[DeviceRow, ...]:
    """One row per device, by resource then in the plugin's order."""
    rows = []
    for name, r in sorted(inventories(snapshot).items()):
        if not _wanted(name, resources):
            continue
        for dev_id, health in r.health.items():
            holders = tuple(r.holders.get(dev_id, ()))
            rows.append(
                DeviceRow(
                    resource=name,
                    id=dev_id,
                    health=health,
                    numa_nodes=r.numa.get(dev_id, ()),
                    state=_state(r.healthy(dev_id), bool(holders)),
                    allocated_to=holders,
                )
            )
    return tuple(rows)
