"""Read every source of a node at once, under deadlines, into one NodeSnapshot.

Every source runs concurrently (``asyncio.gather``), so a plugin that never
answers costs one deadline, not one per socket; a source that fails becomes a
``SourceError`` in the snapshot and never stops the others. Nothing here writes
to the node: sockets are only connected to, files only read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import IO, TypeVar

import grpc

from devctl.model import (
    ALL_SOURCES,
    CHECKPOINT,
    IDENTITIES,
    NO_SUCH_FILE,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
    TOPOLOGY,
    AllocatableResources,
    Checkpoint,
    ErrorKind,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    PodResources,
    SourceError,
)
from devctl.node.rpc import RpcFailure, check_socket
from devctl.serial import PlainError, from_plain, to_plain

log = logging.getLogger(__name__)
T = TypeVar("T")

# What ``devctl snapshot`` writes at the top of its JSON, so ``--from`` can tell a
# snapshot from any other JSON file.
SNAPSHOT_KIND = "devctl-snapshot/v1"

# Registry sockets that are device plugins (pluginregistration's PluginInfo.type).
DEVICE_PLUGIN_TYPE = "DevicePlugin"


class SnapshotError(Exception):
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
    errors: list[SourceError] = field(default_factory=list)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _sockets_in(directory: str, skip: Iterable[str] = ()) -> list[str]:
    """Unix sockets in ``directory``, sorted; raises OSError if it cannot be listed."""
    skipped = set(skip)
    return [
        os.path.join(directory, name)
        for name in sorted(os.listdir(directory))
        if name not in skipped and _is_socket(os.path.join(directory, name))
    ]


# grpc.aio hands back None for a reply it cannot decode (it only logs the error), and
# the clients then fail on that None: such a socket speaks something else.
_UNDECODABLE = (AttributeError, TypeError)


def _undecodable(what: str) -> str:
    return f"{what}: the reply could not be decoded (not the API devctl expects)"


def _oserror(path: str, err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return f"{path}: {NO_SUCH_FILE}"
    if isinstance(err, PermissionError):
        return f"{path}: permission denied"
    return f"{path}: {err.strerror or err}"


# --- pod-resources -------------------------------------------------------------------------


async def _pod_resources(paths: NodePaths, timeout: float, out: _Result) -> None:
    from devctl.node.podresources import PodResourcesClient

    socket = paths.pod_resources
    try:
        # One socket-level connect first: it tells missing, stale and forbidden
        # apart, where gRPC would say UNAVAILABLE for all three.
        await check_socket(socket, timeout)
    except RpcFailure as e:
        out.errors.append(SourceError(POD_RESOURCES, e.message, e.kind))
        return
    async with PodResourcesClient(socket, timeout) as client:
        pods, alloc = await asyncio.gather(client.list(), client.allocatable(), return_exceptions=True)
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
        else:
            message = alloc.message
        out.errors.append(SourceError(POD_RESOURCES, message, alloc.kind))
    elif isinstance(alloc, _UNDECODABLE):
        out.errors.append(
            SourceError(POD_RESOURCES, _undecodable(f"{socket} GetAllocatableResources"), ErrorKind.WRONG_API)
        )
    elif isinstance(alloc, BaseException):
        raise alloc
    else:
        out.allocatable = alloc


# --- device plugin sockets -------------------------------------------------------------------


async def probe_socket(socket: str, timeout: float) -> PluginProbe:
    """Options and the first device list of one plugin socket; a failure is a status, not an exception."""
    from devctl.node.deviceplugin import DevicePluginClient

    try:
        await check_socket(socket, timeout)
        async with DevicePluginClient(socket, timeout) as client:
            options, devices, latency = await client.probe()
    except RpcFailure as e:
        return PluginProbe(socket=socket, status=e.status, error=e.message)
    except _UNDECODABLE:
        return PluginProbe(socket=socket, status=PluginStatus.UNREACHABLE, error=_undecodable(socket))
    return PluginProbe(socket=socket, status=PluginStatus.SERVING, options=options, devices=devices, latency_ms=latency)


async def _registry_socket(socket: str, plugins_dir: str, timeout: float) -> PluginProbe:
    from devctl.node.deviceplugin import registry_info

    try:
        await check_socket(socket, timeout)
        info = await registry_info(socket, timeout)
    except RpcFailure as e:
        return PluginProbe(socket=socket, status=e.status, error=e.message)
    except _UNDECODABLE:
        return PluginProbe(socket=socket, status=PluginStatus.UNREACHABLE, error=_undecodable(f"{socket} GetInfo"))
    if info.type != DEVICE_PLUGIN_TYPE:
        # A CSI or DRA driver: shown, not probed as a device plugin.
        return PluginProbe(socket=socket, status=PluginStatus.SERVING, registry=info)
    # An empty endpoint means the registry socket serves DevicePlugin itself; a
    # relative one is relative to the device-plugins dir, as in RegisterRequest.
    endpoint = os.path.join(plugins_dir, info.endpoint) if info.endpoint else socket
    probe = await probe_socket(endpoint, timeout)
    return replace(probe, socket=socket, resource=info.name or None, registry=info)


async def _plugins(paths: NodePaths, timeout: float, out: _Result) -> None:
    kubelet_sock = os.path.basename(paths.kubelet_socket)
    try:
        sockets = _sockets_in(paths.plugins_dir, skip=[kubelet_sock])
    except OSError as e:
        out.errors.append(SourceError(PLUGINS_DIR_SOURCE, _oserror(paths.plugins_dir, e), ErrorKind.of_oserror(e)))
        sockets = []
    try:
        registry = _sockets_in(paths.plugins_registry)
    except FileNotFoundError:
        registry = []  # most nodes without CSI or DRA drivers have none
    except OSError as e:
        out.errors.append(SourceError("registry", _oserror(paths.plugins_registry, e), ErrorKind.of_oserror(e)))
        registry = []
    probes = await asyncio.gather(
        *(probe_socket(s, timeout) for s in sockets),
        *(_registry_socket(s, paths.plugins_dir, timeout) for s in registry),
    )
    for p in probes:
        if p.error:
            out.errors.append(SourceError("registry" if p.socket in registry else "plugin", p.error))
    out.plugins.extend(probes)


# --- files -----------------------------------------------------------------------------------


def _read_checkpoint(path: str) -> Checkpoint | SourceError:
    from devctl.node.checkpoint import CheckpointError, read_checkpoint

    if not os.path.lexists(path):
        return SourceError(CHECKPOINT, f"{path}: {NO_SUCH_FILE}", ErrorKind.MISSING)
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


async def _topology(paths: NodePaths, out: _Result) -> None:
    from devctl.node.sysfs import TopologyError, read_topology

    try:
        out.topology = await asyncio.to_thread(read_topology, paths.sysfs)
    except TopologyError as e:
        out.errors.append(SourceError("sysfs", str(e), e.kind))


async def _identities(paths: NodePaths, out: _Result) -> None:
    from devctl.node.identity import read_pod_identities

    identities, errors = await asyncio.to_thread(read_pod_identities, paths.pod_logs, paths.kubelet_dir)
    out.identities = identities
    out.errors.extend(errors)


# --- which resource a socket serves ------------------------------------------------------------


def _known_ids(out: _Result) -> dict[str, set[str]]:
    """Device IDs the kubelet ties to each resource: allocatable, allocated, and the checkpoint."""
    known: dict[str, set[str]] = {}
    for d in out.allocatable.devices if out.allocatable else ():
        known.setdefault(d.resource, set()).update(d.ids)
    for pod in out.pods or ():
        for c in pod.containers:
            for d in c.devices:
                known.setdefault(d.resource, set()).update(d.ids)
    if out.checkpoint is not None:
        for resource, ids in out.checkpoint.registered_devices.items():
            known.setdefault(resource, set()).update(ids)
        for e in out.checkpoint.entries:
            known.setdefault(e.resource, set()).update(i for group in e.device_ids.values() for i in group)
    return known


def infer_resource(device_ids: Iterable[str], known: dict[str, set[str]]) -> str | None:
    """The resource whose kubelet-known devices match this socket's, when exactly one does.

    The kubelet never says which socket serves which resource (Register's endpoint
    is kept in memory only). Device IDs are only unique within a resource, so a
    match with several resources is reported as unknown, never guessed.
    """
    ids = set(device_ids)
    if not ids:
        return None
    overlapping = [r for r, known_ids in known.items() if ids & known_ids]
    if len(overlapping) == 1:
        return overlapping[0]
    exact = [r for r in overlapping if known[r] == ids]
    return exact[0] if len(exact) == 1 else None


def _name_sockets(out: _Result) -> None:
    by_endpoint = {}
    for p in out.plugins:
        if p.registry is not None and p.registry.type == DEVICE_PLUGIN_TYPE and p.registry.endpoint:
            by_endpoint[p.registry.endpoint] = p.registry.name
    known = _known_ids(out)
    for i, p in enumerate(out.plugins):
        if p.resource is not None:
            continue
        name = by_endpoint.get(p.socket) or infer_resource((d.id for d in p.devices), known)
        if name is not None:
            out.plugins[i] = replace(p, resource=name)


# --- the whole node ------------------------------------------------------------------------------


async def _guard(source: str, coro: Awaitable[None], out: _Result) -> None:
    """Keep one reader's unexpected failure from taking the others down with it; log each source's time (-v)."""
    start = time.perf_counter()
    try:
        await coro
    except Exception as e:  # a reader bug or an OS surprise must not lose the other sources
        log.debug("%s failed", source, exc_info=True)
        out.errors.append(SourceError(source, f"{type(e).__name__}: {e}".splitlines()[0]))
    log.debug("read %s in %.1f ms", source, (time.perf_counter() - start) * 1000)


async def collect(paths: NodePaths, timeout: float, *, want: set[str] | frozenset[str] | None = None) -> NodeSnapshot:
    """Every source of the node (or only those in ``want``), read concurrently under ``timeout`` each."""
    want = ALL_SOURCES if want is None else frozenset(want)
    out = _Result()
    readers = {
        POD_RESOURCES: lambda: _pod_resources(paths, timeout, out),
        PLUGINS: lambda: _plugins(paths, timeout, out),
        CHECKPOINT: lambda: _checkpoint(paths, out),
        TOPOLOGY: lambda: _topology(paths, out),
        IDENTITIES: lambda: _identities(paths, out),
    }
    await asyncio.gather(*(_guard(name, read(), out) for name, read in readers.items() if name in want))
    _name_sockets(out)
    return NodeSnapshot(
        taken_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        paths=paths,
        kubelet_socket_present=_is_socket(paths.kubelet_socket),
        pods=out.pods,
        allocatable=out.allocatable,
        plugins=tuple(out.plugins),
        checkpoint=out.checkpoint,
        topology=out.topology,
        pod_identities=out.identities,
        errors=tuple(out.errors),
    )


# --- snapshot files ------------------------------------------------------------------------------


def dump_snapshot(snapshot: NodeSnapshot, stream: IO[str]) -> None:
    """Write a snapshot as one JSON document that ``load_snapshot`` reads back without loss."""
    json.dump({"kind": SNAPSHOT_KIND, **to_plain(snapshot)}, stream, indent=2)
    stream.write("\n")


def load_snapshot(path: str) -> NodeSnapshot:
    """A snapshot written by ``devctl snapshot``; raises SnapshotError with a one-line reason."""
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
    "SnapshotError",
    "collect",
    "dump_snapshot",
    "get_pod",
    "infer_resource",
    "load_snapshot",
    "probe_socket",
]
