"""Read every source of a node at once, under deadlines, into one NodeSnapshot.

Every source runs concurrently (``asyncio.gather``), so a plugin that never
answers costs one deadline, not one per socket; a source that fails becomes a
``SourceError`` in the snapshot and never stops the others. Nothing here writes
to the node: sockets are only connected to, files only read.

Each reader imports its client or parser only once its socket or file is
there: a node without a kubelet is told from a stat and a refused connect,
without loading grpc, protobuf or the generated stubs (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import replace
from datetime import datetime, timezone

from devctl.core.readings import UNDECODABLE, Pending, Progress, Readings, tracked, undecodable
from devctl.core.snapshot_file import SNAPSHOT_KIND, SnapshotError, dump_snapshot, load_snapshot
from devctl.core.sources_files import (
    read_cdi_source,
    read_checkpoint_source,
    read_dra_checkpoint_source,
    read_identities_source,
    read_kubelet_state_source,
    read_node_name_source,
    read_procs_source,
    read_runtime_source,
    read_topology_source,
)
from devctl.core.sources_plugins import claimed_sockets, name_plugin_sockets, probe_socket, read_plugins
from devctl.model import (
    ALL_SOURCES,
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    DRA_DRIVERS,
    IDENTITIES,
    KUBELET_STATE,
    NODE_NAME,
    PLUGINS,
    POD_LIST,
    POD_RESOURCES,
    PROCS,
    RUNTIME,
    TOPOLOGY,
    AllocatableResources,
    ErrorKind,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PodResources,
    SocketStatus,
    SourceError,
)
from devctl.node.connect import RpcFailure, check_socket
from devctl.node.sockets import dial_path, infer_resource

log = logging.getLogger(__name__)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


# --- pod-resources -------------------------------------------------------------------------


async def _not_asked() -> None:
    """GetAllocatableResources' place when only the List is read (POD_LIST): nothing asked, nothing set."""
    return None


async def _pod_resources(paths: NodePaths, timeout: float, out: Readings, *, allocatable: bool = True) -> None:
    """List and GetAllocatableResources (without ``allocatable``, the List alone: POD_LIST)."""
    socket = paths.pod_resources
    try:
        # One socket-level connect first: it tells missing, stale and forbidden
        # apart, where gRPC would say UNAVAILABLE for all three.
        await check_socket(socket, timeout)
    except RpcFailure as e:
        out.errors.append(SourceError(POD_RESOURCES, e.message, e.kind))
        return
    import grpc

    from devctl.node.podresources import PodResourcesClient

    async with PodResourcesClient(socket, timeout) as client:
        pods, alloc = await asyncio.gather(
            client.list(), client.allocatable() if allocatable else _not_asked(), return_exceptions=True
        )
    if isinstance(pods, RpcFailure):
        out.errors.append(SourceError(POD_RESOURCES, pods.message, pods.kind))
    elif isinstance(pods, UNDECODABLE):
        out.errors.append(SourceError(POD_RESOURCES, undecodable(f"{socket} List"), ErrorKind.WRONG_API))
    elif isinstance(pods, BaseException):
        raise pods
    else:
        out.pods = pods
    if isinstance(alloc, RpcFailure):
        if alloc.code == grpc.StatusCode.UNIMPLEMENTED:
            # Kubelets before 1.20 serve only v1alpha1 List (no CPUs, memory or topology).
            message = f"{socket}: the kubelet serves pod-resources v1alpha1 only: no allocatable devices, CPUs, memory"
            out.errors.append(SourceError(POD_RESOURCES, message, ErrorKind.UNIMPLEMENTED))
        else:
            out.errors.append(SourceError(POD_RESOURCES, alloc.message, alloc.kind))
    elif isinstance(alloc, UNDECODABLE):
        out.errors.append(
            SourceError(POD_RESOURCES, undecodable(f"{socket} GetAllocatableResources"), ErrorKind.WRONG_API)
        )
    elif isinstance(alloc, BaseException):
        raise alloc
    elif alloc is not None:
        out.allocatable = alloc


