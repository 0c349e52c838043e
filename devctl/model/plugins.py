"""A device plugin and a DRA driver as probed: their sockets, devices, health and what Allocate gave."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from devctl.base.errors import ErrorKind, SocketStatus

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
# The registry types (pluginregistration's PluginInfo.type) of a device plugin, a DRA driver and a CSI driver.
DEVICE_PLUGIN_TYPE = "DevicePlugin"
DRA_PLUGIN_TYPE = "DRAPlugin"
CSI_PLUGIN_TYPE = "CSIPlugin"


# How a device plugin's socket answered (the ``status`` values of the CLI contract): the one socket vocabulary.
PluginStatus = SocketStatus


# --- DRA drivers (their endpoint and health stream) --------------------------------


@dataclass(frozen=True)
class DraDeviceHealth:
    """One device of a DRA driver's NodeWatchResources message."""

    pool: str
    device: str
    health: str  # Healthy | Unhealthy | Unknown
    last_updated: int | None = None  # Unix seconds; None when the driver sent 0
    timeout_seconds: int = 30  # health_check_timeout_seconds, <= 0 read as the default 30
    message: str = ""


@dataclass(frozen=True)
class DraEndpoint:
    """A DRA driver's service socket as probed: connected, and (when offered) one health message read.

    ``status`` is the endpoint's (the registration socket's is the probe's own).
    ``health`` is None when no health service is offered or it did not answer
    (``health_error`` says why); an empty tuple is a driver that lists no device.
    """

    path: str
    status: PluginStatus
    error: str | None = None
    error_kind: ErrorKind | None = None
    health_stream: bool = False
    health_version: str | None = None  # "v1" or "v1alpha1": the stream that answered
    health: tuple[DraDeviceHealth, ...] | None = None
    health_error: str | None = None
    read_at: float | None = None  # Unix seconds when the health message arrived


# --- device plugin side (v1beta1) -------------------------------------------------


@dataclass(frozen=True)
class PluginOptions:
    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


@dataclass(frozen=True)
class Device:
    """A device as its plugin lists it in ListAndWatch."""

    id: str
    health: str = HEALTHY
    numa_nodes: tuple[int, ...] = ()

    @property
    def healthy(self) -> bool:
        # The kubelet treats every string other than "Healthy" as unhealthy.
        return self.health == HEALTHY


class DeviceList(Sequence[Device]):
    """A plugin's device list held as three columns: IDs, health strings and NUMA node tuples.

    A plugin may list a million devices (bench/bench_volume.py); a Device
    object each is seconds to make and a hundred bytes to keep, and most views
    only count them or look a few up. This is read like a tuple of Device (and
    equals one), and a Device is made only for the item asked for; the views
    that count read the columns (``ids``, ``healths``, ``numa``) directly.
    Health strings and NUMA tuples are shared between devices, not copied.
    """

    __slots__ = ("healths", "ids", "numa")

    def __init__(self, ids: Sequence[str], healths: Sequence[str], numa: Sequence[tuple[int, ...]]):
        if not len(ids) == len(healths) == len(numa):
            raise ValueError("DeviceList: columns of different lengths")
        self.ids: tuple[str, ...] = tuple(ids)
        self.healths: tuple[str, ...] = tuple(healths)
        self.numa: tuple[tuple[int, ...], ...] = tuple(numa)

    @classmethod
    def of(cls, devices: Sequence[Device]) -> DeviceList:
        """The list of these Device objects."""
        if isinstance(devices, DeviceList):
            return devices
        return cls([d.id for d in devices], [d.health for d in devices], [d.numa_nodes for d in devices])

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Device: ...

    @overload
    def __getitem__(self, index: slice) -> DeviceList: ...

    def __getitem__(self, index: int | slice) -> Device | DeviceList:
        if isinstance(index, slice):
            return DeviceList(self.ids[index], self.healths[index], self.numa[index])
        return Device(self.ids[index], self.healths[index], self.numa[index])

    def __iter__(self) -> Iterator[Device]:
        return map(Device, self.ids, self.healths, self.numa)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeviceList):
            return self.ids == other.ids and self.healths == other.healths and self.numa == other.numa
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"DeviceList({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (DeviceList, (self.ids, self.healths, self.numa))

    def healthy_count(self) -> int:
        """How many devices are healthy (health exactly ``Healthy``, as the kubelet reads it)."""
        return self.healths.count(HEALTHY)


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceNode:
    """A DeviceSpec: a host device node given to a container."""

    container_path: str
    host_path: str
    permissions: str = ""


@dataclass(frozen=True)
class Allocation:
    """A decoded ContainerAllocateResponse: what a container was really given."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceNode, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class RegistryInfo:
    """What a plugin-watcher socket in ``plugins_registry/`` says of itself (GetInfo)."""

    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class PluginProbe:
    """One socket in the plugins dir or the plugin-watcher registry, as probed.

    ``resource`` is the resource name when it is known for certain (the
    registry's GetInfo, or an unambiguous match of device IDs); else ``None``.
    ``error_kind`` says why ``error`` happened, set where the probe failed.
    """

    socket: str
    status: PluginStatus
    resource: str | None = None
    options: PluginOptions | None = None
    # A DeviceList when read from a socket; any sequence of Device (a tuple) otherwise.
    devices: Sequence[Device] = ()
    latency_ms: float | None = None
    error: str | None = None
    registry: RegistryInfo | None = None
    error_kind: ErrorKind | None = None
    dra: DraEndpoint | None = None  # a DRA driver's endpoint, probed (registry sockets of type DRAPlugin)

    @property
    def dra_driver(self) -> str | None:
        """The driver's name when this is a DRA driver's registration (its GetInfo's type), else None."""
        r = self.registry
        return r.name if r is not None and r.type == DRA_PLUGIN_TYPE and r.name else None

    @property
    def is_device_plugin(self) -> bool:
        """A device plugin's socket, or its registration (not a DRA or CSI driver's)."""
        return self.registry is None or self.registry.type == DEVICE_PLUGIN_TYPE
