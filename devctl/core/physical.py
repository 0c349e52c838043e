"""The physical view with the node's own device nodes traced (``devctl hw``, doctor): the use-case the faces call.

``analyze.physical.physical_view`` joins logical devices to PCI functions from the snapshot; an allocation's
device specs lead somewhere only where a CDI spec names the same host path. On a live node ``read_host_nodes``
traces the allocations' host paths themselves (``node/hostnodes``: ``stat``, never ``open``) in a thread under
the command's deadline, and ``physical`` hands them to the view. A snapshot file (``--from``) is another
node's: nothing is traced, the view is the snapshot's alone.
"""

from __future__ import annotations

import asyncio

from devctl.analyze.physical import PhysicalView, physical_view
from devctl.base.errors import ErrorKind
from devctl.base.waits import within
from devctl.model import NodeSnapshot, SourceError
from devctl.model.allocations import device_nodes
from devctl.node.hostnodes import SOURCE, HostNodes, trace_host_nodes

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
    """The physical view of ``snapshot``; on a ``live`` node with the allocations' host paths traced."""
    traced = await read_host_nodes(snapshot, timeout) if live else HostNodes({})
    return physical_view(snapshot, traced.nodes), traced