async def _kubelet_socket(paths: NodePaths, timeout: float, out: Readings) -> None:
    """Dial kubelet.sock: the kubelet leaves it on disk when it exits, so a file there proves nothing."""
    try:
        await check_socket(paths.kubelet_socket, timeout)
    except RpcFailure as e:
        out.kubelet_socket = SocketStatus.of_failure(e.kind)
    else:
        out.kubelet_socket = SocketStatus.LISTENING


# --- device plugin sockets -------------------------------------------------------------------


# --- which resource a socket serves ------------------------------------------------------------


# --- the whole node ------------------------------------------------------------------------------


async def _guard(source: str, read: Callable[[], Awaitable[None]], out: Readings, pending: Pending | None) -> None:
    """Keep one reader's unexpected failure from taking the others down with it; log each source's time (-v).

    The reader is called here, not by the caller: a Ctrl-C that cancels this task before it first runs
    then leaves no coroutine that was never awaited (Python's RuntimeWarning on the way out).
    """
    start = time.perf_counter()
    try:
        await tracked(pending, source, read())
    except Exception as e:  # a reader bug or an OS surprise must not lose the other sources
        log.debug("%s failed", source, exc_info=True)
        out.errors.append(SourceError(source, f"{type(e).__name__}: {e}".splitlines()[0]))
    log.debug("read %s in %.1f ms", source, (time.perf_counter() - start) * 1000)


