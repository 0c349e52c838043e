"""What people ask of a node, derived from one NodeSnapshot: pure functions, no I/O.

Each ``*_view`` function returns frozen dataclasses whose ``devctl.serial.to_plain``
form is exactly the JSON of the CLI contract (``docs/commands.md``), so the JSON,
YAML and table renderers and the TUI all read the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from devctl.model import (
    HEALTHY,
    Allocation,
    CheckpointEntry,
    ContainerDevices,
    ContainerResources,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
    RegistryInfo,
    SourceError,
)

# Names of the sources ``collect`` reads; a command asks for the ones it needs.
POD_RESOURCES = "pod-resources"
PLUGINS = "plugins"
CHECKPOINT = "checkpoint"
TOPOLOGY = "topology"
IDENTITIES = "identities"
ALL_SOURCES = frozenset({POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES})

# The source name ``collect`` gives a plugins directory it could not list, and the
# message ending it gives a missing checkpoint, so that the views can tell "absent"
# from "present but unreadable".
PLUGINS_DIR_SOURCE = "plugins-dir"
NO_SUCH_FILE = "no such file"

# The kubelet files devices without topology under NUMA node -1
# (pkg/kubelet/cm/devicemanager/pod_devices.go, nodeWithoutTopology).
NO_NUMA = -1

# Health shown for a device that no source vouches for either way.
UNKNOWN = "Unknown"
# Health shown for a device a container holds but its serving plugin no longer lists.
MISSING = "Missing"


# --- the rows of each view ------------------------------------------------------------


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


@dataclass(frozen=True)
class DeviceCount:
    total: int = 0
    allocated: int = 0
    free: int = 0


@dataclass(frozen=True)
class NumaRow:
    """One NUMA node (``devctl topo``). ``shared_cpus`` = allocatable CPUs no container holds exclusively."""

    id: int
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


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str


@dataclass(frozen=True)
class CheckpointEntryRow:
    pod_uid: str
    pod: PodRef | None
    container: str
    resource: str
    device_ids: dict[str, tuple[str, ...]]
    stale: bool
    allocation: Allocation | None
    allocation_error: str | None = None


@dataclass(frozen=True)
class CheckpointView:
    """The checkpoint decoded; ``format`` and ``checksum_ok`` are None when the file could not be read."""

    path: str
    format: str | None
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    registered_devices: dict[str, tuple[str, ...]]
    entries: tuple[CheckpointEntryRow, ...]


@dataclass(frozen=True)
class SocketState:
    path: str
    present: bool


@dataclass(frozen=True)
class CheckpointState:
    path: str
    present: bool
    checksum_ok: bool | None


@dataclass(frozen=True)
class PluginRow:
    socket: str
    resource: str | None
    status: str
    devices: int | None
    healthy: int | None
    options: PluginOptions | None
    latency_ms: float | None
    error: str | None
    registry: RegistryInfo | None


@dataclass(frozen=True)
class PluginsView:
    kubelet_socket: SocketState
    checkpoint: CheckpointState
    plugins: tuple[PluginRow, ...]


# --- which sources answered ------------------------------------------------------------


def sources_read(snapshot: NodeSnapshot) -> frozenset[str]:
    """The sources that gave something: the CLI exits 3 when none that a command shows did."""
    read = set()
    if snapshot.pods is not None or snapshot.allocatable is not None:
        read.add(POD_RESOURCES)
    listed = not any(e.source == PLUGINS_DIR_SOURCE for e in snapshot.errors)
    if any(p.status == PluginStatus.SERVING for p in snapshot.plugins) or (listed and snapshot.plugins):
        read.add(PLUGINS)
    if snapshot.checkpoint is not None:
        read.add(CHECKPOINT)
    if snapshot.topology is not None:
        read.add(TOPOLOGY)
    if snapshot.pod_identities:
        read.add(IDENTITIES)
    return frozenset(read)


# --- devices: the plugin's word first, the kubelet's when no plugin answers --------------


@dataclass
class _Inventory:
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


def _inventories(snapshot: NodeSnapshot) -> dict[str, _Inventory]:
    inv: dict[str, _Inventory] = {}

    def get(resource: str) -> _Inventory:
        return inv.setdefault(resource, _Inventory())

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
    for name, r in sorted(_inventories(snapshot).items()):
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
    for name, r in sorted(_inventories(snapshot).items()):
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


# --- pods --------------------------------------------------------------------------------


def merge_devices(entries: Iterable[ContainerDevices]) -> tuple[ContainerDevices, ...]:
    """One entry per resource: the kubelet reports one per device per NUMA node
    (pkg/kubelet/apis/podresources/server_v1.go via devicemanager's GetDevices)."""
    merged: dict[str, tuple[list[str], set[int]]] = {}
    for e in entries:
        ids, numa = merged.setdefault(e.resource, ([], set()))
        ids.extend(i for i in e.ids if i not in ids)
        numa.update(e.numa_nodes)
    return tuple(ContainerDevices(r, tuple(ids), tuple(sorted(numa))) for r, (ids, numa) in merged.items())


def pod_view(pod: PodResources, resource: str | None = None) -> PodResources:
    """A pod with its device entries merged; with ``resource``, only containers holding it, and only its devices."""
    containers = []
    for c in pod.containers:
        devices = merge_devices(c.devices)
        if resource is not None:
            devices = tuple(d for d in devices if d.resource == resource)
            if not devices:
                continue
        containers.append(replace(c, devices=devices))
    return replace(pod, containers=tuple(containers))


def pods_view(
    snapshot: NodeSnapshot,
    namespace: str | None = None,
    resource: str | None = None,
    pod: str | None = None,
) -> tuple[PodResources, ...]:
    """Allocations per container, filtered like ``kubectl get pods -n NS``; sorted by namespace and name."""
    rows = []
    for p in snapshot.pods or ():
        if (namespace is not None and p.namespace != namespace) or (pod is not None and p.name != pod):
            continue
        view = pod_view(p, resource)
        if resource is not None and not view.containers:
            continue
        rows.append(view)
    return tuple(sorted(rows, key=lambda p: (p.namespace, p.name)))


def find_pod(snapshot: NodeSnapshot, name: str, namespace: str) -> PodResources | None:
    """One pod of a snapshot, merged, or None (``devctl get`` on ``--from FILE``)."""
    for p in snapshot.pods or ():
        if p.name == name and p.namespace == namespace:
            return pod_view(p)
    return None


# --- topology ----------------------------------------------------------------------------


def _container_cpu_numa(cpus: Iterable[int], cpu_node: dict[int, int]) -> tuple[int, ...] | None:
    nodes = set()
    for cpu in cpus:
        if cpu not in cpu_node:
            return None
        nodes.add(cpu_node[cpu])
    return tuple(sorted(nodes))


def _alignment(
    pod: PodResources, c: ContainerResources, inv: dict[str, _Inventory], cpu_node: dict[int, int]
) -> AlignmentRow:
    device_sets: list[set[int]] = []
    for d in merge_devices(c.devices):
        r = inv.get(d.resource)
        for dev_id in d.ids:
            nodes = set(r.numa.get(dev_id, ())) if r else set()
            nodes = nodes or set(d.numa_nodes)
            if nodes:
                device_sets.append(nodes)
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
    Devices without topology are counted under node -1, as the kubelet files them.
    """
    topo = snapshot.topology
    cpu_node = {cpu: n.id for n in topo.numa_nodes for cpu in n.cpus} if topo else {}
    allocatable_cpus = set(snapshot.allocatable.cpu_ids) if snapshot.allocatable else set()
    exclusive = {cpu for p in snapshot.pods or () for c in p.containers for cpu in c.cpu_ids}
    inv = _inventories(snapshot)

    counts: dict[int, dict[str, DeviceCount]] = {}
    for name, r in sorted(inv.items()):
        for dev_id in r.listed():
            held = dev_id in r.holders
            free = r.healthy(dev_id) and not held
            for node in r.numa.get(dev_id) or (NO_NUMA,):
                c = counts.setdefault(node, {}).get(name, DeviceCount())
                counts[node][name] = DeviceCount(c.total + 1, c.allocated + held, c.free + free)

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
                id=node_id,
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
        for p in sorted(snapshot.pods or (), key=lambda p: (p.namespace, p.name))
        for c in p.containers
        if c.devices or c.cpu_ids or c.memory
    )
    return TopologyView(
        numa_nodes=tuple(nodes),
        shared_pool=tuple(sorted(allocatable_cpus - exclusive)),
        alignment=alignment,
    )


# --- the checkpoint ----------------------------------------------------------------------


def _live_holder(entry: CheckpointEntry, pods: tuple[PodResources, ...]) -> PodRef | None:
    """The live pod whose container of this name holds this entry's devices, if exactly one does.

    A device is held by one container at a time, so the match is a fact, not a guess.
    """
    ids = {i for group in entry.device_ids.values() for i in group}
    found = {
        PodRef(p.namespace, p.name)
        for p in pods
        for c in p.containers
        if c.name == entry.container
        for d in c.devices
        if d.resource == entry.resource and ids & set(d.ids)
    }
    return found.pop() if len(found) == 1 else None


def checkpoint_view(snapshot: NodeSnapshot) -> CheckpointView:
    """The checkpoint with each entry's pod named and flagged ``stale`` when the pod is gone.

    An entry is stale when pod-resources no longer lists its pod, or (without
    pod-resources) when no source on the node knows its UID any more
    (kubelet-contract.md, "Pod identity on the node").
    """
    cp = snapshot.checkpoint
    if cp is None:
        return CheckpointView(snapshot.paths.checkpoint, None, None, None, None, {}, ())
    identities = {i.uid: i for i in snapshot.pod_identities}
    live = {(p.namespace, p.name) for p in snapshot.pods or ()}
    entries = []
    for e in cp.entries:
        ident = identities.get(e.pod_uid)
        ref = PodRef(ident.namespace, ident.name) if ident and ident.name else None
        holder = _live_holder(e, snapshot.pods) if snapshot.pods is not None else None
        if snapshot.pods is not None:
            stale = holder is None and (ref is None or (ref.namespace, ref.name) not in live)
        else:
            stale = ident is None
        entries.append(
            CheckpointEntryRow(
                pod_uid=e.pod_uid,
                pod=ref or holder,
                container=e.container,
                resource=e.resource,
                device_ids=e.device_ids,
                stale=stale,
                allocation=e.allocation,
                allocation_error=e.alloc_error,
            )
        )
    return CheckpointView(
        path=cp.path,
        format=cp.format,
        checksum_ok=cp.checksum_ok,
        checksum=cp.checksum,
        computed_checksum=cp.computed_checksum,
        registered_devices=cp.registered_devices,
        entries=tuple(entries),
    )


# --- plugins -----------------------------------------------------------------------------


def _checkpoint_present(snapshot: NodeSnapshot) -> bool:
    if snapshot.checkpoint is not None:
        return True
    return not any(e.source == CHECKPOINT and e.message.endswith(NO_SUCH_FILE) for e in snapshot.errors) and any(
        e.source == CHECKPOINT for e in snapshot.errors
    )


def plugins_view(snapshot: NodeSnapshot) -> PluginsView:
    """Every socket probed, with the kubelet's socket and the checkpoint beside them."""
    cp = snapshot.checkpoint
    rows = tuple(
        PluginRow(
            socket=p.socket,
            resource=p.resource,
            status=p.status.value,
            devices=len(p.devices) if p.status == PluginStatus.SERVING and p.options is not None else None,
            healthy=sum(d.healthy for d in p.devices)
            if p.status == PluginStatus.SERVING and p.options is not None
            else None,
            options=p.options,
            latency_ms=round(p.latency_ms, 3) if p.latency_ms is not None else None,
            error=p.error,
            registry=p.registry,
        )
        for p in sorted(snapshot.plugins, key=lambda p: p.socket)
    )
    return PluginsView(
        kubelet_socket=SocketState(snapshot.paths.kubelet_socket, snapshot.kubelet_socket_present),
        checkpoint=CheckpointState(
            snapshot.paths.checkpoint, _checkpoint_present(snapshot), cp.checksum_ok if cp else None
        ),
        plugins=rows,
    )


def errors_of(snapshot: NodeSnapshot) -> tuple[SourceError, ...]:
    """The snapshot's source errors, each once, in the order they were found."""
    return tuple(dict.fromkeys(snapshot.errors))
