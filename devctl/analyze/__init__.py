"""What people ask of a node, derived from one NodeSnapshot: pure functions, no I/O.

Each ``*_view`` function returns frozen dataclasses whose ``devctl.serial.to_plain``
form is exactly the JSON of the CLI contract (``docs/commands.md``), so the JSON,
YAML and table renderers and the TUI all read the same rows. One module per view
family; every public name is importable from ``devctl.analyze`` itself.
"""

from devctl.analyze.checkpoint import CheckpointEntryRow, CheckpointView, PodRef, checkpoint_view
from devctl.analyze.inventory import (
    CAPACITY_NOTE,
    MISSING,
    UNKNOWN,
    DeviceRow,
    Holder,
    ResourceRow,
    devices_view,
    resources_view,
)
from devctl.analyze.plugins import CheckpointState, PluginRow, PluginsView, SocketState, plugins_view
from devctl.analyze.pods import find_pod, merge_devices, pod_view, pods_view
from devctl.analyze.sources import (
    ALL_SOURCES,
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    DRA_DRIVERS,
    IDENTITIES,
    KUBELET_SOURCES,
    KUBELET_STATE,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
    PROCS,
    RUNTIME,
    TOPOLOGY,
    errors_of,
    only_sources,
    refused,
    source_of,
    sources_read,
)
from devctl.analyze.topology import NO_NUMA, AlignmentRow, DeviceCount, NumaRow, TopologyView, topology_view

__all__ = [
    "ALL_SOURCES",
    "CAPACITY_NOTE",
    "CDI",
    "CHECKPOINT",
    "DRA_CHECKPOINT",
    "DRA_DRIVERS",
    "IDENTITIES",
    "KUBELET_SOURCES",
    "KUBELET_STATE",
    "MISSING",
    "NO_NUMA",
    "PLUGINS",
    "PLUGINS_DIR_SOURCE",
    "POD_RESOURCES",
    "PROCS",
    "RUNTIME",
    "TOPOLOGY",
    "UNKNOWN",
    "AlignmentRow",
    "CheckpointEntryRow",
    "CheckpointState",
    "CheckpointView",
    "DeviceCount",
    "DeviceRow",
    "Holder",
    "NumaRow",
    "PluginRow",
    "PluginsView",
    "PodRef",
    "ResourceRow",
    "SocketState",
    "TopologyView",
    "checkpoint_view",
    "devices_view",
    "errors_of",
    "find_pod",
    "merge_devices",
    "only_sources",
    "plugins_view",
    "pod_view",
    "pods_view",
    "refused",
    "resources_view",
    "source_of",
    "sources_read",
    "topology_view",
]
