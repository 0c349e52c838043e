"""Protobuf messages to model objects: the one place that knows both.

A node can list a million devices, and the kubelet's pod-resources replies
give each device ID its own ContainerDevices message, so the device
conversions are the hot path of every read command (bench/bench_volume.py).
They read each field once, and share the values that repeat across
messages (health strings, resource names, NUMA node tuples) instead of
keeping a copy per device: a third less memory for a million devices.
Device IDs are interned (``sys.intern``), so the plugin's list, the kubelet's
allocatable list and the checkpoint hold one string per device, not three.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, pairwise, repeat
from operator import eq, ne
from sys import intern
from typing import Any

from google.protobuf.message import DecodeError

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.podresources.v1 import api_pb2 as pr_v1
from devctl.model import (
    AllocatableResources,
    Allocation,
    ClaimDevice,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    Device,
    DeviceList,
    DeviceNode,
    DynamicResource,
    Mount,
    PluginOptions,
    PodResources,
)
from devctl.node import columns

# NUMA node tuples by the wire bytes of their TopologyInfo: reading the bytes is
# one call where walking the nodes makes a Python object per node, and every
# device on the same nodes shares one tuple. Bounded, so that a hostile plugin
# cannot grow it.
_NUMA_BY_WIRE: dict[bytes, tuple[int, ...]] = {}
_NUMA_SHARED = 1024


def numa_ids(topology: Any) -> tuple[int, ...]:
    """NUMA node IDs of a TopologyInfo (v1beta1 or v1); () when it has none (an unset field reads as empty)."""
    if topology is None:
        return ()
    wire = topology.SerializeToString()
    ids = _NUMA_BY_WIRE.get(wire)
    if ids is None:
        ids = tuple([node.ID for node in topology.nodes])
        if len(_NUMA_BY_WIRE) < _NUMA_SHARED:
            _NUMA_BY_WIRE[wire] = ids
    return ids


def device(msg: dp.Device) -> Device:
    return Device(id=msg.ID, health=intern(msg.health), numa_nodes=numa_ids(msg.topology))


def devices(msg: dp.ListAndWatchResponse) -> DeviceList:
    """A ListAndWatch reply's devices, message by message (see ``device_list`` for the fast way)."""
    listed = msg.devices
    return DeviceList(
        [d.ID for d in listed], [intern(d.health) for d in listed], [numa_ids(d.topology) for d in listed]
    )


def device_list(wire: bytes) -> DeviceList | None:
    """The devices of a serialized ListAndWatchResponse; None when the bytes are not one.

    A plugin listing a million devices is read a column at a time
    (``devctl.node.columns``): under a second where a Device object each took
    many. Anything not in the encoders' usual form is read message by message.
    """
    chunks = columns.columns(wire) if len(wire) >= columns.LONG else None
    if chunks is not None:
        ids: list[str] = []
        healths: list[str] = []
        numa: list[tuple[int, ...]] = []
        try:
            for cols in chunks:
                if cols is None:
                    break
                ids += _ids(cols[0])
                healths += _strings(cols[1])
                numa += _numa_column(cols[2], len(cols[0]), dp.TopologyInfo)
            else:
                return DeviceList(ids, healths, numa)
        except (UnicodeDecodeError, DecodeError):
            pass  # the message-by-message parse says what is wrong
    try:
        return devices(dp.ListAndWatchResponse.FromString(wire))
    except DecodeError:
        return None


def _ids(column: list[bytes]) -> map[str]:
    """A column of device IDs decoded (UTF-8; UnicodeDecodeError when one is not) and interned.

    Decoded in one call, joined by NUL and split again, where no ID holds a
    NUL (a NUL is never part of another character's UTF-8, so the split
    finds exactly the IDs); else one by one.
    """
    joined = b"\0".join(column)
    if column and joined.count(0) == len(column) - 1:
        return map(intern, joined.decode().split("\0"))
    return map(intern, map(bytes.decode, column))


def _strings(column: list[bytes]) -> list[str]:
    """A column of strings that repeat (health strings, resource names): one shared str per distinct value."""
    shared = {raw: intern(raw.decode()) for raw in set(column)}
    return list(map(shared.__getitem__, column))


def _numa_column(topologies: list[bytes] | None, n: int, message: Any) -> list[tuple[int, ...]]:
    """NUMA node tuples of a column of serialized TopologyInfo (None: no item had one), shared per distinct value."""
    if topologies is None:
        return [()] * n
    shared = {raw: tuple([node.ID for node in message.FromString(raw).nodes]) for raw in set(topologies)}
    return list(map(shared.__getitem__, topologies))


