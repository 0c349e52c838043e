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
import contextlib
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from typing import IO, TypeVar

from devctl.base.errors import DevctlError
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
    PLUGINS_DIR_SOURCE,
    POD_LIST,
    POD_RESOURCES,
    PROCS,
    RUNTIME,
    TOPOLOGY,
    AllocatableResources,
    CdiState,
    Checkpoint,
    DraCheckpoint,
    DraEndpoint,
    ErrorKind,
    HostTopology,
    KubeletState,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    PodResources,
    ProcScan,
    RegistryInfo,
    RuntimeState,
    SocketStatus,
    SourceError,
)
from devctl.node.connect import RpcFailure, check_socket
from devctl.node.sockets import (
    DEVICE_PLUGIN_TYPE,
    OutsideRoot,
    SocketFile,
    dial_path,
    infer_resource,
    known_ids,
    name_sockets,
    plugin_sockets,
    real_path,
    registry_endpoint,
    registry_sockets,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# What ``devctl snapshot`` writes at the top of its JSON, so ``--from`` can tell a
# snapshot from any other JSON file.
SNAPSHOT_KIND = "devctl-snapshot/v1"


class SnapshotError(DevctlError):
    """A snapshot file that cannot be read back; the message is one line."""


@dataclass
class _Result:
    """What the concurrent readers hand back before the snapshot is assembled."""

    pods: tuple[PodResources, ...] | None = None
    allocatable: AllocatableResources | None = None
    plugins: list[PluginProbe] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    topology: HostTopology | None = None
    identities: tuple[PodIdentity, ...] = ()
    kubelet_socket: SocketStatus | None = None
    dra_checkpoint: DraCheckpoint | None = None
    cdi: CdiState | None = None
    errors: list[SourceError] = field(default_factory=list)
    procs: ProcScan | None = None
    runtime: RuntimeState | None = None
    kubelet_state: KubeletState | None = None
    # socket (real path) -> resource, from running devctl plugins' control sockets
    claimed: dict[str, str] = field(default_factory=dict)
    answered: list[PluginProbe] = field(default_factory=list)  # probes done so far, in the order they answered
    node_name: str | None = None


@dataclass(frozen=True)
class Progress:
    """What ``collect`` still waits for, and the node as far as it has answered.

    ``pending`` holds source names (``pod-resources``, ``checkpoint`` …) and
    the path of each plugin socket not answered yet.
    """

    pending: frozenset[str]
    _partial: Callable[[], NodeSnapshot]

    def names(self) -> list[str]:
        """What is pending as a person names it: sockets by file name, ``plugins`` left out while its sockets are."""
        names = sorted(os.path.basename(p) if "/" in p else p for p in self.pending)
        if any("/" in p for p in self.pending):
            names = [n for n in names if n != PLUGINS]
        return names

    def snapshot(self) -> NodeSnapshot:
        """What has answered by now: a source still pending is absent (None, or no plugin of it), not an error."""
        return self._partial()


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


# grpc.aio hands back None for a reply it cannot decode (it only logs the error), and
# the clients then fail on that None: such a socket speaks something else.
_UNDECODABLE = (AttributeError, TypeError)


def _undecodable(what: str) -> str:
    return f"{what}: the reply could not be decoded (not the API devctl expects)"


def _oserror(path: str, err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(err, PermissionError):
        return f"{path}: permission denied"
    return f"{path}: {err.strerror or err}"


# --- pod-resources -------------------------------------------------------------------------


async def _not_asked() -> None:
    """GetAllocatableResources' place when only the List is read (POD_LIST): nothing asked, nothing set."""
    return None


async def _pod_resources(paths: NodePaths, timeout: float, out: _Result, *, allocatable: bool = True) -> None:
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
    elif isinstance(pods, _UNDECODABLE):
        out.errors.append(SourceError(POD_RESOURCES, _undecodable(f"{socket} List"), ErrorKind.WRONG_API))
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
    elif isinstance(alloc, _UNDECODABLE):
        out.errors.append(
            SourceError(POD_RESOURCES, _undecodable(f"{socket} GetAllocatableResources"), ErrorKind.WRONG_API)
        )
    elif isinstance(alloc, BaseException):
        raise alloc
    elif alloc is not None:
        out.allocatable = alloc


async def _kubelet_socket(paths: NodePaths, timeout: float, out: _Result) -> None:
    """Dial kubelet.sock: the kubelet leaves it on disk when it exits, so a file there proves nothing."""
    try:
        await check_socket(paths.kubelet_socket, timeout)
    except RpcFailure as e:
        out.kubelet_socket = SocketStatus.of_failure(e.kind)
    else:
        out.kubelet_socket = SocketStatus.LISTENING


# --- device plugin sockets -------------------------------------------------------------------


async def probe_socket(socket: str, timeout: float) -> PluginProbe:
    """Options and the first device list of one plugin socket; a failure is a status, not an exception."""
    try:
        await check_socket(socket, timeout)
        from devctl.node.deviceplugin import DevicePluginClient

        async with DevicePluginClient(socket, timeout) as client:
            options, devices, latency = await client.probe()
    except RpcFailure as e:
        return PluginProbe(socket=socket, status=e.status, error=e.message, error_kind=e.kind)
    except _UNDECODABLE:
        return PluginProbe(
            socket=socket, status=PluginStatus.UNREACHABLE, error=_undecodable(socket), error_kind=ErrorKind.WRONG_API
        )
    return PluginProbe(socket=socket, status=PluginStatus.SERVING, options=options, devices=devices, latency_ms=latency)


async def _registry_socket(s: SocketFile, paths: NodePaths, timeout: float, dra_only: bool = False) -> PluginProbe:
    """GetInfo of a registry socket (dialled as the file it is) and, for a device plugin, a probe of its endpoint.

    With ``dra_only`` a device plugin's endpoint is not probed (the caller leaves its registration out).
    """
    socket = s.path
    try:
        await check_socket(s.real, timeout)
        from devctl.node.deviceplugin import registry_info

        info = await registry_info(s.real, timeout)
    except RpcFailure as e:
        return PluginProbe(socket=socket, status=e.status, error=e.message, error_kind=e.kind)
    except _UNDECODABLE:
        error = _undecodable(f"{socket} GetInfo")
        return PluginProbe(socket=socket, status=PluginStatus.UNREACHABLE, error=error, error_kind=ErrorKind.WRONG_API)
    from devctl.node.dra import DRA_PLUGIN_TYPE

    if info.type == DRA_PLUGIN_TYPE:
        return await _dra_driver(s, paths, info, timeout)
    if info.type != DEVICE_PLUGIN_TYPE or dra_only:
        # A CSI driver or an unknown type: shown, not probed (nor a device plugin when only DRA drivers are read).
        return PluginProbe(socket=socket, status=PluginStatus.SERVING, registry=info)
    try:
        endpoint = registry_endpoint(paths, socket, info)
    except OutsideRoot as e:
        return PluginProbe(
            socket=socket, status=PluginStatus.UNREACHABLE, resource=info.name or None, error=str(e), registry=info
        )
    probe = await probe_socket(endpoint, timeout)
    return replace(probe, socket=socket, resource=info.name or None, registry=info)


async def _dra_driver(s: SocketFile, paths: NodePaths, info: RegistryInfo, timeout: float) -> PluginProbe:
    """A DRA driver's registration answered: its endpoint probed (connect, one health message), never prepared."""
    from devctl.node.dra import probe_endpoint

    # ``resource`` stays None: a driver serves no extended resource (its name is in ``registry``).
    base = PluginProbe(socket=s.path, status=PluginStatus.SERVING, registry=info)
    try:
        endpoint = registry_endpoint(paths, s.path, info)
    except OutsideRoot as e:
        dra = DraEndpoint(path=info.endpoint, status=PluginStatus.UNREACHABLE, error=str(e), error_kind=ErrorKind.OTHER)
        return replace(base, dra=dra)
    return replace(base, dra=await probe_endpoint(endpoint, info.supported_versions, timeout))


async def _no_claims() -> dict[str, str]:
    return {}


async def _plugin_socket(s: SocketFile, timeout: float) -> PluginProbe:
    """Probe the socket file itself (a symlink's target, found inside the root); shown under its listed name."""
    probe = await probe_socket(s.real, timeout)
    return replace(probe, socket=s.path)


async def claimed_sockets(paths: NodePaths, timeout: float) -> dict[str, str]:
    """Socket (real path) -> resource, as each running devctl plugin says on its control socket."""
    from devctl.node.controlsockets import default_control_dir, running

    claimed = {}
    for _, info in await running(default_control_dir(paths.root), timeout):
        socket, resource = info.get("socket"), info.get("resource")
        if isinstance(socket, str) and isinstance(resource, str):
            with contextlib.suppress(OutsideRoot, OSError):
                claimed[real_path(paths.root, socket)] = resource
    return claimed


async def _plugins(
    paths: NodePaths, timeout: float, out: _Result, pending: _Pending | None = None, *, dra_only: bool = False
) -> None:
    """Every plugin socket and registration probed; with ``dra_only`` the DRA drivers' registrations alone."""
    try:
        sockets = [] if dra_only else plugin_sockets(paths.plugins_dir, paths.root)
    except OSError as e:
        out.errors.append(SourceError(PLUGINS_DIR_SOURCE, _oserror(paths.plugins_dir, e), ErrorKind.of_oserror(e)))
        sockets = []
    try:
        registry = registry_sockets(paths.plugins_registry, paths.root)
    except FileNotFoundError:
        registry = []  # most nodes without CSI or DRA drivers have none
    except OSError as e:
        out.errors.append(SourceError("registry", _oserror(paths.plugins_registry, e), ErrorKind.of_oserror(e)))
        registry = []
    if not sockets and not registry:
        return  # no socket to name: the running devctl plugins' control sockets are not asked
    claimed, probes = await asyncio.gather(
        _no_claims() if dra_only else claimed_sockets(paths, timeout),
        asyncio.gather(
            *(_answered(pending, out, s.path, partial(_plugin_socket, s, timeout)) for s in sockets),
            *(
                _answered(pending, out, s.path, partial(_registry_socket, s, paths, timeout, dra_only))
                for s in registry
            ),
        ),
    )
    if dra_only:  # a device plugin's or CSI driver's registration is not a DRA driver's: left out
        from devctl.node.dra import DRA_PLUGIN_TYPE

        probes = [p for p in probes if p.registry is None or p.registry.type == DRA_PLUGIN_TYPE]
    out.claimed.update(claimed)
    registered = {s.path for s in registry}
    for p in probes:
        if p.error:
            source = "registry" if p.socket in registered else "plugin"
            out.errors.append(SourceError(source, p.error, p.error_kind or ErrorKind.OTHER))
        if p.dra is not None and p.dra.error:
            driver = p.registry.name if p.registry is not None else None
            out.errors.append(SourceError("dra", p.dra.error, p.dra.error_kind or ErrorKind.OTHER, driver))
    out.plugins.extend(probes)


# --- files -----------------------------------------------------------------------------------


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
        return SourceError(CHECKPOINT, _oserror(path, e), ErrorKind.of_oserror(e))


async def _checkpoint(paths: NodePaths, out: _Result) -> None:
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
        return SourceError(DRA_CHECKPOINT, _oserror(path, e), ErrorKind.of_oserror(e))


async def _dra_checkpoint(paths: NodePaths, out: _Result) -> None:
    result = await asyncio.to_thread(_read_dra_checkpoint, paths.dra_checkpoint)
    if isinstance(result, SourceError):
        out.errors.append(result)
    else:
        out.dra_checkpoint = result


async def _cdi(paths: NodePaths, out: _Result) -> None:
    """Every CDI spec; a spec that does not parse is one error line (and kept, with its error, for `devctl cdi`)."""
    from devctl.node.cdi import read_cdi

    state, errors = await asyncio.to_thread(read_cdi, paths.cdi_dirs, paths.root, paths.sysfs)
    out.cdi = state
    out.errors.extend(SourceError(CDI, message, kind) for message, kind in errors)
    out.errors.extend(
        SourceError(CDI, spec.error, spec.error_kind or ErrorKind.MALFORMED) for spec in state.specs if spec.error
    )


async def _topology(paths: NodePaths, out: _Result) -> None:
    from devctl.node.sysfs import TopologyError, read_topology, with_database_names

    try:
        topology = await asyncio.to_thread(read_topology, paths.sysfs)
        out.topology = await asyncio.to_thread(with_database_names, topology)  # vendor and model names
    except TopologyError as e:
        out.errors.append(SourceError("sysfs", str(e), e.kind))


async def _identities(paths: NodePaths, out: _Result) -> None:
    from devctl.node.identity import read_pod_identities

    identities, errors = await asyncio.to_thread(read_pod_identities, paths.pod_logs, paths.kubelet_dir)
    out.identities = identities
    out.errors.extend(errors)


async def _runtime(paths: NodePaths, timeout: float, out: _Result) -> None:
    from devctl.node.cri import read_runtime, socket_of

    try:
        await check_socket(socket_of(paths.runtime_endpoint), timeout)
        out.runtime = await read_runtime(paths.runtime_endpoint, timeout)
    except RpcFailure as e:
        out.errors.append(SourceError(RUNTIME, e.message, e.kind))
    except _UNDECODABLE:
        out.errors.append(SourceError(RUNTIME, _undecodable(f"{paths.runtime_endpoint} (CRI)"), ErrorKind.WRONG_API))


async def _kubelet_state(paths: NodePaths, out: _Result) -> None:
    from devctl.node.kubeletstate import read_kubelet_state

    out.kubelet_state, errors = await asyncio.to_thread(read_kubelet_state, paths.kubelet_dir)
    out.errors.extend(errors)


async def _procs(paths: NodePaths, timeout: float, out: _Result) -> None:
    """Scan ``<proc>`` for the device nodes the checkpoint's Allocate replies and the CDI specs name (read first),
    within ``timeout`` (what was not read by then is said, and not claimed unheld)."""
    from devctl.model.allocations import cdi_nodes, device_nodes
    from devctl.node.procs import Watch, scan

    nodes = {p for group in device_nodes(out.checkpoint).values() for p in group} | cdi_nodes(out.cdi)
    out.procs, errors = await asyncio.to_thread(scan, paths.proc, Watch.of(nodes, paths.root), None, timeout)
    out.errors.extend(errors)


# --- which resource a socket serves ------------------------------------------------------------


async def _node_name(paths: NodePaths, timeout: float, out: _Result) -> None:
    """The kubelet's node name under the deadline; unknown (None) when it is not read in time."""
    from devctl.base.waits import within
    from devctl.node.nodename import node_name

    with contextlib.suppress(asyncio.TimeoutError):
        out.node_name = await within(asyncio.to_thread(node_name, paths.proc, paths.root), timeout)


def _device_plugin(p: PluginProbe) -> bool:
    """A device plugin's socket, or its registration (not a DRA or CSI driver's)."""
    return p.registry is None or p.registry.type == DEVICE_PLUGIN_TYPE


def _name_sockets(paths: NodePaths, out: _Result) -> None:
    """Fill in each socket's resource with the one resolver every caller uses (devctl.node.sockets)."""
    if not out.plugins:
        return  # no socket to name (`devctl pods` reads none): the IDs of 50,000 pods are not gathered for nothing
    # Only a device plugin's socket is named from its devices: not when `claims` reads the DRA drivers alone.
    by_ids = any(p.resource is None and _device_plugin(p) for p in out.plugins)
    known = known_ids(out.allocatable, out.pods, out.checkpoint) if by_ids else {}
    out.plugins[:] = name_sockets(paths, out.plugins, known, out.claimed)


# --- the whole node ------------------------------------------------------------------------------


class _Pending:
    """What collect still waits for (source names, and each plugin socket's path), told to ``report`` as it changes."""

    def __init__(self, report: Callable[[Progress], None], partial: Callable[[], NodeSnapshot]):
        self._report = report
        self._partial = partial
        self._items: set[str] = set()

    @property
    def items(self) -> frozenset[str]:
        return frozenset(self._items)

    def add(self, item: str) -> None:
        self._items.add(item)
        self._report(Progress(self.items, self._partial))

    def done(self, item: str) -> None:
        self._items.discard(item)
        self._report(Progress(self.items, self._partial))


async def _tracked(pending: _Pending | None, item: str, coro: Awaitable[T]) -> T:
    if pending is None:
        return await coro
    pending.add(item)
    try:
        return await coro
    finally:
        pending.done(item)


async def _answered(
    pending: _Pending | None, out: _Result, socket: str, probe_it: Callable[[], Awaitable[PluginProbe]]
) -> PluginProbe:
    # The probe's coroutine is made here, inside the task gather made: see _guard.
    async def probed() -> PluginProbe:
        probe = await probe_it()
        out.answered.append(probe)  # before the socket leaves ``pending``: a partial snapshot then has it
        return probe

    return await _tracked(pending, socket, probed())


async def _guard(source: str, read: Callable[[], Awaitable[None]], out: _Result, pending: _Pending | None) -> None:
    """Keep one reader's unexpected failure from taking the others down with it; log each source's time (-v).

    The reader is called here, not by the caller: a Ctrl-C that cancels this task before it first runs
    then leaves no coroutine that was never awaited (Python's RuntimeWarning on the way out).
    """
    start = time.perf_counter()
    try:
        await _tracked(pending, source, read())
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
    out = _Result()
    pending: _Pending | None = None
    if progress is not None:
        pending = _Pending(progress, lambda: _assemble(paths, out, pending=pending))
    readers: dict[str, Callable[[], Awaitable[None]]] = {
        POD_RESOURCES: lambda: _pod_resources(paths, timeout, out, allocatable=not list_only),
        PLUGINS: lambda: _plugins(paths, timeout, out, pending),
        DRA_DRIVERS: lambda: _plugins(paths, timeout, out, pending, dra_only=True),
        CHECKPOINT: lambda: _checkpoint(paths, out),
        TOPOLOGY: lambda: _topology(paths, out),
        IDENTITIES: lambda: _identities(paths, out),
        RUNTIME: lambda: _runtime(paths, timeout, out),
        KUBELET_STATE: lambda: _kubelet_state(paths, out),
        DRA_CHECKPOINT: lambda: _dra_checkpoint(paths, out),
        CDI: lambda: _cdi(paths, out),
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
        await _guard(PROCS, lambda: _procs(paths, timeout, out), out, pending)

    await asyncio.gather(
        *started.values(),
        _guard("kubelet-socket", lambda: _kubelet_socket(paths, timeout, out), out, None),
        # For the hints of doctor alone: a walk of <proc> that ls, the guard and the exporter never pay for.
        *([_guard(NODE_NAME, lambda: _node_name(paths, timeout, out), out, None)] if NODE_NAME in want else []),
        *([procs()] if PROCS in want else []),
    )
    return _assemble(paths, out)


def _assemble(paths: NodePaths, out: _Result, *, pending: _Pending | None = None) -> NodeSnapshot:
    """The snapshot of what was read; with ``pending``, while reading goes on, from copies of what is in so far."""
    waiting: tuple[str, ...] = ()
    if pending is not None:
        out = replace(out, plugins=list(out.plugins or out.answered), errors=list(out.errors))
        waiting = tuple(sorted(pending.items))
    _name_sockets(paths, out)
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
        except (RpcFailure, *_UNDECODABLE):
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


def dump_snapshot(snapshot: NodeSnapshot, stream: IO[str]) -> None:
    """Write a snapshot as one JSON document that ``load_snapshot`` reads back without loss."""
    from devctl.model.serial import to_plain

    json.dump({"kind": SNAPSHOT_KIND, **to_plain(snapshot)}, stream, indent=2)
    stream.write("\n")


def load_snapshot(path: str) -> NodeSnapshot:
    """A snapshot written by ``devctl snapshot``; raises SnapshotError with a one-line reason."""
    from devctl.model.serial import PlainError, from_plain
    from devctl.node.files import FileReadError, read_file

    try:
        text = read_file(path).decode("utf-8")
    except FileReadError as e:
        raise SnapshotError(str(e)) from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not a text file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:  # json's C scanner gives up past ~1,000 levels: one line, not a traceback
        raise SnapshotError(f"{path}: not JSON: nested too deeply") from None
    if not isinstance(data, dict) or data.get("kind") != SNAPSHOT_KIND:
        raise SnapshotError(f"{path}: not a devctl snapshot (written by `devctl snapshot`)")
    try:
        return from_plain(NodeSnapshot, data)
    except PlainError as e:
        raise SnapshotError(f"{path}: damaged snapshot: {e}") from None


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
