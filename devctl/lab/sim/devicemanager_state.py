"""The simulated device manager's values: an endpoint, a held allocation, a resource's state, and the rows it
serves (one ContainerDevices per device per NUMA node, as pod_devices.go makes them)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from devctl.base.errors import DevctlError
from devctl.lab.sim.scenario import ContainerSpec
from devctl.model import (
    ContainerDevices,
    ContainerResources,
    Device,
    DynamicResource,
    PluginOptions,
)
from devctl.node.deviceplugin import DevicePluginClient

# endpoint.go: endpointStopGracePeriod. A resource whose plugin went away keeps its
# capacity (all unhealthy) this long, then disappears.
DEFAULT_GRACE_PERIOD = 300.0
# The kubelet's Allocate and GetPreferredAllocation have no deadline and PreStartContainer
# has 30 s (endpoint.go); the simulator gives every unary call the 30 s.
RPC_TIMEOUT = 30.0
NO_TOPOLOGY = "-1"  # manager.go: nodeWithoutTopology


class AdmissionError(DevctlError):
    """Why a pod could not be admitted; the kubelet's wording where it has one."""


@dataclass
class Endpoint:
    """One registered plugin connection (endpoint.go): its client, options and stream."""

    resource: str
    socket: str
    options: PluginOptions
    client: DevicePluginClient | None  # None: restored from the checkpoint, not registered yet
    stream: asyncio.Task[None] | None = None
    stopped: bool = False
    lists: int = 0  # ListAndWatch messages received
    expiry: asyncio.TimerHandle | None = None


@dataclass(frozen=True)
class Held:
    """Devices one container holds of one resource, as the checkpoint records them."""

    pod_uid: str
    container: str
    resource: str
    device_ids: dict[str, tuple[str, ...]]  # NUMA node as a string ("-1": none) -> IDs
    alloc_resp: bytes

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(i for ids in self.device_ids.values() for i in ids))


@dataclass(frozen=True)
class ResourceState:
    """One resource as the device manager sees it (the kubelet's node status figures)."""

    name: str
    socket: str | None
    connected: bool  # a live ListAndWatch stream feeds it
    devices: tuple[Device, ...]  # every device the plugin listed: capacity
    healthy: tuple[str, ...]  # allocatable
    options: PluginOptions | None

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return len(self.healthy)


@dataclass
class Resource:
    devices: dict[str, Device] = field(default_factory=dict)  # allDevices
    healthy: set[str] = field(default_factory=set)  # healthyDevices; unhealthy = the rest


def container_resources(
    c: ContainerSpec, devices: Sequence[ContainerDevices], claims: tuple[DynamicResource, ...]
) -> ContainerResources:
    return ContainerResources(c.name, tuple(devices), c.cpus, c.memory, claims)


def numa_key(node: int | None) -> str:
    return NO_TOPOLOGY if node is None else str(node)


def numa_entries(resource: str, device_ids: dict[str, tuple[str, ...]]) -> list[ContainerDevices]:
    """One ContainerDevices per device per NUMA node (pod_devices.go getContainerDevices); "-1" has no topology."""
    out: list[ContainerDevices] = []
    for key in sorted(device_ids, key=int):
        numa = () if key == NO_TOPOLOGY else (int(key),)
        out.extend(ContainerDevices(resource=resource, ids=(i,), numa_nodes=numa) for i in device_ids[key])
    return out
