"""What the kubelet's admission decision reads: the machine's CPUs and NUMA nodes, and the kubelet's policies.

These are the inputs of ``devctl fit`` and ``devctl why`` (devctl.analyze.admission), read by ``devctl.node``
(the CPU topology from sysfs, the policies from the kubelet's configuration and command line) and written by
the simulated node. They live in the model so that every layer can hold them and the admission model stays a
set of pure functions over values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cpu:
    """One logical CPU as the kubelet's CPU manager sees it (``topology.CPUInfo``).

    ``core`` is the lowest CPU id among the core's hardware threads, as the kubelet makes core ids unique across
    sockets (``getUniqueCoreID``); ``socket`` is the physical package id, ``numa`` the NUMA node.
    """

    id: int
    core: int
    socket: int
    numa: int


@dataclass(frozen=True)
class MachineTopology:
    """The machine's online CPUs and the NUMA distances between its nodes (``None`` where sysfs has none)."""

    cpus: tuple[Cpu, ...] = ()
    # node -> distances to every node, in node order, as /sys/devices/system/node/nodeN/distance lists them
    distances: Mapping[int, tuple[int, ...]] | None = None
    # node -> bytes of memory (MemTotal of the node's meminfo); absent when unknown
    memory: Mapping[int, int] = field(default_factory=dict)

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        return tuple(sorted({cpu.numa for cpu in self.cpus}))


@dataclass(frozen=True)
class KubeletPolicy:
    """The kubelet's admission settings, as the running kubelet has them, with where they came from.

    Field values are the kubelet's own spellings (``single-numa-node``, ``static``, ``Static``); options are
    the ``*PolicyOptions`` maps, string to string, as the configuration file holds them. ``source`` names what
    was read (the config file, ``flags``, ``defaults``); ``version`` the kubelet version the prediction follows.
    """

    topology: str = "none"
    scope: str = "container"
    options: Mapping[str, str] = field(default_factory=dict)
    cpu: str = "none"
    cpu_options: Mapping[str, str] = field(default_factory=dict)
    memory: str = "None"
    reserved_cpus: tuple[int, ...] = ()  # reservedSystemCPUs, or taken by topology from kube+system reserved cpu
    reserved_cpu_quantity_milli: int = 0  # kubeReserved.cpu + systemReserved.cpu, in millicores
    reserved_memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)  # NUMA node -> resource -> bytes
    # The node allocatable's memory reservations: kubeReserved.memory + systemReserved.memory in bytes, and the
    # hard eviction threshold evictionHard memory.available (the kubelet's default 100Mi; a percentage of the
    # capacity when ``eviction_memory_percent`` is set; 0 when evictionHard is set without it, as v1.32 does).
    reserved_memory_quantity: int = 0
    eviction_memory_bytes: int = 100 * 2**20
    eviction_memory_percent: float | None = None
    source: str = "defaults"
    version: str | None = None


@dataclass(frozen=True)
class TopologyHint:
    """A hint provider's answer, as the kubelet's ``topologymanager.TopologyHint``.

    ``numa_nodes`` is the NUMA affinity (the kubelet's bitmask); ``None`` is the kubelet's nil mask, "any node".
    """

    numa_nodes: frozenset[int] | None
    preferred: bool


@dataclass(frozen=True)
class ContainerRequest:
    """One container's resources as the kubelet's managers read them.

    Quantities are integers: ``cpu`` in millicores, ``memory`` and ``hugepages-*`` in bytes, extended resources
    (``nvidia.com/gpu``) as counts. ``restartable`` marks an init container with ``restartPolicy: Always`` (a
    sidecar), which the managers treat as long-running.
    """

    name: str
    init: bool = False
    restartable: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PodRequest:
    """A pod as admission sees it: init containers first, in their order, then the app containers."""

    containers: tuple[ContainerRequest, ...]
    qos: str  # "Guaranteed" | "Burstable" | "BestEffort", as the kubelet's qos.GetPodQOS decides
    namespace: str = "default"
    name: str = "fit"
    uid: str = ""