async def collect(
    paths: NodePaths,
    timeout: float,
    *,
    want: AbstractSet[str] | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> NodeSnapshot:
    """Every source of the node (or only those in ``want``), read concurrently under ``timeout`` each.

    ``progress``, when given, is called each time what is still awaited
    changes (see :class:`Progress`), so a face can say what it waits for and
    show what has answered. It changes nothing in the result.
    """
    want = ALL_SOURCES if want is None else frozenset(want)
    # The List alone is read under pod-resources' own name (its errors, what is pending), unless all of it is wanted.
    list_only = POD_LIST in want and POD_RESOURCES not in want
    if POD_LIST in want:
        want = (want - {POD_LIST}) | {POD_RESOURCES}
    out = Readings()
    pending: Pending | None = None
    if progress is not None:
        pending = Pending(progress, lambda: _assemble(paths, out, pending=pending))
    readers: dict[str, Callable[[], Awaitable[None]]] = {
        POD_RESOURCES: lambda: _pod_resources(paths, timeout, out, allocatable=not list_only),
        PLUGINS: lambda: read_plugins(paths, timeout, out, pending),
        DRA_DRIVERS: lambda: read_plugins(paths, timeout, out, pending, dra_only=True),
        CHECKPOINT: lambda: read_checkpoint_source(paths, out),
        TOPOLOGY: lambda: read_topology_source(paths, out),
        IDENTITIES: lambda: read_identities_source(paths, out),
        RUNTIME: lambda: read_runtime_source(paths, timeout, out),
        KUBELET_STATE: lambda: read_kubelet_state_source(paths, out),
        DRA_CHECKPOINT: lambda: read_dra_checkpoint_source(paths, out),
        CDI: lambda: read_cdi_source(paths, out),
    }
    if PROCS in want:
        want |= {CHECKPOINT, CDI}  # the device nodes to look for: its Allocate replies, the CDI specs
    if PLUGINS in want:
        want -= {DRA_DRIVERS}  # a part of PLUGINS
    started = {
        name: asyncio.ensure_future(_guard(name, read, out, pending)) for name, read in readers.items() if name in want
    }

    async def procs() -> None:
        # As soon as the files naming the device nodes are read: the scan's CPU time overlaps the RPCs' waits.
        await asyncio.wait([started[CHECKPOINT], started[CDI]])
        await _guard(PROCS, lambda: read_procs_source(paths, timeout, out), out, pending)

    await asyncio.gather(
        *started.values(),
        _guard("kubelet-socket", lambda: _kubelet_socket(paths, timeout, out), out, None),
        # For the hints of doctor alone: a walk of <proc> that ls, the guard and the exporter never pay for.
        *(
            [_guard(NODE_NAME, lambda: read_node_name_source(paths, timeout, out), out, None)]
            if NODE_NAME in want
            else []
        ),
        *([procs()] if PROCS in want else []),
    )
    return _assemble(paths, out)


def _assemble(paths: NodePaths, out: Readings, *, pending: Pending | None = None) -> NodeSnapshot:
    """The snapshot of what was read; with ``pending``, while reading goes on, from copies of what is in so far."""
    waiting: tuple[str, ...] = ()
    if pending is not None:
        out = replace(out, plugins=list(out.plugins or out.answered), errors=list(out.errors))
        waiting = tuple(sorted(pending.items))
    name_plugin_sockets(paths, out)
    return NodeSnapshot(
        taken_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        paths=paths,
        kubelet_socket_present=_is_socket(paths.kubelet_socket),
        kubelet_socket_status=out.kubelet_socket,
        pods=out.pods,
        allocatable=out.allocatable,
        plugins=tuple(out.plugins),
        checkpoint=out.checkpoint,
        topology=out.topology,
        pod_identities=out.identities,
        errors=tuple(out.errors),
        procs=out.procs,
        runtime=out.runtime,
        kubelet_state=out.kubelet_state,
        dra_checkpoint=out.dra_checkpoint,
        cdi=out.cdi,
        pending=waiting,
        node_name=out.node_name,
    )


async def reread(snapshot: NodeSnapshot, timeout: float, sockets: Iterable[str], after: float) -> NodeSnapshot:
    """The same node ``after`` seconds later, with the kubelet's allocatable devices and ``sockets`` read again.

    Only those: what ``doctor`` needs to tell a lasting disagreement between a
    plugin and the kubelet from an update in flight, without waiting a second
    time for every hung socket on the node. A source that fails now keeps its
    first reading's absence (``allocatable`` None).
    """
    from devctl.node.podresources import PodResourcesClient

    await asyncio.sleep(after)
    wanted = set(sockets)
    first = {p.socket: p for p in snapshot.plugins if p.socket in wanted}

    async def allocatable() -> AllocatableResources | None:
        try:
            await check_socket(snapshot.paths.pod_resources, timeout)
            async with PodResourcesClient(snapshot.paths.pod_resources, timeout) as client:
                return await client.allocatable()
        except (RpcFailure, *UNDECODABLE):
            return None

    async def probe(p: PluginProbe) -> PluginProbe:
        # The socket that serves DevicePlugin, found as every view finds it (an endpoint, a link's target).
        endpoint = dial_path(snapshot.paths, p) or p.socket
        again = await probe_socket(endpoint, timeout)
        return replace(again, socket=p.socket, resource=p.resource, registry=p.registry)

    alloc, probes = await asyncio.gather(allocatable(), asyncio.gather(*(probe(p) for p in first.values())))
    fresh = {p.socket: p for p in probes}
    return replace(
        snapshot,
        taken_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        allocatable=alloc,
        plugins=tuple(fresh.get(p.socket, p) for p in snapshot.plugins),
    )


# --- snapshot files ------------------------------------------------------------------------------


async def get_pod(paths: NodePaths, timeout: float, name: str, namespace: str) -> PodResources:
    """One pod by pod-resources Get (List where Get is disabled); raises RpcFailure or PodNotFound."""
    from devctl.node.podresources import PodResourcesClient

    await check_socket(paths.pod_resources, timeout)
    async with PodResourcesClient(paths.pod_resources, timeout) as client:
        return await client.get(name, namespace)


__all__ = [
    "SNAPSHOT_KIND",
    "Progress",
    "SnapshotError",
    "claimed_sockets",
    "collect",
    "dump_snapshot",
    "get_pod",
    "infer_resource",
    "load_snapshot",
    "probe_socket",
    "reread",
]
