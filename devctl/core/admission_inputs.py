"""The admission model's inputs built from what was read of the node (``devctl fit``; see ``core.admission``).

Pure over values: a ``NodeSnapshot`` (plugins, checkpoint, pod-resources, the managers' state files), the
machine and the kubelet's policy become ``AdmissionInputs``, and every input a prediction cannot do without but
could not read is named in ``unknown`` (one line each), so the answer says "unknown" instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from devctl.analyze.admission.inputs import AdmissionInputs, DeviceInfo, HeldDevices
from devctl.analyze.admission.request import is_extended
from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES, NodeSnapshot, PluginStatus
from devctl.model.machine import KubeletPolicy, MachineTopology, PodRequest


@dataclass(frozen=True)
class BuiltInputs:
    """``inputs`` for the model; ``unknown``: why a verdict cannot be given; ``notes``: lines for people."""

    inputs: AdmissionInputs
    unknown: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sockets: Mapping[str, str] = field(default_factory=dict)  # resource -> socket offering GetPreferredAllocation


def requested_resources(pod: PodRequest) -> frozenset[str]:
    return frozenset(r for c in pod.containers for r, n in c.requests.items() if n > 0)


def _devices(snapshot: NodeSnapshot) -> tuple[dict[str, tuple[DeviceInfo, ...]], dict[str, str], set[str]]:
    """(resource -> devices, resource -> socket offering GetPreferredAllocation, resources whose plugin failed)."""
    devices: dict[str, tuple[DeviceInfo, ...]] = {}
    sockets: dict[str, str] = {}
    failed: set[str] = set()
    for probe in snapshot.plugins:
        if not probe.is_device_plugin or probe.resource is None:
            continue
        if probe.status is not PluginStatus.SERVING:
            failed.add(probe.resource)
            continue
        devices[probe.resource] = tuple(
            DeviceInfo(d.id, d.healthy, frozenset(n for n in d.numa_nodes if n >= 0)) for d in probe.devices
        )
        if probe.options is not None and probe.options.get_preferred_allocation_available:
            sockets[probe.resource] = probe.socket
    return devices, sockets, failed - devices.keys()


def _held(snapshot: NodeSnapshot) -> tuple[HeldDevices, ...] | None:
    """Every allocation: the checkpoint's (pod UIDs, named through the pod log dirs), else pod-resources'."""
    names = {i.uid: (i.namespace, i.name) for i in snapshot.pod_identities}
    if snapshot.checkpoint is not None:
        out = []
        for e in snapshot.checkpoint.entries:
            namespace, pod = names.get(e.pod_uid, ("", e.pod_uid))
            ids = tuple(dict.fromkeys(i for group in e.device_ids.values() for i in group))
            out.append(HeldDevices(namespace, pod, e.pod_uid, e.container, e.resource, ids))
        return tuple(out)
    if snapshot.pods is not None:
        return tuple(
            HeldDevices(p.namespace, p.name, "", c.name, d.resource, d.ids)
            for p in snapshot.pods
            for c in p.containers
            for d in c.devices
        )
    return None


def _free_cpus(snapshot: NodeSnapshot, policy: KubeletPolicy) -> frozenset[int] | None:
    """The static policy's shared pool less the reserved CPUs: cpu_manager_state's, else pod-resources'."""
    reserved = frozenset(policy.reserved_cpus)
    state = snapshot.kubelet_state.cpu if snapshot.kubelet_state is not None else None
    if state is not None and state.policy == "static":
        return frozenset(state.default_cpus) - reserved
    if snapshot.pods is not None and snapshot.allocatable is not None and snapshot.allocatable.cpu_ids:
        taken = {cpu for p in snapshot.pods for c in p.containers for cpu in c.cpu_ids}
        return frozenset(snapshot.allocatable.cpu_ids) - taken - reserved
    return None


def _free_memory(snapshot: NodeSnapshot, machine: MachineTopology, policy: KubeletPolicy) -> dict[int, dict[str, int]]:
    """Memory per NUMA node still free for Guaranteed pods: the node's less ``reservedMemory`` less assignments."""
    free: dict[int, dict[str, int]] = {}
    for node in machine.numa_nodes:
        total = machine.memory.get(node)
        if total is not None:
            free[node] = {"memory": max(0, total - policy.reserved_memory.get(node, {}).get("memory", 0))}
    state = snapshot.kubelet_state.memory if snapshot.kubelet_state is not None else None
    blocks = (
        [m for a in state.assignments for m in a.memory]
        if state is not None
        else [m for p in snapshot.pods or () for c in p.containers for m in c.memory]
    )
    for block in blocks:
        left = block.size
        for node in block.numa_nodes:
            have = free.setdefault(node, {}).get(block.type, 0)
            used = min(have, left)
            free[node][block.type] = have - used
            left -= used
    return free


