"""The rows of the device views (``ls``, ``devices``, the TUI, the exporter): one module, below the views that
make them — the device plugins' inventory (analyze/inventory) and the DRA drivers' (analyze/dra_inventory) —
so neither imports the other for its types, and FREE is defined once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from devctl.model import PluginOptions

if TYPE_CHECKING:
    from devctl.analyze.hardware import PciFunction

# Health shown for a device that no source vouches for either way.
UNKNOWN = "Unknown"
# Health shown for a device a container holds but its serving plugin no longer lists.
MISSING = "Missing"


# Why a capacity is only a lower bound (``capacity_min``, ``≥N`` in tables).
CAPACITY_NOTE = (
    "≥N: no plugin answers for it, so only the kubelet's lists and its checkpoint name its devices "
    "(the checkpoint names healthy ones only); the kubelet keeps a stopped plugin's devices for 5 minutes, "
    "so its capacity may be higher"
)


@dataclass(frozen=True)
class ResourceRow:
    """One extended resource (``devctl ls``).

    A count that depends on a source that failed is None (``?``), never 0:
    ``allocated`` and ``free`` without pod-resources; ``capacity`` when no plugin
    lists the devices, with ``capacity_min`` the devices known to exist.
    """

    name: str
    socket: str | None
    status: str
    capacity: int | None
    allocatable: int | None
    allocated: int | None
    free: int | None
    unhealthy: int | None
    numa_nodes: tuple[int, ...]
    options: PluginOptions | None
    capacity_min: int | None = None
    kind: str = "device-plugin"  # or "dra": a DRA driver's row (analyze/dra_inventory.py)


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class ClaimHolder(Holder):
    """A DRA device's holder: the claim (NAMESPACE/NAME) and a pod and container using it."""

    claim: str


@dataclass(frozen=True)
class DeviceRow:
    """One device (``devctl devices``); ``state`` is free, allocated, unhealthy or unhealthy-allocated.

    ``state`` and ``allocated_to`` are None when pod-resources could not be read
    (who holds the device is unknown), and ``state`` too when nothing vouches for
    the health of a device that no container holds.
    """

    resource: str
    id: str
    health: str
    numa_nodes: tuple[int, ...]
    state: str | None
    allocated_to: tuple[Holder, ...] | None
    kind: str = "device-plugin"  # or "dra": ID <pool>/<device>, resource the driver
    pci: PciFunction | None = None  # the PCI function behind it, when known (set by analyze.hardware)


WAITING = "waiting"  # a partial snapshot's plugin or driver that a socket still pending may serve


# What FREE means, once, for `ls`, the TUI, the exporter's devctl_resource_free and `fleet ls` (docs/commands.md).
FREE_MEANING = "healthy devices that no container holds: an unhealthy device is never free, held or not"


_Id = TypeVar("_Id")  # a device's ID, or a DRA device's (driver, pool, device)


def free_count(healthy: int, held: Iterable[_Id], is_healthy: Callable[[_Id], bool | None]) -> int:
    """FREE, the one definition: of the ``healthy`` devices, those no container holds.

    ``held`` are the IDs containers hold (each counted once); a held device takes one
    from FREE only when it is healthy, so a held device that went unhealthy is
    neither free nor taken twice. Callers pass None instead of calling this when
    who holds what, or the health of some device, is unknown.
    """
    return healthy - sum(1 for dev_id in set(held) if is_healthy(dev_id))
