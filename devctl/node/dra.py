"""A DRA driver's own socket, read without changing anything: connected, and one health message taken.

A read command must never call ``NodePrepareResources`` or
``NodeUnprepareResources`` (they change node state) nor the registration's
``NotifyRegistrationStatus`` (a driver takes ``plugin_registered=false`` as a
failed registration). What is left to ask a driver is whether its endpoint
answers at all (an HTTP/2 handshake: a gRPC server is there) and, when it
offers ``DRAResourceHealth``, the first message of ``NodeWatchResources`` —
the driver's complete device list with health — after which the stream is
cancelled. ``v1.DRAResourceHealth`` is asked first, then ``v1alpha1``.

Drivers are found as the kubelet finds them (``find_drivers``): a
``plugins_registry/`` socket whose GetInfo says ``DRAPlugin``, never a guess
from a file name. ``prepare`` and ``unprepare`` are in ``devctl.node.dra_call``,
for ``devctl call`` alone (which makes them only behind ``--yes``): a read
command does not even import them.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from devctl.base.waits import within
from devctl.model import (
    DRA_PLUGIN_TYPE,
    DraDeviceHealth,
    DraEndpoint,
    ErrorKind,
    NodePaths,
    PluginStatus,
    RegistryInfo,
)
from devctl.node.rpc import RpcFailure, check_socket, failure, parsed, plugin_channel
from devctl.node.rpclog import logged
from devctl.node.sockets import OutsideRoot, SocketFile, registry_endpoint, registry_sockets

log = logging.getLogger(__name__)

# The type a DRA driver gives in PluginInfo.
# supported_versions labels of the health service, in the order devctl asks them.
HEALTH_LABELS = (("v1", "v1.DRAResourceHealth"), ("v1alpha1", "v1alpha1.DRAResourceHealth"))
DRA_SERVICE_LABELS = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha3.NodeService")
DEFAULT_HEALTH_TIMEOUT = 30  # seconds, when the driver sends <= 0
_HEALTH_NAMES = {0: "Unknown", 1: "Healthy", 2: "Unhealthy"}


def _health_api(version: str) -> Any:
    """The generated messages of a health API version (one of HEALTH_LABELS'), imported when first asked.

    A node's drivers mostly offer one version: the other's modules are not
    loaded, nor the generated stubs (the calls name their method themselves).
    """
    return importlib.import_module(f"devctl.api.drahealth.{version}.api_pb2")


def _watch(ch: grpc.aio.Channel, pb: Any, version: str, decode: bool) -> Any:
    """NodeWatchResources of ``version`` on ``ch``: its replies decoded, or their bytes when not ``decode``."""
    return ch.unary_stream(
        f"/{version}.DRAResourceHealth/NodeWatchResources",
        request_serializer=pb.NodeWatchResourcesRequest.SerializeToString,
        response_deserializer=pb.NodeWatchResourcesResponse.FromString if decode else None,
    )


def health_versions(supported: Sequence[str]) -> list[str]:
    """The health API versions a driver offers, in the order devctl asks them."""
    return [version for version, label in HEALTH_LABELS if label in supported]


def device_health(d: Any) -> DraDeviceHealth:
    """One DeviceHealth message (v1 or v1alpha1: the same fields) as the model holds it.

    Unknown enum values read as Unknown, as the kubelet reads them.
    """
    timeout = int(getattr(d, "health_check_timeout_seconds", 0))
    updated = int(getattr(d, "last_updated_time", 0))
    device = d.device
    return DraDeviceHealth(
        pool=device.pool_name,
        device=device.device_name,
        health=_HEALTH_NAMES.get(int(getattr(d, "health", 0)), "Unknown"),
        last_updated=updated or None,
        timeout_seconds=timeout if timeout > 0 else DEFAULT_HEALTH_TIMEOUT,
        message=str(getattr(d, "message", "")),
    )


async def first_health(path: str, version: str, timeout: float) -> tuple[DraDeviceHealth, ...]:
    """The first NodeWatchResources message of ``version`` under ``timeout``; raises RpcFailure."""
    pb = _health_api(version)
    what = f"{path} {version} NodeWatchResources"
    async with plugin_channel(path) as ch:
        call = _watch(ch, pb, version, decode=True)(pb.NodeWatchResourcesRequest(), timeout=timeout)
        try:
            with logged(path, f"{version} NodeWatchResources (first message)"):
                reply = await call.read()
        except grpc.aio.AioRpcError as e:
            raise failure(e, what, timeout, "a device list") from None
        finally:
            call.cancel()
    if reply is grpc.aio.EOF:
        raise RpcFailure(PluginStatus.UNREACHABLE, f"{what}: stream ended at once")
    msg = parsed(reply, what, "NodeWatchResourcesResponse")
    return tuple(device_health(d) for d in msg.devices)


async def _answers(path: str, timeout: float) -> None:
    """An HTTP/2 handshake with the socket: a gRPC server answers, anything else fails; raises RpcFailure."""
    async with plugin_channel(path) as ch:
        try:
            await within(ch.channel_ready(), timeout)
        except asyncio.TimeoutError:
            raise RpcFailure(
                PluginStatus.TIMEOUT, f"{path}: no gRPC answer after {timeout:g}s", kind=ErrorKind.TIMEOUT
            ) from None


async def probe_endpoint(path: str, supported: Sequence[str], timeout: float) -> DraEndpoint:
    """Probe a DRA driver's endpoint socket; every failure is a status in the result, never an exception."""
    versions = health_versions(supported)
    try:
        await check_socket(path, timeout)
    except RpcFailure as e:
        return DraEndpoint(path=path, status=e.status, error=e.message, error_kind=e.kind, health_stream=bool(versions))
    health_error = None
    for version in versions:
        try:
            health = await first_health(path, version, timeout)
        except RpcFailure as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:
                health_error = f"{path}: {version}.DRAResourceHealth offered but not served"
                continue
            # Something answered but the stream failed: the endpoint's status says how.
            return DraEndpoint(
                path=path,
                status=e.status,
                error=e.message,
                error_kind=e.kind,
                health_stream=True,
                health_error=e.message,
            )
        except (AttributeError, TypeError):  # grpc.aio's None for an undecodable reply
            message = f"{path} NodeWatchResources: the reply could not be decoded (not the API devctl expects)"
            return DraEndpoint(
                path=path,
                status=PluginStatus.UNREACHABLE,
                error=message,
                error_kind=ErrorKind.WRONG_API,
                health_stream=True,
                health_error=message,
            )
        return DraEndpoint(
            path=path,
            status=PluginStatus.SERVING,
            health_stream=True,
            health_version=version,
            health=health,
            read_at=time.time(),
        )
    try:
        await _answers(path, timeout)
    except RpcFailure as e:
        return DraEndpoint(path=path, status=e.status, error=e.message, error_kind=e.kind, health_stream=bool(versions))
    return DraEndpoint(path=path, status=PluginStatus.SERVING, health_stream=bool(versions), health_error=health_error)


class HealthStream:
    """A live NodeWatchResources stream of one API version, for ``devctl watch``: every list, or the newest when behind.

    Messages are taken as bytes and parsed only when taken (``deviceplugin.Backlog``,
    as ListAndWatch is): when the oldest list not yet taken waited more than
    ``behind`` seconds, the lists before the newest are skipped (each is the
    driver's complete list, so the newest holds everything they did) and
    ``skipped`` counts them. Each message usually changes one device of
    thousands: a message is split into its devices' bytes, and only devices
    whose bytes differ from the previous message are parsed; the others keep
    their ``DraDeviceHealth`` object (bench/bench_dra.py).
    """

    def __init__(self, path: str, version: str):
        self.path = path
        self.version = version
        self.skipped = 0

    async def lists(
        self, first_within: float, behind: float | None = None
    ) -> AsyncIterator[tuple[DraDeviceHealth, ...]]:
        """Yield each list; raises RpcFailure when the stream fails (code UNIMPLEMENTED: this version is not served)."""
        from devctl.node.deviceplugin import Backlog

        pb = _health_api(self.version)
        what = f"{self.path} {self.version} NodeWatchResources"
        async with plugin_channel(self.path) as ch:
            call = _watch(ch, pb, self.version, decode=False)(pb.NodeWatchResourcesRequest())
            backlog = Backlog(call)
            known: dict[bytes, DraDeviceHealth] = {}
            limit: float | None = first_within
            try:
                while True:
                    try:
                        wire = await within(backlog.take(behind), limit)
                    except asyncio.TimeoutError:
                        raise RpcFailure(
                            PluginStatus.TIMEOUT, f"{what}: no device list within {limit:g}s", kind=ErrorKind.TIMEOUT
                        ) from None
                    except grpc.aio.AioRpcError as e:
                        raise failure(e, what, reply="a device list") from None
                    if wire is None:
                        return
                    limit = None
                    self.skipped = backlog.skipped
                    devices, known = _devices(pb, wire, known, what)
                    yield tuple(devices)
            finally:
                await backlog.close()


def _devices(
    pb: Any, wire: bytes, known: dict[bytes, DraDeviceHealth], what: str
) -> tuple[list[DraDeviceHealth], dict[bytes, DraDeviceHealth]]:
    """A message's devices, each device whose bytes ``known`` holds reused; and the map for the next message."""
    entries = _entries(wire)
    if entries is None:  # another field than the device list (a newer API): parse it whole
        msg = parsed(_decoded(pb.NodeWatchResourcesResponse, wire), what, "NodeWatchResourcesResponse")
        return [device_health(d) for d in msg.devices], {}
    current: dict[bytes, DraDeviceHealth] = {}
    devices = []
    for raw in entries:
        health = current.get(raw) or known.get(raw)
        if health is None:
            health = device_health(parsed(_decoded(pb.DeviceHealth, raw), what, "NodeWatchResourcesResponse"))
        current[raw] = health
        devices.append(health)
    return devices, current


# The wire tag of NodeWatchResourcesResponse.devices: field 1, length-delimited.
_DEVICES_TAG = 0x0A


def _entries(wire: bytes) -> list[bytes] | None:
    """The bytes of each DeviceHealth of a message, split without parsing them; None for any other field.

    Splitting costs a fraction of converting a thousand devices, and lets a
    device whose bytes did not change keep its object.
    """
    out = []
    i, end = 0, len(wire)
    while i < end:
        if wire[i] != _DEVICES_TAG:
            return None
        i += 1
        length = shift = 0
        while True:
            if i >= end or shift > 28:
                return None
            byte = wire[i]
            i += 1
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        if i + length > end:
            return None
        out.append(wire[i : i + length])
        i += length
    return out


def _decoded(message: Any, wire: bytes) -> Any:
    """``message`` parsed from its bytes; None when they are not one (``parsed`` then says so)."""
    try:
        return message.FromString(wire)
    except DecodeError:
        return None


# --- finding drivers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Driver:
    """A DRA driver as its registration names it: its registration socket, its endpoint, what it offers."""

    name: str
    registration: str  # the plugins_registry/ socket, as listed
    endpoint: str  # the endpoint socket, resolved under the root
    info: RegistryInfo

    @property
    def versions(self) -> tuple[str, ...]:
        """The health API versions it offers, in the order devctl asks them."""
        return tuple(health_versions(self.info.supported_versions))


async def driver_at(paths: NodePaths, socket: SocketFile, timeout: float) -> Driver | None:
    """The DRA driver a registry socket registers, None for another kind of plugin (GetInfo under ``timeout``).

    Raises RpcFailure when the socket does not answer, OutsideRoot when its
    endpoint lies outside the root.
    """
    from devctl.node.deviceplugin import registry_info

    await check_socket(socket.real, timeout)
    try:
        info = await registry_info(socket.real, timeout)
    except (AttributeError, TypeError):  # grpc.aio's None for an undecodable reply
        raise RpcFailure(
            PluginStatus.UNREACHABLE, f"{socket.path} GetInfo: not a PluginInfo", kind=ErrorKind.WRONG_API
        ) from None
    if info.type != DRA_PLUGIN_TYPE:
        return None
    return Driver(info.name, socket.path, registry_endpoint(paths, socket.path, info), info)


async def find_drivers(paths: NodePaths, timeout: float, names: Collection[str] | None = None) -> dict[str, Driver]:
    """The DRA drivers registered on the node (only ``names`` when given), every registry socket asked at once.

    A registry that cannot be listed, or a socket that does not answer, or an
    endpoint outside the root, names no driver (``devctl plugins`` says why).
    When two registration sockets name one driver (a rolling update), the
    first by path is taken.
    """
    try:
        found = registry_sockets(paths.plugins_registry, paths.root)
    except OSError:
        return {}

    async def ask(socket: SocketFile) -> Driver | None:
        try:
            driver = await driver_at(paths, socket, timeout)
        except (RpcFailure, OutsideRoot) as e:
            log.debug("registry socket %s: %s", socket.path, e)
            return None
        return driver if driver is not None and (names is None or driver.name in names) else None

    drivers: dict[str, Driver] = {}
    for d in await asyncio.gather(*(ask(s) for s in found)):
        if d is not None:
            drivers.setdefault(d.name, d)
    return drivers
