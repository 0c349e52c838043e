"""Every device of each resource, and the two views read from it: ``devctl ls`` and ``devctl devices``.

One per-resource inventory, built from every source at once, is what the views
share (the topology view counts devices from it too): the plugin's word first,
the kubelet's when no plugin answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devctl.analyze.dra_inventory import dra_inventory
from devctl.analyze.rows import (
    MISSING,
    UNKNOWN,
    WAITING,
    DeviceRow,
    Holder,
    ResourceRow,
    free_count,
)
from devctl.model import (
    HEALTHY,
    ContainerDevices,
    DeviceList,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
)

if TYPE_CHECKING:
    pass


@dataclass
class Inventory:
    """Every device of one resource with its health and NUMA nodes, and who holds it."""

    health: dict[str, str] = field(default_factory=dict)
    # NUMA nodes of the devices not in ``listed`` (the kubelet's word); see numa_of.
    numa: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # The serving plugin's list: its NUMA column is looked up only when a view asks (numa_of).
    listed_devices: DeviceList | None = None
    _listed_numa: dict[str, tuple[int, ...]] | None = None
    # Device ID -> its holders, as an ordered set (a dict): 20,000 containers
    # sharing one device ID stay linear.
    holders: dict[str, dict[Holder, None]] = field(default_factory=dict)
    probe: PluginProbe | None = None
    # Devices no source vouches for either way (no plugin, no allocatable list):
    # shown as "Unknown", counted neither healthy nor unhealthy.
    unknown: set[str] = field(default_factory=set)
    # Devices a container holds that the serving plugin no longer lists (removed
    # or renamed since Allocate): shown by `devices`, outside the plugin's capacity.
    unlisted: set[str] = field(default_factory=set)
    # A serving plugin listed every device: the capacity is its count, not a lower bound.
    complete: bool = False
    # pod-resources answered: who holds what is known (else every holder count is unknown).
    holders_known: bool = True

    def numa_of(self, dev_id: str) -> tuple[int, ...]:
        """The device's NUMA nodes: its plugin's word, else the kubelet's; () when none is known."""
        if dev_id in self.numa:
            return self.numa[dev_id]
        if self.listed_devices is None:
            return ()
        if self._listed_numa is None:
            self._listed_numa = dict(zip(self.listed_devices.ids, self.listed_devices.numa, strict=True))
        return self._listed_numa.get(dev_id, ())

    def numa_nodes(self) -> set[int]:
        """Every NUMA node a device of the resource is on."""
        shared = set(self.numa.values()) | (set(self.listed_devices.numa) if self.listed_devices else set())
        return set().union(*shared)

    def listed(self) -> list[str]:
        return [i for i in self.health if i not in self.unlisted]

    def healthy(self, dev_id: str) -> bool | None:
        """Whether the device is healthy; None when nothing vouches for it either way."""
        if dev_id in self.unknown:
            return None
        # The kubelet treats any string but "Healthy" as unhealthy.
        return self.health.get(dev_id) == HEALTHY

    def state(self, dev_id: str) -> str | None:
        """free, allocated, unhealthy or unhealthy-allocated; None when that is unknown."""
        if not self.holders_known:
            return None
        held = dev_id in self.holders
        healthy = self.healthy(dev_id)
        if healthy is None:
            return "allocated" if held else None
        if healthy:
            return "allocated" if held else "free"
        return "unhealthy-allocated" if held else "unhealthy"


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
    """Every resource's inventory; a resource a plugin serves takes its columns whole (a million devices, in C).

    The kubelet's NUMA nodes of each device (pod-resources, GetAllocatableResources)
    are worked out only for the devices that need them: those of resources no
    plugin serves, and held devices the plugin no longer lists.
    """
    inv: dict[str, Inventory] = {}

    def get(resource: str) -> Inventory:
        return inv.setdefault(resource, Inventory())

    by_resource: dict[str, list[PluginProbe]] = {}
    for p in snapshot.plugins:
        if p.resource is not None and p.is_device_plugin:
            by_resource.setdefault(p.resource, []).append(p)
    for resource, probes in by_resource.items():
        get(resource).probe = _pick_probe(probes)

    # Who holds what, from pod-resources (one entry per resource and NUMA nodes, see convert.device_groups).
    held_groups: dict[str, list[ContainerDevices]] = {}
    for pod in snapshot.pods or ():
        for c in pod.containers:
            holder = Holder(pod.namespace, pod.name, c.name)
            for d in c.devices:
                held_groups.setdefault(d.resource, []).append(d)
                holders = get(d.resource).holders
                for dev_id in d.ids:
                    held = holders.get(dev_id)
                    if held is None:
                        holders[dev_id] = {holder: None}
                    else:
                        held[holder] = None

    allocatable_groups: dict[str, list[ContainerDevices]] = {}
    for d in snapshot.allocatable.devices if snapshot.allocatable else ():
        get(d.resource)
        allocatable_groups.setdefault(d.resource, []).append(d)
    registered = snapshot.checkpoint.registered_devices if snapshot.checkpoint else {}
    for resource in registered:
        get(resource)
    for e in snapshot.checkpoint.entries if snapshot.checkpoint else ():
        get(e.resource)

    for resource, r in inv.items():
        r.holders_known = snapshot.pods is not None
        groups = (held_groups.get(resource, []), allocatable_groups.get(resource, []))
        if r.probe is not None and r.probe.status == PluginStatus.SERVING:
            r.complete = True
            listed = DeviceList.of(r.probe.devices)
            r.health = dict(zip(listed.ids, listed.healths, strict=True))
            r.listed_devices = listed
            unlisted = [dev_id for dev_id in r.holders if dev_id not in r.health]
            if unlisted:
                kubelet_numa = _kubelet_numa(*groups, wanted=set(unlisted))
                for dev_id in unlisted:
                    r.health[dev_id] = MISSING
                    r.numa[dev_id] = kubelet_numa.get(dev_id, ())
                r.unlisted.update(unlisted)
            continue
        # No plugin answers: what the kubelet knows, a lower bound of its capacity.
        # GetAllocatableResources lists healthy devices only; a device it omits but
        # a container holds is unhealthy. The checkpoint's RegisteredDevices are the
        # healthy ones at its last write, which a plugin that stopped since makes
        # wrong: they say a device exists, not that it is healthy now.
        healthy = {dev_id for d in groups[1] for dev_id in d.ids} if snapshot.allocatable is not None else None
        ids = list(dict.fromkeys([*sorted(healthy or ()), *r.holders, *registered.get(resource, ())]))
        kubelet_numa = _kubelet_numa(*groups)
        for dev_id in ids:
            if healthy is None:
                r.health[dev_id] = UNKNOWN
                r.unknown.add(dev_id)
            else:
                r.health[dev_id] = HEALTHY if dev_id in healthy else "Unhealthy"
            r.numa[dev_id] = kubelet_numa.get(dev_id, ())
    return inv


