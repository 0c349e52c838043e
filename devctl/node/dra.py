"""A DRA driver's own socket, read without changing anything: connected, and one health message taken.

A read command must never call ``NodePrepareResources`` or
``NodeUnprepareResources`` (they change node state) nor the registration's
``NotifyRegistrationStatus`` (a driver takes ``plugin_registered=false`` as a
failed registration). What is left to ask a driver is whether its endpoint
answers at all (an HTTP/2 handshake: a gRPC server is there) and, when it
offers ``DRAResourceHealth``, the first message of ``NodeWatchResources`` —
the driver's complete device list with health — after which the stream is
cancelled. ``v1.DRAResourceHealth`` is asked first, then ``v1alpha1``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import grpc

from devctl.api.drahealth.v1 import api_pb2 as health_v1
from devctl.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from devctl.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from devctl.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from devctl.model import DraDeviceHealth, DraEndpoint, ErrorKind, PluginStatus
from devctl.node.rpc import RpcFailure, channel, check_socket, failure, parsed
from devctl.node.rpclog import logged

# The type a DRA driver gives in PluginInfo.
DRA_PLUGIN_TYPE = "DRAPlugin"
# supported_versions labels of the health service, in the order devctl asks them.
HEALTH_LABELS = (("v1", "v1.DRAResourceHealth"), ("v1alpha1", "v1alpha1.DRAResourceHealth"))
DRA_SERVICE_LABELS = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha3.NodeService")
DEFAULT_HEALTH_TIMEOUT = 30  # seconds, when the driver sends <= 0
_HEALTH_NAMES = {0: "Unknown", 1: "Healthy", 2: "Unhealthy"}
_API = {"v1": (health_v1, health_v1_grpc), "v1alpha1": (health_v1alpha1, health_v1alpha1_grpc)}


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
    pb, pb_grpc = _API[version]
    what = f"{path} {version} NodeWatchResources"
    async with channel(path) as ch:
        call = pb_grpc.DRAResourceHealthStub(ch).NodeWatchResources(pb.NodeWatchResourcesRequest(), timeout=timeout)
        try:
            with logged(path, f"{version} NodeWatchResources (first message)"):
                reply = await call.read()
        except grpc.aio.AioRpcError as e:
            raise failure(e, what, timeout) from None
        finally:
            call.cancel()
    if reply is grpc.aio.EOF:
        raise RpcFailure(PluginStatus.UNREACHABLE, f"{what}: stream ended at once")
    msg = parsed(reply, what, "NodeWatchResourcesResponse")
    return tuple(device_health(d) for d in msg.devices)


async def _answers(path: str, timeout: float) -> None:
    """An HTTP/2 handshake with the socket: a gRPC server answers, anything else fails; raises RpcFailure."""
    async with channel(path) as ch:
        try:
            await asyncio.wait_for(ch.channel_ready(), timeout)
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