def device_to_pb(d: Device) -> dp.Device:
    topo = dp.TopologyInfo(nodes=[dp.NUMANode(ID=n) for n in d.numa_nodes]) if d.numa_nodes else None
    return dp.Device(ID=d.id, health=d.health, topology=topo)


def options(msg: dp.DevicePluginOptions) -> PluginOptions:
    return PluginOptions(
        pre_start_required=msg.pre_start_required,
        get_preferred_allocation_available=msg.get_preferred_allocation_available,
    )


def options_to_pb(o: PluginOptions) -> dp.DevicePluginOptions:
    return dp.DevicePluginOptions(
        pre_start_required=o.pre_start_required,
        get_preferred_allocation_available=o.get_preferred_allocation_available,
    )


def allocation(msg: dp.ContainerAllocateResponse) -> Allocation:
    return Allocation(
        envs=dict(sorted(msg.envs.items())),
        mounts=tuple(Mount(m.container_path, m.host_path, m.read_only) for m in msg.mounts),
        devices=tuple(DeviceNode(d.container_path, d.host_path, d.permissions) for d in msg.devices),
        annotations=dict(sorted(msg.annotations.items())),
        cdi_devices=tuple(c.name for c in msg.cdi_devices),
    )


def allocation_to_pb(a: Allocation) -> dp.ContainerAllocateResponse:
    return dp.ContainerAllocateResponse(
        envs=a.envs,
        mounts=[
            dp.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only) for m in a.mounts
        ],
        devices=[
            dp.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in a.devices
        ],
        annotations=a.annotations,
        cdi_devices=[dp.CDIDevice(name=n) for n in a.cdi_devices],
    )


def decode_allocation(raw: bytes) -> Allocation:
    """A serialized ContainerAllocateResponse (the checkpoint's AllocResp) as a model object."""
    msg = dp.ContainerAllocateResponse()
    msg.ParseFromString(raw)
    return allocation(msg)


# --- pod resources: v1 and v1alpha1 messages share these field names ---------------

_V1_CONTAINER_DEVICES = pr_v1.ContainerDevices.DESCRIPTOR


def device_groups(msgs: Any) -> tuple[ContainerDevices, ...]:
    """Repeated ContainerDevices as one entry per resource and NUMA nodes, IDs in the order given.

    The kubelet sends one message per device ID (containerDevicesFromResourceDeviceInstances),
    in Go's random map order, so a node with a million devices would become a
    million model objects that every view then walks; grouped, it is a few.
    """
    if not msgs:
        return ()
    first = msgs[0]  # each index into a repeated field makes a new Python wrapper: once, not three times
    # v1alpha1 messages have no topology field.
    has_topology = first.DESCRIPTOR is _V1_CONTAINER_DEVICES
    if len(msgs) == 1:  # a container holding one device: one group, made directly (positional: 50,000 of them)
        numa = numa_ids(first.topology) if has_topology else ()
        return (ContainerDevices(intern(first.resource_name), tuple(first.device_ids), numa),)
    groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for msg in msgs:
        key = (msg.resource_name, numa_ids(msg.topology) if has_topology else ())
        ids = groups.get(key)
        if ids is None:
            ids = groups[key] = []
        ids.extend(msg.device_ids)
    return tuple(
        ContainerDevices(resource=intern(resource), ids=tuple(ids), numa_nodes=numa)
        for (resource, numa), ids in groups.items()
    )


def container_memory(msg: Any) -> ContainerMemory:
    return ContainerMemory(type=msg.memory_type, size=msg.size, numa_nodes=numa_ids(msg.topology))


def dynamic_resource(msg: Any) -> DynamicResource:
    """A container's claim, made with lists and positional arguments (not generators and keywords): a DRA
    node's List can hold a claim per container, 1,000 in bench/bench_dra.py."""
    return DynamicResource(msg.claim_name, msg.claim_namespace, claim_devices(msg.claim_resources))


def _share_id(c: Any) -> str | None:
    return c.share_id if c.HasField("share_id") else None


