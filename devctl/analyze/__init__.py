"""What people ask of a node, derived from one NodeSnapshot: pure functions, no I/O.

Each ``*_view`` function returns frozen dataclasses whose ``devctl.model.serial.to_plain``
form is exactly the JSON of the CLI contract (``docs/commands.md``), so the JSON,
YAML and table renderers and the TUI all read the same rows. One module per view
family; every public name is importable from ``devctl.analyze`` itself.

The modules are imported when one of their names is first used (PEP 562):
a command imports only the views it shows, so ``devctl ls`` on a node
without a kubelet does not pay for the topology, plugin and checkpoint views
(docs/performance.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devctl.analyze.checkpoint import CheckpointEntryRow, CheckpointView, PodRef, checkpoint_view
    from devctl.analyze.inventory import devices_view, resources_view
    from devctl.analyze.plugins import CheckpointState, PluginRow, PluginsView, SocketState, plugins_view
    from devctl.analyze.pods import find_pod, merge_devices, pod_view, pods_view
    from devctl.analyze.rows import CAPACITY_NOTE, MISSING, UNKNOWN, DeviceRow, Holder, ResourceRow
    from devctl.analyze.sources import (
        ALL_SOURCES,
        CDI,
        CHECKPOINT,
        DRA_CHECKPOINT,
        DRA_DRIVERS,
        HOST_ONLY_SOURCES,
        IDENTITIES,
        KUBELET_SOURCES,
        KUBELET_STATE,
        PLUGINS,
        PLUGINS_DIR_SOURCE,
        POD_LIST,
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

# Each public name -> the module of devctl.analyze that defines it.
_HOME = {
    **dict.fromkeys(("CheckpointEntryRow", "CheckpointView", "PodRef", "checkpoint_view"), "checkpoint"),
    **dict.fromkeys(("CAPACITY_NOTE", "MISSING", "UNKNOWN", "DeviceRow", "Holder", "ResourceRow"), "rows"),
    **dict.fromkeys(("devices_view", "resources_view"), "inventory"),
    **dict.fromkeys(("CheckpointState", "PluginRow", "PluginsView", "SocketState", "plugins_view"), "plugins"),
    **dict.fromkeys(("find_pod", "merge_devices", "pod_view", "pods_view"), "pods"),
    **dict.fromkeys(
        (
            "ALL_SOURCES",
            "CDI",
            "CHECKPOINT",
            "DRA_CHECKPOINT",
            "DRA_DRIVERS",
            "HOST_ONLY_SOURCES",
            "IDENTITIES",
            "KUBELET_SOURCES",
            "KUBELET_STATE",
            "PLUGINS",
            "PLUGINS_DIR_SOURCE",
            "POD_LIST",
            "POD_RESOURCES",
            "PROCS",
            "RUNTIME",
            "TOPOLOGY",
            "errors_of",
            "only_sources",
            "refused",
            "source_of",
            "sources_read",
        ),
        "sources",
    ),
    **dict.fromkeys(("NO_NUMA", "AlignmentRow", "DeviceCount", "NumaRow", "TopologyView", "topology_view"), "topology"),
}


def __getattr__(name: str) -> object:
    """A public name, from its module (imported now, once; the name is then a plain attribute)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_SOURCES",
    "CAPACITY_NOTE",
    "CDI",
    "CHECKPOINT",
    "DRA_CHECKPOINT",
    "DRA_DRIVERS",
    "HOST_ONLY_SOURCES",
    "IDENTITIES",
    "KUBELET_SOURCES",
    "KUBELET_STATE",
    "MISSING",
    "NO_NUMA",
    "PLUGINS",
    "PLUGINS_DIR_SOURCE",
    "POD_LIST",
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
