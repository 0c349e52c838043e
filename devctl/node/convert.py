"""Protobuf messages to model objects: the one place that knows both.

A node can list a million devices, and the kubelet's pod-resources replies
give each device ID its own ContainerDevices message, so the device
conversions are the hot path of every read command (bench/bench_volume.py).
They read each field once, and share the values that repeat across
messages (health strings, resource names, NUMA node tuples) instead of
keeping a copy per device: a third less memory for a million devices.
"""

from __future__ import annotations

from sys import intern
from typing import Any

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
    DeviceNode,
    DynamicResource,
    Mount,
    PluginOptions,
    PodResources,
)

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
    groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    # v1alpha1 messages have no topology field.
    has_topology = len(msgs) > 0 and msgs[0].DESCRIPTOR is _V1_CONTAINER_DEVICES
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
    return DynamicResource(
        claim_name=msg.claim_name,
        claim_namespace=msg.claim_namespace,
        devices=tuple(
            ClaimDevice(
                driver=c.driver_name,
                pool=c.pool_name,
                device=c.device_name,
                cdi_devices=tuple(d.name for d in c.cdi_devices),
            )
            for c in msg.claim_resources
        ),
    )


def container(msg: Any) -> ContainerResources:
    return ContainerResources(
        name=msg.name,
        devices=device_groups(msg.devices),
        cpu_ids=tuple(getattr(msg, "cpu_ids", ())),
        memory=tuple(container_memory(m) for m in getattr(msg, "memory", ())),
        dynamic_resources=tuple(dynamic_resource(r) for r in getattr(msg, "dynamic_resources", ())),
    )


def pod(msg: Any) -> PodResources:
    return PodResources(namespace=msg.namespace, name=msg.name, containers=tuple(container(c) for c in msg.containers))


def allocatable(msg: Any) -> AllocatableResources:
    return AllocatableResources(
        devices=device_groups(msg.devices),
        cpu_ids=tuple(msg.cpu_ids),
        memory=tuple(container_memory(m) for m in msg.memory),
    )
