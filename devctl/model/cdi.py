"""CDI spec files as the runtime reads them: specs, devices, their container edits."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.base.errors import ErrorKind

# --- CDI spec files -----------------------------------------------------------------


@dataclass(frozen=True)
class CdiDeviceNode:
    path: str
    host_path: str
    major: int | None = None
    minor: int | None = None
    pci: str | None = None  # the PCI function behind <sysfs>/dev/char/<major>:<minor>, when there is one
    numa_node: int | None = None  # that function's numa_node; None when unknown


@dataclass(frozen=True)
class CdiMount:
    host_path: str
    container_path: str


@dataclass(frozen=True)
class CdiEdits:
    """containerEdits of a spec or a device (what the runtime applies)."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[CdiDeviceNode, ...] = ()
    mounts: tuple[CdiMount, ...] = ()
    net_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class CdiDevice:
    name: str
    edits: CdiEdits = CdiEdits()


@dataclass(frozen=True)
class CdiSpec:
    """One spec file; ``error`` (one line) when it could not be read or parsed, then nothing else is known."""

    path: str
    priority: int  # index of its dir in the dirs list: higher wins
    kind: str | None = None
    cdi_version: str | None = None
    edits: CdiEdits = CdiEdits()
    devices: tuple[CdiDevice, ...] = ()
    error: str | None = None
    error_kind: ErrorKind | None = None  # why ``error``: malformed, or the file could not be read


@dataclass(frozen=True)
class CdiState:
    dirs: tuple[str, ...]
    specs: tuple[CdiSpec, ...] = ()
