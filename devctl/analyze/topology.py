"""The NUMA view (``devctl topo``): CPUs, memory and devices per node, and each container's alignment."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from devctl.analyze.claims import with_claim_health
from devctl.analyze.dra_inventory import dra_inventory
from devctl.analyze.inventory import Inventory, inventories
from devctl.analyze.pods import merge_devices
from devctl.model import ContainerResources, NodeSnapshot, PodResources

# The kubelet files devices without topology under NUMA node -1
# (pkg/kubelet/cm/devicemanager/pod_devices.go, nodeWithoutTopology).
NO_NUMA = -1


@dataclass(frozen=True)
class DeviceCount:
    """A resource's devices on one NUMA node; a count that depends on a failed source is None.

    ``total`` is None when no plugin lists the resource's devices, and
    ``total_min`` then counts those known to exist (as ``ls``'s ``capacity_min``).
    """

    total: int | None = 0
    allocated: int | None = 0
    free: int | None = 0
    total_min: int | None = None


@dataclass(frozen=True)
class NumaRow:
    """One NUMA node (``devctl topo``). ``shared_cpus`` = allocatable CPUs no container holds exclusively.

    ``id`` None holds the devices no NUMA node is known for (the kubelet's node -1): ``null`` in JSON.
    """

    id: int | None
    cpus: tuple[int, ...]
    allocatable_cpus: tuple[int, ...]
    exclusive_cpus: tuple[int, ...]
    shared_cpus: tuple[int, ...]
    memory_bytes: int
    hugepages: tuple[dict[str, int], ...]
    devices: dict[str, DeviceCount]


@dataclass(frozen=True)
class AlignmentRow:
    """Whether one container's devices, exclusive CPUs and memory sit on one NUMA node.

    ``aligned`` is None when that cannot be told: nothing with a NUMA node, or
    exclusive CPUs on a node whose CPU-to-NUMA map (sysfs) was not read.
    """

    namespace: str
    pod: str
    container: str
    aligned: bool | None
    device_numa: tuple[int, ...]
    cpu_numa: tuple[int, ...]
    memory_numa: tuple[int, ...]


@dataclass(frozen=True)
class TopologyView:
    numa_nodes: tuple[NumaRow, ...]
    shared_pool: tuple[int, ...]  # every allocatable CPU that no container holds exclusively
    alignment: tuple[AlignmentRow, ...]


def _container_cpu_numa(cpus: Iterable[int], cpu_node: dict[int, int]) -> tuple[int, ...] | None:
    nodes = set()
    for cpu in cpus:
        if cpu not in cpu_node:
            return None
        nodes.add(cpu_node[cpu])
    return tuple(sorted(nodes))


def _alignment(
    pod: PodResources, c: ContainerResources, inv: dict[str, Inventory], cpu_node: dict[int, int]
) -> AlignmentRow:
    device_sets: list[set[int]] = []
    for d in merge_devices(c.devices):
        r = inv.get(d.resource)
        for dev_id in d.ids:
            nodes = set(r.numa_of(dev_id)) if r else set()
            nodes = nodes or set(d.numa_nodes)
            if nodes:
                device_sets.append(nodes)
    # DRA claim devices: NUMA nodes through their CDI device nodes (analyze.claims.with_claim_health).
    for dr in c.dynamic_resources:
        for cd in dr.devices:
            if cd.numa_nodes:
                device_sets.append(set(cd.numa_nodes))
    cpu_numa = _container_cpu_numa(c.cpu_ids, cpu_node)
    memory_numa = tuple(sorted({n for m in c.memory for n in m.numa_nodes}))
    device_numa = tuple(sorted(set().union(*device_sets))) if device_sets else ()

    # Aligned: one node holds every exclusive CPU and memory block, and is one of the
    # nodes of every device (a device on two nodes serves either, as in the device
    # manager's hint generation, pkg/kubelet/cm/devicemanager/topology_hints.go).
    aligned: bool | None
    if cpu_numa is None or not (device_sets or cpu_numa or memory_numa):
        aligned = None
    else:
        candidates = set(device_numa) | set(cpu_numa) | set(memory_numa)
        aligned = any(
            set(cpu_numa) <= {n} and set(memory_numa) <= {n} and all(n in s for s in device_sets) for n in candidates
        )
    return AlignmentRow(
        namespace=pod.namespace,
        pod=pod.name,
        container=c.name,
        aligned=aligned,
        device_numa=device_numa,
        cpu_numa=cpu_numa if cpu_numa is not None else (),
        memory_numa=memory_numa,
    )


def topology_view(snapshot: NodeSnapshot) -> TopologyView:
    """Per NUMA node: CPUs (all, allocatable, exclusive, shared), memory, devices; and alignment per container.

    Without sysfs the nodes are those that devices and memory name, with no CPUs.
    Devices without topology are counted under node -1, as the kubelet files them, shown as node None.
    """
    topo = snapshot.topology
    cpu_node = {cpu: n.id for n in topo.numa_nodes for cpu in n.cpus} if topo else {}
    allocatable_cpus = set(snapshot.allocatable.cpu_ids) if snapshot.allocatable else set()
    exclusive = {cpu for p in snapshot.pods or () for c in p.containers for cpu in c.cpu_ids}
    inv = inventories(snapshot)

    # node -> resource -> [devices, held, free, free unknown]
    tally: dict[int, dict[str, list[int]]] = {}
    for name, r in sorted(inv.items()):
        for dev_id in r.listed():
            held = dev_id in r.holders
            healthy = r.healthy(dev_id)
            for node in r.numa_of(dev_id) or (NO_NUMA,):
                t = tally.setdefault(node, {}).setdefault(name, [0, 0, 0, 0])
                t[0] += 1
                t[1] += held
                t[2] += bool(healthy and not held)
                t[3] += bool(healthy is None and not held)
    # DRA drivers' devices, under the NUMA nodes their CDI device nodes lead to (-1 when unknown).
    dra_resources, dra_devices = dra_inventory(snapshot)
    dra_complete = {r.name: r.capacity is not None for r in dra_resources}
    for d in dra_devices:
        held = d.state in ("allocated", "unhealthy-allocated")
        for node in d.numa_nodes or (NO_NUMA,):
            t = tally.setdefault(node, {}).setdefault(d.resource, [0, 0, 0, 0])
            t[0] += 1
            t[1] += held
            t[2] += d.state == "free"
            t[3] += d.state is None
    counts: dict[int, dict[str, DeviceCount]] = {}
    for node, per_resource in tally.items():
        for name, (total, allocated, free, unknown) in per_resource.items():
            if name in dra_complete:
                known = snapshot.pods is not None
                counts.setdefault(node, {})[name] = DeviceCount(
                    total=total if dra_complete[name] else None,
                    allocated=allocated if known else None,
                    free=free if known and not unknown else None,
                    total_min=None if dra_complete[name] else total,
                )
                continue
            r = inv[name]
            counts.setdefault(node, {})[name] = DeviceCount(
                total=total if r.complete else None,
                allocated=allocated if r.holders_known else None,
                free=free if r.holders_known and not unknown else None,
                total_min=None if r.complete else total,
            )

    memory_by_node: dict[int, int] = {}
    if snapshot.allocatable:
        for m in snapshot.allocatable.memory:
            if m.type == "memory" and len(m.numa_nodes) == 1:
                memory_by_node[m.numa_nodes[0]] = memory_by_node.get(m.numa_nodes[0], 0) + m.size

    nodes = []
    host_nodes = {n.id: n for n in topo.numa_nodes} if topo else {}
    ids = set(host_nodes) | set(counts) | set(memory_by_node)
    for node_id in sorted(ids):
        host = host_nodes.get(node_id)
        cpus = host.cpus if host else ()
        alloc = tuple(c for c in cpus if c in allocatable_cpus)
        excl = tuple(c for c in cpus if c in exclusive)
        nodes.append(
            NumaRow(
                id=None if node_id == NO_NUMA else node_id,
                cpus=cpus,
                allocatable_cpus=alloc,
                exclusive_cpus=excl,
                shared_cpus=tuple(c for c in alloc if c not in exclusive),
                memory_bytes=host.memory_bytes if host else memory_by_node.get(node_id, 0),
                hugepages=tuple(
                    {"size_kb": h.size_kb, "total": h.total, "free": h.free} for h in (host.hugepages if host else ())
                ),
                devices=dict(sorted(counts.get(node_id, {}).items())),
            )
        )
    alignment = tuple(
        _alignment(p, c, inv, cpu_node)
        for p in sorted(with_claim_health(snapshot.pods or (), snapshot), key=lambda p: (p.namespace, p.name))
        for c in p.containers
        if c.devices or c.cpu_ids or c.memory or c.dynamic_resources
    )
    return TopologyView(
        numa_nodes=tuple(nodes),
        shared_pool=tuple(sorted(allocatable_cpus - exclusive)),
        alignment=alignment,
    )
