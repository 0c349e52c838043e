"""Model objects: what every layer above ``node/`` sees instead of protobuf messages.

All are frozen dataclasses holding tuples and plain values, so a snapshot can be
shared between threads and tasks without copying, and ``devctl.model.serial`` turns any
of them into JSON and back without loss (``devctl snapshot`` / ``--from FILE``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, overload

from devctl.base.errors import ErrorKind as ErrorKind  # re-exported: the model's vocabulary of failures

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


class PluginStatus(str, Enum):
    """How a device plugin socket answered; the ``status`` values of the CLI contract."""

    SERVING = "serving"
    UNREACHABLE = "unreachable"  # the socket refused or the RPC failed
    STALE = "stale"  # a socket file with no listener behind it
    TIMEOUT = "timeout"  # accepted the connection, never answered in time
    PERMISSION_DENIED = "permission-denied"
    NO_PLUGIN = "no-plugin"  # known to the kubelet, but no socket serves it


class SocketStatus(str, Enum):
    """Whether a socket the kubelet serves has a listener: dialled, not only stat'ed.

    The kubelet never removes ``kubelet.sock`` or the pod-resources socket when it
    exits, so a socket file on disk says nothing about a running kubelet.
    """

    LISTENING = "listening"
    MISSING = "missing"
    NOT_A_SOCKET = "not-a-socket"
    STALE = "stale"  # a socket file with nothing listening on it
    PERMISSION_DENIED = "permission-denied"
    TIMEOUT = "timeout"
    OTHER = "other"

    @classmethod
    def of_failure(cls, kind: ErrorKind) -> SocketStatus:
        """The status of a socket whose connect failed with ``kind``."""
        try:
            return cls(kind.value)
        except ValueError:
            return cls.OTHER


# Names of the sources ``collect`` reads; a command asks for the ones it needs.
POD_RESOURCES = "pod-resources"
PLUGINS = "plugins"
CHECKPOINT = "checkpoint"
TOPOLOGY = "topology"
IDENTITIES = "identities"
DRA_CHECKPOINT = "dra-checkpoint"
CDI = "cdi"
ALL_SOURCES = frozenset({POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES, DRA_CHECKPOINT, CDI})
# The DRA drivers alone, a part of PLUGINS: their registrations and endpoints, no device-plugin socket
# (``devctl claims`` shows no device plugin, and probing every one of them cost it a tenth of its time).
DRA_DRIVERS = "dra-drivers"
# The pod-resources List alone, a part of POD_RESOURCES: the pods and their claims, no GetAllocatableResources
# (``devctl claims`` shows no allocatable device; 2,000 of them cost it a twentieth of its time).
POD_LIST = "pod-list"
# Read only when a command asks for them (``devctl who``, ``devices -o wide``,
# ``doctor``, ``snapshot``): a /proc scan is no price for ``ls`` to pay.
PROCS = "procs"
RUNTIME = "runtime"
HOLDER_SOURCES = frozenset({PROCS, RUNTIME, CHECKPOINT, IDENTITIES, DRA_CHECKPOINT, CDI})  # DRA: nodes via CDI
KUBELET_STATE = "kubelet-state"  # cpu_manager_state, memory_manager_state, config.yaml
# What doctor and snapshot read beyond ALL_SOURCES.
EXTRA_SOURCES = HOLDER_SOURCES | {KUBELET_STATE}

# The source name ``collect`` gives a plugins directory it could not list, so that
# the views can tell the directory from the sockets in it.
PLUGINS_DIR_SOURCE = "plugins-dir"


@dataclass(frozen=True)
class SourceError:
    """One source (socket, file, directory) that could not be read, as a one-line message and a kind."""

    source: str
    message: str
    kind: ErrorKind = ErrorKind.OTHER
    # What within the source failed, when the source holds many (a DRA driver's name for a ``dra``
    # endpoint error): checks tie an error to its object by this, never by the words of ``message``.
    subject: str | None = None


@dataclass(frozen=True)
class Finding:
    """Something wrong on the node, found by analysis (``devctl doctor``)."""

    severity: str  # "error" | "warning" | "info"
    code: str
    subject: str
    message: str
    hint: str = ""


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


# --- pod-resources side (v1) ------------------------------------------------------


@dataclass(frozen=True)
class ContainerDevices:
    """One ContainerDevices entry; the kubelet sends one per device per NUMA node."""

    resource: str
    ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ContainerMemory:
    type: str
    size: int
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ClaimDevice:
    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()  # each name once, of this device only (node.convert undoes v1.32's repeats)
    share_id: str | None = None  # ClaimResource.share_id (1.35+): None when the kubelet sent none
    # Filled by the views (analyze.claims.with_claim_health), never by pod-resources: the driver's
    # health stream, and NUMA nodes through the CDI device nodes; None/() when unknown.
    health: str | None = None
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class DynamicResource:
    claim_name: str
    claim_namespace: str
    devices: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True)
class PodResources:
    namespace: str
    name: str
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True)
class AllocatableResources:
    """GetAllocatableResources: healthy devices only, allocatable CPUs and memory."""

    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


# --- the device manager checkpoint --------------------------------------------------


@dataclass(frozen=True)
class CheckpointEntry:
    pod_uid: str
    container: str
    resource: str
    device_ids: dict[str, tuple[str, ...]]  # NUMA node as a string ("-1": none) -> IDs
    allocation: Allocation | None = None  # None when AllocResp could not be decoded
    alloc_error: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """The device manager checkpoint read; ``checksum_ok`` None when the checksum was not computed (``unverified``)."""

    path: str
    format: str  # "v2", or "v1" for the flat DeviceIDs lists of Kubernetes <= 1.19
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    registered_devices: dict[str, tuple[str, ...]]
    entries: tuple[CheckpointEntry, ...] = ()
    unverified: str | None = None  # why the checksum was not computed: one line, shown as a warning


# --- the DRA manager checkpoint (dra_manager_state) --------------------------------


@dataclass(frozen=True)
class DraCheckpointDevice:
    """One device of a claim as the DRA manager checkpointed it (what the driver's prepare returned)."""

    driver: str
    pool: str
    device: str
    requests: tuple[str, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    share_id: str | None = None


@dataclass(frozen=True)
class DraCheckpointClaim:
    """One ClaimInfoState: a claim the kubelet holds for pods on this node.

    ``drivers`` names every driver of the entry, also one whose devices are
    null (a prepare that failed or has not returned: the entry is written
    first). ``duplicate_devices`` counts devices the file repeats (a kubelet
    restart appends the re-prepared devices); ``devices`` holds each once.
    """

    uid: str
    name: str
    namespace: str
    pod_uids: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()
    devices: tuple[DraCheckpointDevice, ...] = ()
    duplicate_devices: int = 0


@dataclass(frozen=True)
class DraCheckpoint:
    """``dra_manager_state`` read and verified.

    ``format``: ``v1`` (``ClaimInfoStateList``), ``entries`` (the same under
    ``Entries``) or ``legacy`` (the alpha ``{"version", "entries", "checksum"}``
    file, whose checksum devctl does not recompute: ``checksum_ok`` None).
    """

    path: str
    format: str
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    claims: tuple[DraCheckpointClaim, ...] = ()


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


@dataclass(frozen=True)
class PodIdentity:
    uid: str
    namespace: str
    name: str


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


# --- the kubelet's CPU and memory managers ------------------------------------------


@dataclass(frozen=True)
class CpuAssignment:
    pod_uid: str
    container: str
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class CpuManagerState:
    """``<kubelet-dir>/cpu_manager_state`` decoded; ``checksum_ok`` None when the file has none (0)."""

    path: str
    policy: str
    default_cpus: tuple[int, ...]
    assignments: tuple[CpuAssignment, ...] = ()
    checksum: int | None = None
    checksum_ok: bool | None = None
    known_policy: bool = True
    # Which layout and which kubelet's rules the verdict follows (node.kubeletstate), and the kubelets that
    # still read the file where the verdict is a mismatch (None: none does).
    checksum_rule: str | None = None
    accepted_by: str | None = None


@dataclass(frozen=True)
class MemoryAssignment:
    pod_uid: str
    container: str
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True)
class MemoryManagerState:
    """``<kubelet-dir>/memory_manager_state`` decoded; ``checksum_ok`` None when the file has none (0)."""

    path: str
    policy: str
    assignments: tuple[MemoryAssignment, ...] = ()
    checksum: int | None = None
    known_policy: bool = True
    checksum_ok: bool | None = None
    checksum_rule: str | None = None  # as CpuManagerState's
    accepted_by: str | None = None


@dataclass(frozen=True)
class KubeletConfig:
    """The resource-manager policies of ``<kubelet-dir>/config.yaml``; None where it sets none."""

    path: str
    cpu_manager_policy: str | None = None
    memory_manager_policy: str | None = None
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None


@dataclass(frozen=True)
class KubeletState:
    cpu: CpuManagerState | None = None
    memory: MemoryManagerState | None = None
    config: KubeletConfig | None = None


# --- everything at once -----------------------------------------------------------


@dataclass(frozen=True)
class NodePaths:
    """Where everything on the node is, resolved once (see ``devctl.node.paths``)."""

    root: str
    kubelet_dir: str
    plugins_dir: str
    pod_resources: str
    sysfs: str
    pod_logs: str
    proc: str = ""
    runtime_endpoint: str = ""
    cdi_dirs: tuple[str, ...] = ()  # CDI spec dirs, lowest priority first (the runtime's order)

    @property
    def kubelet_socket(self) -> str:
        return f"{self.plugins_dir}/kubelet.sock"

    @property
    def checkpoint(self) -> str:
        return f"{self.plugins_dir}/kubelet_internal_checkpoint"

    @property
    def dra_checkpoint(self) -> str:
        return f"{self.kubelet_dir}/dra_manager_state"

    @property
    def plugins_registry(self) -> str:
        return f"{self.kubelet_dir}/plugins_registry"


@dataclass(frozen=True)
class NodeSnapshot:
    """Everything the read commands use, collected once. ``None`` means not read."""

    taken_at: str  # UTC, ISO 8601
    paths: NodePaths
    kubelet_socket_present: bool = False  # a socket file is there (it may be stale)
    pods: tuple[PodResources, ...] | None = None
    allocatable: AllocatableResources | None = None
    plugins: tuple[PluginProbe, ...] = ()
    checkpoint: Checkpoint | None = None
    topology: HostTopology | None = None
    pod_identities: tuple[PodIdentity, ...] = ()
    errors: tuple[SourceError, ...] = ()
    # kubelet.sock dialled; None in a snapshot file written before devctl dialled it.
    kubelet_socket_status: SocketStatus | None = None
    procs: ProcScan | None = None
    runtime: RuntimeState | None = None
    kubelet_state: KubeletState | None = None
    dra_checkpoint: DraCheckpoint | None = None  # dra_manager_state; None when absent or unreadable
    cdi: CdiState | None = None
    # What was still being read when this snapshot was made: source names and plugin socket paths, as
    # collect's Progress names them. Empty for a finished read; only a face that shows the node while a
    # hung socket is awaited (the TUI's first screen) sees a partial snapshot.
    pending: tuple[str, ...] = ()
    # The name the kubelet registers the Node under (its --hostname-override, else <root>/etc/hostname), for
    # hints a person types; None when unknown (devctl.node.nodename), then hints say <node>.
    node_name: str | None = None

    @property
    def plugins_incomplete(self) -> bool:
        """Whether sockets are still being listed or answered: then no plugin or driver is known to be absent.

        A partial snapshot's ``plugins`` holds the sockets that answered so far;
        a resource or a DRA driver missing from it may be served by one still
        pending, so "no plugin serves it" cannot be said yet.
        """
        return any(p in (PLUGINS, DRA_DRIVERS) or "/" in p for p in self.pending)
