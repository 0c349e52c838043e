"""Doctor's physical checks: ``analyze.physical``'s findings over the snapshot, only where their inputs are known.

``physical-shared`` (info) and ``physical-replicas-in-container`` (warning) need the join of logical devices
to PCI functions, which the snapshot gives (and ``host_nodes``, the allocations' host paths the core traced on
a live node). ``physical-gone`` (error) says sysfs no longer lists a function: it is said only when sysfs was
read, without error, and lists PCI functions at all (a tree without ``bus/pci`` is no evidence that one left).
"""

from __future__ import annotations

from collections.abc import Mapping

from devctl.analyze.physical import findings, physical_view
from devctl.model import Finding, NodeSnapshot, Source

GONE = "physical-gone"


def sysfs_lists_functions(snapshot: NodeSnapshot) -> bool:
    """Whether the snapshot's sysfs reading can tell that a PCI function is missing."""
    if snapshot.topology is None or not snapshot.topology.pci_devices:
        return False
    return not any(e.source == Source.SYSFS for e in snapshot.errors)


def physical_findings(snapshot: NodeSnapshot, host_nodes: Mapping[str, str | None] | None = None) -> list[Finding]:
    """Shared through replicas, doubled in one container, and (when sysfs can tell) gone from the bus."""
    out = findings(physical_view(snapshot, host_nodes))
    if not sysfs_lists_functions(snapshot):
        out = [f for f in out if f.code != GONE]
    return out