def claim_devices(resources: Sequence[Any]) -> tuple[ClaimDevice, ...]:
    """A claim's ClaimResources as devices, each with its own CDI names, each name once.

    The v1.32 kubelet (its pod-resources server, observed) keeps one list of CDI
    names per driver of a claim and appends each device's names to it, so a
    ClaimResource carries the names of its driver's earlier devices first, then
    its own: ``gpu-0 [c0]``, ``gpu-1 [c0 c1]``. A ClaimResource whose names begin
    with all the names its driver's previous ClaimResource sent is read without
    them; any other list is kept as sent (a kubelet without that bug). The same
    device sent twice (driver, pool, device and share id: a claim prepared again
    after a kubelet restart has its devices appended) is one device.
    """
    if len(resources) == 1:  # most claims: one device, nothing to undo
        (c,) = resources
        names = tuple(dict.fromkeys([d.name for d in c.cdi_devices]))
        return (ClaimDevice(c.driver_name, c.pool_name, c.device_name, names, _share_id(c)),)
    devices: dict[tuple[str, str, str, str | None], list[str]] = {}
    previous: dict[str, list[str]] = {}  # driver -> the names its last ClaimResource sent, as sent
    for c in resources:
        sent = [d.name for d in c.cdi_devices]
        before = previous.get(c.driver_name)
        previous[c.driver_name] = sent
        own = sent[len(before) :] if before and sent[: len(before)] == before else sent
        devices.setdefault((c.driver_name, c.pool_name, c.device_name, _share_id(c)), []).extend(own)
    return tuple(
        [
            ClaimDevice(driver, pool, device, tuple(dict.fromkeys(names)), share)
            for (driver, pool, device, share), names in devices.items()
        ]
    )


def container(msg: Any) -> ContainerResources:
    """A container of a List reply. An empty repeated field becomes () without a generator or a copy: a List
    of 50,000 pods has a container each, most without CPUs, memory or claims."""
    memory = getattr(msg, "memory", ())
    claims = getattr(msg, "dynamic_resources", ())
    cpus = getattr(msg, "cpu_ids", ())
    return ContainerResources(
        msg.name,
        device_groups(msg.devices),
        tuple(cpus) if cpus else (),
        tuple([container_memory(m) for m in memory]) if memory else (),
        tuple([dynamic_resource(r) for r in claims]) if claims else (),
    )


def pod(msg: Any) -> PodResources:
    return PodResources(msg.namespace, msg.name, tuple([container(c) for c in msg.containers]))


def pods_wire(wire: bytes) -> tuple[PodResources, ...] | None:
    """The pods of a serialized (v1) ListPodResourcesResponse; None when the bytes are not one.

    A long List whose every pod is one container holding one device and
    nothing else (a node of single-device jobs) is read a column at a time
    (``devctl.node.columns``): seven Python wrappers of protobuf messages a
    pod, most of the time of 50,000 pods, are not made. Any other List is
    read message by message.

    The first pod is looked at first: when it is not of that form, the
    columns' first pass would fail on it after their tables (tens of
    thousands of entries, ~10 ms) were built, so the List goes straight to
    the message-by-message read — a DRA node's pods hold claims, and a pod
    often has several containers.
    """
    long = len(wire) >= columns.LONG and _single_device_pod(_first_item(wire))
    items = columns.items(wire) if long else None
    if items is not None:
        pods: list[PodResources] = []
        try:
            for start in range(0, len(items), columns.CHUNK):
                chunk = _single_device_pods(items[start : start + columns.CHUNK])
                if chunk is None:
                    break
                pods += chunk
            else:
                return tuple(pods)
        except (UnicodeDecodeError, DecodeError):
            pass  # the message-by-message parse says what is wrong
    try:
        reply = pr_v1.ListPodResourcesResponse.FromString(wire)
    except DecodeError:
        return None
    return tuple([pod(p) for p in reply.pod_resources])


def _first_item(wire: bytes) -> bytes | None:
    """The bytes of the message's first field when it is field 1 (length-delimited, as the kubelet writes a
    List's first pod), else None."""
    if not wire or wire[0] != 0x0A:
        return None
    length = 0
    for i, byte in enumerate(wire[1:6]):  # a length varint of at most five bytes (< 4 GiB)
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            start = 2 + i
            return wire[start : start + length] if start + length <= len(wire) else None
    return None


def _single_device_pod(wire: bytes | None) -> bool:
    """Whether a serialized pod is one container holding one device entry of one ID, and no CPUs, memory or
    claims: the form ``_single_device_pods`` takes (it checks every pod, this one included, exactly)."""
    if wire is None:
        return False
    try:
        pod = pr_v1.PodResources.FromString(wire)
    except DecodeError:
        return False  # the message-by-message read says what is wrong
    if len(pod.containers) != 1:
        return False
    c = pod.containers[0]
    return (
        len(c.devices) == 1 and len(c.devices[0].device_ids) == 1 and not (c.cpu_ids or c.memory or c.dynamic_resources)
    )


