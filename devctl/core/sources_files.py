"""The node's files and local sockets as collect reads them: checkpoints, CDI specs, sysfs, pod identities,
the CRI runtime, the kubelet's state files, the ``<proc>`` scan and the node's name.

Each reader puts its value or its ``SourceError`` into ``Readings``; nothing here writes to the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from devctl.core.readings import UNDECODABLE, Readings, oserror_line, undecodable
from devctl.model import (
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    RUNTIME,
    Checkpoint,
    DraCheckpoint,
    ErrorKind,
    NodePaths,
    Source,
    SourceError,
)
from devctl.node.connect import RpcFailure, check_socket


def _read_checkpoint(path: str) -> Checkpoint | SourceError:
    if not os.path.lexists(path):
        return SourceError(CHECKPOINT, f"{path}: no such file", ErrorKind.MISSING)
    from devctl.node.checkpoint import read_checkpoint
    from devctl.node.gojson import CheckpointError

    try:
        return read_checkpoint(path)
    except CheckpointError as e:
        return SourceError(CHECKPOINT, str(e), e.kind)
    except OSError as e:
        return SourceError(CHECKPOINT, oserror_line(path, e), ErrorKind.of_oserror(e))


async def read_checkpoint_source(paths: NodePaths, out: Readings) -> None:
    result = await asyncio.to_thread(_read_checkpoint, paths.checkpoint)
    if isinstance(result, SourceError):
        out.errors.append(result)
    else:
        out.checkpoint = result
        if result.unverified:  # read, but its checksum not computed: said, never shown as ok
            out.errors.append(SourceError(CHECKPOINT, f"{result.path}: {result.unverified}", ErrorKind.TOO_LARGE))


def _read_dra_checkpoint(path: str) -> DraCheckpoint | SourceError | None:
    if not os.path.lexists(path):
        return None  # a kubelet that never ran DRA has none: not an error
    from devctl.node.dra_checkpoint import read_dra_checkpoint
    from devctl.node.gojson import CheckpointError

    try:
        return read_dra_checkpoint(path)
    except CheckpointError as e:
        return SourceError(DRA_CHECKPOINT, str(e), e.kind)
    except OSError as e:
        return SourceError(DRA_CHECKPOINT, oserror_line(path, e), ErrorKind.of_oserror(e))


async def read_dra_checkpoint_source(paths: NodePaths, out: Readings) -> None:
    result = await asyncio.to_thread(_read_dra_checkpoint, paths.dra_checkpoint)
    if isinstance(result, SourceError):
        out.errors.append(result)
    else:
        out.dra_checkpoint = result


async def read_cdi_source(paths: NodePaths, out: Readings) -> None:
    """Every CDI spec; a spec that does not parse is one error line (and kept, with its error, for `devctl cdi`)."""
    from devctl.node.cdi import read_cdi

    state, errors = await asyncio.to_thread(read_cdi, paths.cdi_dirs, paths.root, paths.sysfs)
    out.cdi = state
    out.errors.extend(SourceError(CDI, message, kind) for message, kind in errors)
    out.errors.extend(
        SourceError(CDI, spec.error, spec.error_kind or ErrorKind.MALFORMED) for spec in state.specs if spec.error
    )


async def read_topology_source(paths: NodePaths, out: Readings) -> None:
    from devctl.node.sysfs import TopologyError, read_topology, with_database_names

    try:
        topology = await asyncio.to_thread(read_topology, paths.sysfs)
        out.topology = await asyncio.to_thread(with_database_names, topology)  # vendor and model names
    except TopologyError as e:
        out.errors.append(SourceError(Source.SYSFS, str(e), e.kind))


async def read_identities_source(paths: NodePaths, out: Readings) -> None:
    from devctl.node.identity import read_pod_identities

    identities, errors = await asyncio.to_thread(read_pod_identities, paths.pod_logs, paths.kubelet_dir)
    out.identities = identities
    out.errors.extend(errors)


async def read_runtime_source(paths: NodePaths, timeout: float, out: Readings) -> None:
    from devctl.node.cri import read_runtime, socket_of

    try:
        await check_socket(socket_of(paths.runtime_endpoint), timeout)
        out.runtime = await read_runtime(paths.runtime_endpoint, timeout)
    except RpcFailure as e:
        out.errors.append(SourceError(RUNTIME, e.message, e.kind))
    except UNDECODABLE:
        out.errors.append(SourceError(RUNTIME, undecodable(f"{paths.runtime_endpoint} (CRI)"), ErrorKind.WRONG_API))


async def read_kubelet_state_source(paths: NodePaths, out: Readings) -> None:
    from devctl.node.kubeletstate import read_kubelet_state

    out.kubelet_state, errors = await asyncio.to_thread(read_kubelet_state, paths.kubelet_dir)
    out.errors.extend(errors)


async def read_procs_source(paths: NodePaths, timeout: float, out: Readings) -> None:
    """Scan ``<proc>`` for the device nodes the checkpoint's Allocate replies and the CDI specs name (read first),
    within ``timeout`` (what was not read by then is said, and not claimed unheld)."""
    from devctl.model.allocations import cdi_nodes, device_nodes
    from devctl.node.procs import Watch, scan

    nodes = {p for group in device_nodes(out.checkpoint).values() for p in group} | cdi_nodes(out.cdi)
    out.procs, errors = await asyncio.to_thread(scan, paths.proc, Watch.of(nodes, paths.root), None, timeout)
    out.errors.extend(errors)


async def read_node_name_source(paths: NodePaths, timeout: float, out: Readings) -> None:
    """The kubelet's node name under the deadline; unknown (None) when it is not read in time."""
    from devctl.base.waits import within
    from devctl.node.nodename import node_name

    with contextlib.suppress(asyncio.TimeoutError):
        out.node_name = await within(asyncio.to_thread(node_name, paths.proc, paths.root), timeout)