def _failed_source(snapshot: NodeSnapshot, source: str) -> bool:
    return any(e.source == source for e in snapshot.errors)


def _device_unknowns(
    pod: PodRequest, snapshot: NodeSnapshot, devices: Mapping[str, object], failed: set[str]
) -> list[str]:
    """Why the device part is unknown: a requested resource whose plugin failed, or no plugins read at all."""
    out: list[str] = []
    for resource in sorted(r for r in requested_resources(pod) if is_extended(r)):
        if resource in failed:
            out.append(f"{resource}: its plugin did not answer, so its devices are unknown")
        elif resource not in devices and _failed_source(snapshot, PLUGINS) and not snapshot.plugins:
            out.append(f"{resource}: the device plugins could not be listed")
    return out


REQUESTED_UNKNOWN = "cpu/memory requests of running pods unknown: resource fit checked against allocatable only"


def node_allocatable(machine: MachineTopology, policy: KubeletPolicy) -> dict[str, int] | None:
    """The node's allocatable cpu (millicores) and memory (bytes) as the kubelet computes it: capacity (the
    machine's online CPUs, its NUMA nodes' memory) less ``kubeReserved`` and ``systemReserved`` (cpu: what
    ``reservedSystemCPUs`` replaces them with) and, for memory, the hard eviction threshold ``memory.available``
    (kubelet v1.32 ``cm/node_container_manager_linux.go`` ``GetNodeAllocatableReservation``; negative is 0).
    ``None`` when the kubelet's configuration was not read (``policy.source`` ``defaults``): its reservations
    are unknown. A resource whose capacity is unknown is left out."""
    if policy.source == "defaults":
        return None
    out: dict[str, int] = {}
    if machine.cpus:
        out["cpu"] = max(0, 1000 * len(machine.cpus) - policy.reserved_cpu_quantity_milli)
    nodes = machine.numa_nodes
    if nodes and all(n in machine.memory for n in nodes):
        total = sum(machine.memory[n] for n in nodes)
        percent = policy.eviction_memory_percent
        eviction = int(total * percent / 100) if percent is not None else policy.eviction_memory_bytes
        out["memory"] = max(0, total - policy.reserved_memory_quantity - eviction)
    return out


def build_inputs(
    pod: PodRequest, snapshot: NodeSnapshot, machine: MachineTopology, policy: KubeletPolicy
) -> BuiltInputs:
    """``AdmissionInputs`` from what was read; what a verdict needs and is missing goes to ``unknown``."""
    devices, sockets, failed = _devices(snapshot)
    unknown = _device_unknowns(pod, snapshot, devices, failed)
    notes: list[str] = []
    asked = requested_resources(pod)
    for resource in sorted(r for r in asked if is_extended(r) and r not in devices and r not in failed):
        notes.append(
            f"{resource}: no device plugin serves it: no hints, and the kubelet's resource-fit check decides "
            "(OutOf" + resource + ")"
        )
    held = _held(snapshot)
    if held is None:
        held = ()
        if asked & devices.keys():
            unknown.append("the devices already allocated are unknown (neither the checkpoint nor pod-resources read)")
    elif snapshot.checkpoint is None and _failed_source(snapshot, CHECKPOINT):
        notes.append("allocations from pod-resources (the checkpoint was not read): pod UIDs unknown")
    free_cpus = None
    if policy.cpu == "static":
        free_cpus = _free_cpus(snapshot, policy)
        if free_cpus is None and "cpu" in asked and pod.qos == "Guaranteed":
            unknown.append("the CPUs already taken are unknown (neither cpu_manager_state nor pod-resources read)")
    free_memory = None
    if policy.memory == "Static":
        free_memory = _free_memory(snapshot, machine, policy)
        if snapshot.kubelet_state is None and _failed_source(snapshot, POD_RESOURCES):
            unknown.append("the memory already taken is unknown (neither memory_manager_state nor pod-resources read)")
    if asked & {"cpu", "memory"}:
        # Nothing devctl reads holds the running pods' requests: the CRI's container resources are not in its
        # API, pod-resources names devices and exclusive CPUs only, the kubelet's Pods API is not decoded.
        notes.append(REQUESTED_UNKNOWN)
    inputs = AdmissionInputs(
        machine=machine,
        policy=policy,
        devices=devices,
        held=held,
        free_cpus=free_cpus,
        free_memory=free_memory,
        allocatable=node_allocatable(machine, policy),
        requested=None,
    )
    return BuiltInputs(inputs, tuple(unknown), tuple(notes), sockets)
