"""The host: NUMA nodes, PCI devices, the processes that hold device nodes, the CRI runtime's pods."""

from __future__ import annotations

from dataclasses import dataclass

# --- the host ---------------------------------------------------------------------


@dataclass(frozen=True)
class Hugepages:
    size_kb: int
    total: int
    free: int


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]
    memory_bytes: int = 0
    hugepages: tuple[Hugepages, ...] = ()


@dataclass(frozen=True)
class PciDevice:
    address: str  # 0000:3b:00.0
    numa_node: int  # -1 when the kernel does not know
    vendor_id: str = ""
    device_id: str = ""
    class_id: str = ""
    driver: str | None = None
    vendor_name: str | None = None  # from udev's hwdb, when pyudev can read it
    device_name: str | None = None


@dataclass(frozen=True)
class HostTopology:
    numa_nodes: tuple[NumaNode, ...] = ()
    pci_devices: tuple[PciDevice, ...] = ()


# --- processes and the container runtime -----------------------------------------


@dataclass(frozen=True)
class Process:
    """A process that holds at least one of the node's device nodes open (``<proc>/PID/fd``)."""

    pid: int
    command: str  # the command line, arguments joined by spaces; ``[comm]`` for a kernel thread
    devices: tuple[str, ...]  # host paths of the device nodes it holds open
    container_id: str | None = None  # from <proc>/PID/cgroup; None for a host process or an unknown format
    pod_uid: str | None = None  # from the cgroup path (kubepods-pod<uid>.slice, /kubepods/.../pod<uid>/)


@dataclass(frozen=True)
class ProcScan:
    """What a scan of ``<proc>`` found: the holders of the watched device nodes, and how many processes it read."""

    proc: str
    scanned: int
    processes: tuple[Process, ...] = ()
    watched: tuple[str, ...] = ()  # the device node host paths it looked for


@dataclass(frozen=True)
class RuntimeSandbox:
    """A pod sandbox as the CRI runtime names it (``crictl pods``)."""

    id: str
    name: str
    namespace: str
    uid: str
    state: str = ""


@dataclass(frozen=True)
class RuntimeContainer:
    """A container as the CRI runtime names it (``crictl ps -a``)."""

    id: str
    sandbox_id: str
    name: str
    state: str = ""


@dataclass(frozen=True)
class RuntimeState:
    """The CRI runtime's pods and containers, read from its socket."""

    endpoint: str
    sandboxes: tuple[RuntimeSandbox, ...] = ()
    containers: tuple[RuntimeContainer, ...] = ()
