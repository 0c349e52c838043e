"""What an in-process DRA driver serves, as values: its devices, its spec, its labels and the paths it names.

The driver itself (registration, prepare/unprepare, health) is devctl.lab.plugin.dra, which re-exports these.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from devctl.base.errors import DevctlError
from devctl.model import HEALTHY
from devctl.node.files import FileReadError, read_file

UNKNOWN = "Unknown"
PLUGIN_TYPE = "DRAPlugin"
# Labels of supported_versions, in the order a driver offers them (newest first).
DRA_LABELS = {"v1": "v1.DRAPlugin", "v1beta1": "v1beta1.DRAPlugin"}
HEALTH_LABEL = "v1alpha1.DRAResourceHealth"
DEFAULT_HEALTH_TIMEOUT = 30  # seconds; what the kubelet assumes for 0
MAX_MESSAGE = 1024  # characters of DeviceHealth.message
RPC_LOG_SIZE = 500

Allocation = Callable[[str, str, str], Sequence[str] | None]  # (namespace, name, uid) -> device names


# Where a simulated node records the scheduler's allocations (claim UID -> devices per driver), so that a
# `devctl plugin serve --dra` started against it knows its claims as the in-process drivers do.
ALLOCATIONS_FILE = os.path.join("run", "devctl", "dra-allocations.json")


def recorded_allocation(root: str, driver: str) -> Allocation:
    """The allocations a simulated node under ``root`` recorded for ``driver``, read at each prepare.

    On a real node there is no such file, and every claim is one without a known allocation.
    """
    path = os.path.join(root, ALLOCATIONS_FILE)

    def allocation(namespace: str, name: str, uid: str) -> Sequence[str] | None:
        try:
            record = json.loads(read_file(path))
        except (FileReadError, ValueError):
            return None
        devices = record.get(driver, {}).get(uid) if isinstance(record, dict) else None
        return [str(d) for d in devices] if isinstance(devices, list) else None

    return allocation


class DraDeviceError(DevctlError, ValueError):
    """A device change that cannot be made: unknown device, or one that already exists."""


@dataclass(frozen=True)
class DraDevice:
    """One device the driver publishes; ``minor`` numbers its character device node."""

    name: str
    numa_nodes: tuple[int, ...] = ()
    health: str = HEALTHY
    message: str = ""
    minor: int = 0
    updated: int = 0  # Unix seconds of the last health change


@dataclass(frozen=True)
class DraSpec:
    """What one driver serves. ``versions`` are DRA API versions (``v1``, ``v1beta1``) in the order offered."""

    driver: str
    pool: str
    devices: tuple[DraDevice, ...]
    versions: tuple[str, ...] = ("v1", "v1beta1")
    health: bool = True
    health_timeout: int = DEFAULT_HEALTH_TIMEOUT
    major: int = 0  # 0: a number in the experimental range derived from the driver name

    def __post_init__(self) -> None:
        if not self.major:
            object.__setattr__(self, "major", default_major(self.driver))
        unknown = [v for v in self.versions if v not in DRA_LABELS]
        if unknown or not self.versions:
            raise ValueError(f"DRA versions must be among {', '.join(DRA_LABELS)}, not {unknown or 'none'}")

    @property
    def supported_versions(self) -> tuple[str, ...]:
        labels = tuple(DRA_LABELS[v] for v in self.versions)
        return labels + ((HEALTH_LABEL,) if self.health else ())


def default_major(driver: str) -> int:
    """A character device major in Linux's range for local use (234-254), stable for a driver name."""
    return 234 + zlib.crc32(driver.encode()) % 21


def device_path(driver: str, device: str) -> str:
    return f"/dev/dra/{driver}/{device}"


def node_path(root: str, path: str) -> str:
    """A path on the node as the kubelet sees it: ``path`` relative to the node root, absolute."""
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else "/" + rel