def _kubelet_numa(
    held: list[ContainerDevices], allocatable: list[ContainerDevices], wanted: set[str] | None = None
) -> dict[str, tuple[int, ...]]:
    """Device ID -> the NUMA nodes the kubelet names for it, merged over its pod-resources and allocatable entries."""
    nodes: dict[str, set[int]] = {}
    for d in (*held, *allocatable):
        for dev_id in d.ids if wanted is None else wanted.intersection(d.ids):
            nodes.setdefault(dev_id, set()).update(d.numa_nodes)
    return {dev_id: tuple(sorted(n)) for dev_id, n in nodes.items()}


def _picked(snapshot: NodeSnapshot, resources: Iterable[str] | None) -> list[tuple[str, Inventory]]:
    """The inventories of ``resources`` (every one when none is named), by name."""
    wanted = set(resources or ())
    return [(name, r) for name, r in sorted(inventories(snapshot).items()) if not wanted or name in wanted]


def absent_status(snapshot: NodeSnapshot) -> str:
    """The status of a resource no answering socket serves: no-plugin, or waiting while sockets are pending."""
    return WAITING if snapshot.plugins_incomplete else PluginStatus.NO_PLUGIN.value


def resources_view(snapshot: NodeSnapshot, resources: Iterable[str] | None = None) -> tuple[ResourceRow, ...]:
    """One row per extended resource known from any source, sorted by name."""
    rows = []
    for name, r in _picked(snapshot, resources):
        listed, healthy = _counts(r)
        health_known = not r.unknown
        allocatable = healthy if health_known else None
        capacity = listed if r.complete else None
        numa = sorted(r.numa_nodes())
        probe = r.probe
        rows.append(
            ResourceRow(
                name=name,
                socket=probe.socket if probe else None,
                status=probe.status.value if probe else absent_status(snapshot),
                capacity=capacity,
                allocatable=allocatable,
                allocated=len(r.holders) if r.holders_known else None,
                free=free_count(healthy, (i for i in r.holders if i not in r.unlisted), r.healthy)
                if r.holders_known and health_known
                else None,
                unhealthy=capacity - allocatable if capacity is not None and allocatable is not None else None,
                numa_nodes=tuple(numa),
                options=probe.options if probe else None,
                capacity_min=None if r.complete else (listed or None),
            )
        )
    rows += dra_inventory(snapshot, resources, devices=False)[0]
    return tuple(rows)


def _counts(r: Inventory) -> tuple[int, int]:
    """How many devices the resource lists (held ones its plugin no longer lists left out), and how many are healthy.

    Counted over the health column at C speed: a resource can hold a million
    devices. Devices no longer listed are ``Missing``, never healthy.
    """
    return len(r.health) - len(r.unlisted), list(r.health.values()).count(HEALTHY)


def devices_view(snapshot: NodeSnapshot, resources: Iterable[str] | None = None) -> tuple[DeviceRow, ...]:
    """One row per device, by resource then in the plugin's order."""
    rows = []
    for name, r in _picked(snapshot, resources):
        for dev_id, health in r.health.items():
            rows.append(
                DeviceRow(
                    resource=name,
                    id=dev_id,
                    health=health,
                    numa_nodes=r.numa_of(dev_id),
                    state=r.state(dev_id),
                    allocated_to=tuple(r.holders.get(dev_id, ())) if r.holders_known else None,
                )
            )
    rows += dra_inventory(snapshot, resources)[1]
    return tuple(rows)
