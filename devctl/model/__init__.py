"""Model objects: what every layer above ``node/`` sees instead of protobuf messages.

All are frozen dataclasses holding tuples and plain values, so a snapshot can be
shared between threads and tasks without copying, and ``devctl.model.serial`` turns any
of them into JSON and back without loss (``devctl snapshot`` / ``--from FILE``).

Each subject has its module; every public name is re-exported here, so ``from devctl.model import X``
works for all of them: ``sources`` (source names, ``SourceError``, ``SocketStatus``), ``findings``
(``Finding``, ``Severity``), ``plugins`` (device plugins and DRA drivers as probed, their devices),
``pods`` (pod-resources), ``checkpoints`` (the device and DRA managers' checkpoints), ``cdi`` (CDI specs),
``host`` (NUMA, PCI, processes, the CRI runtime), ``kubelet`` (the CPU and memory managers' state) and
``snapshot`` (``NodePaths``, ``NodeSnapshot``).
"""

from __future__ import annotations

from devctl.base.errors import ErrorKind, SocketStatus  # the vocabularies of failures and of sockets' states
from devctl.model.cdi import (
    CdiDevice,
    CdiDeviceNode,
    CdiEdits,
    CdiMount,
    CdiSpec,
    CdiState,
)
from devctl.model.checkpoints import (
    Checkpoint,
    CheckpointEntry,
    DraCheckpoint,
    DraCheckpointClaim,
    DraCheckpointDevice,
)
from devctl.model.findings import (
    SEVERITIES,
    Finding,
    Severity,
)
from devctl.model.host import (
    HostTopology,
    Hugepages,
    NumaNode,
    PciDevice,
    Process,
    ProcScan,
    RuntimeContainer,
    RuntimeSandbox,
    RuntimeState,
)
from devctl.model.kubelet import (
    CpuAssignment,
    CpuManagerState,
    KubeletConfig,
    KubeletState,
    MemoryAssignment,
    MemoryManagerState,
)
from devctl.model.plugins import (
    DEVICE_PLUGIN_TYPE,
    HEALTHY,
    UNHEALTHY,
    Allocation,
    Device,
    DeviceList,
    DeviceNode,
    DraDeviceHealth,
    DraEndpoint,
    Mount,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    RegistryInfo,
)
from devctl.model.pods import (
    AllocatableResources,
    ClaimDevice,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    DynamicResource,
    PodIdentity,
    PodResources,
)
from devctl.model.snapshot import (
    NodePaths,
    NodeSnapshot,
)
from devctl.model.sources import (
    ALL_SOURCES,
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    DRA_DRIVERS,
    EXTRA_SOURCES,
    HOLDER_SOURCES,
    IDENTITIES,
    KUBELET_STATE,
    NODE_NAME,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_LIST,
    POD_RESOURCES,
    PROCS,
    RUNTIME,
    TOPOLOGY,
    Source,
    SourceError,
)

__all__ = [
    "ALL_SOURCES",
    "CDI",
    "CHECKPOINT",
    "DEVICE_PLUGIN_TYPE",
    "DRA_CHECKPOINT",
    "DRA_DRIVERS",
    "EXTRA_SOURCES",
    "HEALTHY",
    "HOLDER_SOURCES",
    "IDENTITIES",
    "KUBELET_STATE",
    "NODE_NAME",
    "PLUGINS",
    "PLUGINS_DIR_SOURCE",
    "POD_LIST",
    "POD_RESOURCES",
    "PROCS",
    "RUNTIME",
    "SEVERITIES",
    "TOPOLOGY",
    "UNHEALTHY",
    "AllocatableResources",
    "Allocation",
    "CdiDevice",
    "CdiDeviceNode",
    "CdiEdits",
    "CdiMount",
    "CdiSpec",
    "CdiState",
    "Checkpoint",
    "CheckpointEntry",
    "ClaimDevice",
    "ContainerDevices",
    "ContainerMemory",
    "ContainerResources",
    "CpuAssignment",
    "CpuManagerState",
    "Device",
    "DeviceList",
    "DeviceNode",
    "DraCheckpoint",
    "DraCheckpointClaim",
    "DraCheckpointDevice",
    "DraDeviceHealth",
    "DraEndpoint",
    "DynamicResource",
    "ErrorKind",
    "Finding",
    "HostTopology",
    "Hugepages",
    "KubeletConfig",
    "KubeletState",
    "MemoryAssignment",
    "MemoryManagerState",
    "Mount",
    "NodePaths",
    "NodeSnapshot",
    "NumaNode",
    "PciDevice",
    "PluginOptions",
    "PluginProbe",
    "PluginStatus",
    "PodIdentity",
    "PodResources",
    "ProcScan",
    "Process",
    "RegistryInfo",
    "RuntimeContainer",
    "RuntimeSandbox",
    "RuntimeState",
    "Severity",
    "SocketStatus",
    "Source",
    "SourceError",
]
