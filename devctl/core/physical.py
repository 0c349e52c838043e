"""The physical view with the node's own device nodes traced (``devctl hw``, doctor): the use-case the faces call.

``analyze.physical.physical_view`` joins logical devices to PCI functions from the snapshot; an allocation's
device specs lead somewhere only where a CDI spec names the same host path. On a live node ``read_host_nodes``
traces the allocations' host paths themselves (``node/hostnodes``: ``stat``, never ``open``) in a thread under
the command's deadline, and ``physical`` hands them to the view. A snapshot file (``--from``) is another
node's: nothing is traced, the view is the snapshot's alone. On a live node the PCI tree (``core.pci``) is read
too, so that a class or NUMA node sysfs cannot give is unknown; a tree that lists nothing is one line.
"""

from __future__ import annotations

import asyncio

from devctl.analyze.physical import PhysicalView, physical_view
from devctl.base.errors import ErrorKind
from devctl.base.waits import within
from devctl.core.pci import read_pci
from devctl.model import NodeSnapshot, SourceError
from devctl.model.allocations import device_nodes
from devctl.node.hostnodes import SOURCE, HostNodes, trace_host_nodes

PCI_SOURCE = "pci-tree"

__all__ = ["HostNodes", "allocation_paths", "physical", "read_host_nodes"]


def allocation_paths(snapshot: NodeSnapshot) -> list[str]:
    """Every device node host path the checkpoint's Allocate replies name, in first-seen order."""
    return list(dict.fromkeys(p for paths in device_nodes(snapshot.checkpoint).values() for p in paths))


async def read_host_nodes(snapshot: NodeSnapshot, timeout: float) -> HostNodes:
    """The allocations' host paths traced to PCI functions within ``timeout`` seconds (else one timeout line)."""
    paths = allocation_paths(snapshot)
    if not paths:
        return HostNodes({})
    root, sysfs = snapshot.paths.root, snapshot.paths.sysfs
    work = asyncio.to_thread(trace_host_nodes, root, sysfs, paths, budget=timeout)
    try:
        return await within(work, max(timeout, 0.001))
    except asyncio.TimeoutError:  # a stat that hangs (a dead mount): the thread finishes on its own
        message = f"{len(paths)} host paths not traced within {timeout:g} s"
        return HostNodes({}, (SourceError(SOURCE, message, ErrorKind.TIMEOUT),))


async def physical(snapshot: NodeSnapshot, timeout: float, *, live: bool) -> tuple[PhysicalView, HostNodes]:
    """The physical view of ``snapshot`` and the traced host paths, whose ``errors`` hold every line to show.

    On a ``live`` node the allocations' host paths are traced and the PCI tree is read (``core.pci``: a class or
    NUMA node that cannot be read is unknown there, one line each). When no PCI function was read at all, one
    line says so: the devices' physical side is then unknown, never "gone".
    """
    if not live:
        view = physical_view(snapshot)
        return view, HostNodes({}, _nothing_read(view, "the snapshot holds no PCI function", ()))
    traced, tree = await asyncio.gather(
        read_host_nodes(snapshot, timeout), read_pci(snapshot.paths.sysfs, timeout, names=True)
    )
    view = physical_view(snapshot, traced.nodes, tree.tree)
    said = f"{snapshot.paths.sysfs}: sysfs lists no PCI function"
    lines = (*traced.errors, *tree.errors, *_nothing_read(view, said, tree.errors))
    return view, HostNodes(traced.nodes, lines)


def _nothing_read(view: PhysicalView, said: str, errors: tuple[SourceError, ...]) -> tuple[SourceError, ...]:
    """One line when no PCI function was read and no error already says why."""
    if view.sysfs_read or errors:
        return ()
    return (SourceError(PCI_SOURCE, f"{said}: the devices' physical side is unknown", ErrorKind.MISSING),)