def _single_device_pods(pods: Sequence[bytes]) -> list[PodResources] | None:
    """Serialized pods of one container holding one device entry of one ID, as ``pod`` makes them; None when
    any pod is not so (more containers or devices, CPUs, memory or claims: fields the columns do not take)."""
    cols = columns.of_messages(pods)
    if cols is None:
        return None
    names, namespaces, held = cols
    if held is None:
        return None
    held_cols = columns.of_messages(held)
    if held_cols is None or held_cols[2] is not None:  # field 3: exclusive CPUs
        return None
    container_names, entries, _ = held_cols
    entry_cols = columns.of_messages(entries)
    if entry_cols is None:
        return None
    resources, ids, topologies = entry_cols
    devices = map(
        ContainerDevices,
        _strings(resources),
        zip(map(bytes.decode, ids)),
        _numa_column(topologies, len(ids), pr_v1.TopologyInfo),
    )
    containers = map(ContainerResources, map(bytes.decode, container_names), zip(devices))
    return list(map(PodResources, map(bytes.decode, namespaces), map(bytes.decode, names), zip(containers)))


def allocatable(msg: Any) -> AllocatableResources:
    return AllocatableResources(
        devices=device_groups(msg.devices),
        cpu_ids=tuple(msg.cpu_ids),
        memory=tuple(container_memory(m) for m in msg.memory),
    )


def allocatable_wire(wire: bytes) -> AllocatableResources | None:
    """A serialized AllocatableResourcesResponse; None when the bytes are not one.

    The kubelet sends a ContainerDevices per device ID: a million on a node
    with a million devices, read a column at a time (``devctl.node.columns``)
    when they are in the usual form, one device ID each.
    """
    chunks = columns.columns(wire) if len(wire) >= columns.LONG else None
    if chunks is not None:
        resources: list[str] = []
        ids: list[str] = []
        numa: list[tuple[int, ...]] = []
        try:
            for cols in chunks:
                if cols is None:
                    break
                resources += _strings(cols[0])
                ids += _ids(cols[1])
                numa += _numa_column(cols[2], len(cols[1]), pr_v1.TopologyInfo)
            else:
                rest = pr_v1.AllocatableResourcesResponse.FromString(columns.without_items(wire))
                return AllocatableResources(
                    devices=_grouped(resources, ids, numa),
                    cpu_ids=tuple(rest.cpu_ids),
                    memory=tuple(container_memory(m) for m in rest.memory),
                )
        except (UnicodeDecodeError, DecodeError):
            pass  # the message-by-message parse says what is wrong
    try:
        return allocatable(pr_v1.AllocatableResourcesResponse.FromString(wire))
    except DecodeError:
        return None


# More runs of one resource than this and grouping walks the IDs once in Python instead of a run at a time in C.
_MANY_RUNS = 64


def _grouped(resources: list[str], ids: list[str], numa: list[tuple[int, ...]]) -> tuple[ContainerDevices, ...]:
    """One ContainerDevices per resource and NUMA nodes, in order of first appearance, IDs in the order given.

    What ``device_groups`` makes of the messages, from columns. The kubelet
    lists a resource's devices together (containerDevicesFromResourceDeviceInstances
    walks one resource at a time), so the resource column is a few runs: found
    by comparing the column with itself shifted by one, and within each run the
    IDs of each NUMA set picked by ``itertools.compress`` (a pass per NUMA set
    of that run, in C), not a pass per group over the whole list.
    """
    n = len(ids)
    starts = [0, *compress(range(1, n), map(ne, resources[1:], resources[:-1])), n] if n else [0]
    groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    if len(starts) - 1 > _MANY_RUNS:
        for key, dev_id in zip(zip(resources, numa, strict=True), ids, strict=True):
            groups.setdefault(key, []).append(dev_id)
    else:
        for a, b in pairwise(starts):
            resource, run_ids, run_numa = resources[a], ids[a:b], numa[a:b]
            distinct = list(dict.fromkeys(run_numa))
            for nodes in distinct:
                picked = run_ids if len(distinct) == 1 else compress(run_ids, map(eq, run_numa, repeat(nodes)))
                groups.setdefault((resource, nodes), []).extend(picked)
    return tuple(ContainerDevices(resource, tuple(group), nodes) for (resource, nodes), group in groups.items())
