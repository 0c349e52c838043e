"""The plugin sockets of a node: each device plugin socket and registration probed, each socket named.

A probe's failure is a status on its ``PluginProbe``, never an exception; the sockets are named by the one
resolver every caller uses (devctl.node.sockets).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from functools import partial

from devctl.core.readings import UNDECODABLE, Pending, Readings, answered, oserror_line, undecodable
from devctl.model import (
    DEVICE_PLUGIN_TYPE,
    DRA_PLUGIN_TYPE,
    PLUGINS_DIR_SOURCE,
    DraEndpoint,
    ErrorKind,
    NodePaths,
    PluginProbe,
    PluginStatus,
    RegistryInfo,
    Source,
    SourceError,
)
from devctl.node.connect import RpcFailure, check_socket
from devctl.node.sockets import (
    OutsideRoot,
    SocketFile,
    known_ids,
    name_sockets,
    plugin_sockets,
    real_path,
    registry_endpoint,
    registry_sockets,
)


async def probe_socket(socket: str, timeout: float) -> PluginProbe:
    """Options and the first device list of one plugin socket; a failure is a status, not an exception."""
    try:
        await check_socket(socket, timeout)
        from devctl.node.deviceplugin import DevicePluginClient

        async with DevicePluginClient(socket, timeout) as client:
            options, devices, latency = await client.probe()
    except RpcFailure as e:
        return PluginProbe(socket=socket, status=e.status, error=e.message, error_kind=e.kind)
    except UNDECODABLE:
        return PluginProbe(
            socket=socket, status=PluginStatus.UNREACHABLE, error=undecodable(socket), error_kind=ErrorKind.WRONG_API
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
    except UNDECODABLE:
        error = undecodable(f"{socket} GetInfo")
        return PluginProbe(socket=socket, status=PluginStatus.UNREACHABLE, error=error, error_kind=ErrorKind.WRONG_API)
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


async def read_plugins(
    paths: NodePaths, timeout: float, out: Readings, pending: Pending | None = None, *, dra_only: bool = False
) -> None:
    """Every plugin socket and registration probed; with ``dra_only`` the DRA drivers' registrations alone."""
    try:
        sockets = [] if dra_only else plugin_sockets(paths.plugins_dir, paths.root)
    except OSError as e:
        out.errors.append(SourceError(PLUGINS_DIR_SOURCE, oserror_line(paths.plugins_dir, e), ErrorKind.of_oserror(e)))
        sockets = []
    try:
        registry = registry_sockets(paths.plugins_registry, paths.root)
    except FileNotFoundError:
        registry = []  # most nodes without CSI or DRA drivers have none
    except OSError as e:
        out.errors.append(
            SourceError(Source.REGISTRY, oserror_line(paths.plugins_registry, e), ErrorKind.of_oserror(e))
        )
        registry = []
    if not sockets and not registry:
        return  # no socket to name: the running devctl plugins' control sockets are not asked
    claimed, probes = await asyncio.gather(
        _no_claims() if dra_only else claimed_sockets(paths, timeout),
        asyncio.gather(
            *(answered(pending, out, s.path, partial(_plugin_socket, s, timeout)) for s in sockets),
            *(answered(pending, out, s.path, partial(_registry_socket, s, paths, timeout, dra_only)) for s in registry),
        ),
    )
    if dra_only:  # a device plugin's or CSI driver's registration is not a DRA driver's: left out
        probes = [p for p in probes if p.registry is None or p.registry.type == DRA_PLUGIN_TYPE]
    out.claimed.update(claimed)
    registered = {s.path for s in registry}
    for p in probes:
        if p.error:
            # The socket as subject: the probe's own failure, which its row shows; a registry dir that could not be
            # listed has none (the exporter's source_up, doctor's socket checks tell the two apart by it).
            source = Source.REGISTRY if p.socket in registered else Source.PLUGIN
            out.errors.append(SourceError(source, p.error, p.error_kind or ErrorKind.OTHER, p.socket))
        if p.dra is not None and p.dra.error:
            driver = p.registry.name if p.registry is not None else None
            out.errors.append(SourceError(Source.DRA, p.dra.error, p.dra.error_kind or ErrorKind.OTHER, driver))
    out.plugins.extend(probes)


def name_plugin_sockets(paths: NodePaths, out: Readings) -> None:
    """Fill in each socket's resource with the one resolver every caller uses (devctl.node.sockets)."""
    if not out.plugins:
        return  # no socket to name (`devctl pods` reads none): the IDs of 50,000 pods are not gathered for nothing
    # Only a device plugin's socket is named from its devices: not when `claims` reads the DRA drivers alone.
    by_ids = any(p.resource is None and p.is_device_plugin for p in out.plugins)
    known = known_ids(out.allocatable, out.pods, out.checkpoint) if by_ids else {}
    out.plugins[:] = name_sockets(paths, out.plugins, known, out.claimed)
