"""Clients of a device plugin socket (DevicePlugin), the kubelet's Registration, and plugin-watcher sockets."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence

import grpc

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.model import Allocation, Device, ErrorKind, PluginOptions, PluginStatus, RegistryInfo
from devctl.node import convert
from devctl.node.rpc import RpcFailure, channel, failure, parsed

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"


class DevicePluginClient:
    """The five DevicePlugin RPCs against one socket; every unary call has a deadline.

    ListAndWatch is an async iterator of full device lists that lives until the
    plugin ends the stream or the caller stops iterating; a plugin serves many
    streams, so opening our own leaves the kubelet's untouched.
    """

    def __init__(self, socket_path: str, timeout: float = 5.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel = channel(socket_path)
        self._stub = dp_grpc.DevicePluginStub(self._channel)

    async def __aenter__(self) -> DevicePluginClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _fail(self, e: grpc.aio.AioRpcError, rpc: str) -> RpcFailure:
        return failure(e, f"{self.socket_path} {rpc}", self.timeout)

    async def options(self) -> PluginOptions:
        log.debug("GetDevicePluginOptions %s", self.socket_path)
        try:
            reply = await self._stub.GetDevicePluginOptions(dp.Empty(), timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "GetDevicePluginOptions") from None
        return convert.options(parsed(reply, f"{self.socket_path} GetDevicePluginOptions", "DevicePluginOptions"))

    async def list_and_watch(self) -> AsyncIterator[tuple[Device, ...]]:
        """Yield each device list the plugin sends; raises RpcFailure when the stream breaks."""
        log.debug("ListAndWatch %s", self.socket_path)
        call = self._stub.ListAndWatch(dp.Empty())
        # Each message is the full list, usually with one device changed: converting
        # only devices whose bytes differ from the previous message keeps a
        # 10,000-device plugin at 20 lists/s from falling behind (bench/bench_watch.py).
        known: dict[bytes, Device] = {}
        try:
            async for reply in call:
                msg = parsed(reply, f"{self.socket_path} ListAndWatch", "ListAndWatchResponse")
                current: dict[bytes, Device] = {}
                devices = []
                for d in msg.devices:
                    raw = d.SerializeToString(deterministic=True)
                    device = current[raw] = current.get(raw) or known.get(raw) or convert.device(d)
                    devices.append(device)
                known = current
                yield tuple(devices)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "ListAndWatch") from None
        finally:
            call.cancel()

    async def first_list(self) -> tuple[Device, ...]:
        """The first ListAndWatch message, under the deadline; the stream is then cancelled."""
        log.debug("ListAndWatch (first list) %s", self.socket_path)
        call = self._stub.ListAndWatch(dp.Empty(), timeout=self.timeout)
        try:
            reply = await call.read()
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "ListAndWatch") from None
        finally:
            call.cancel()
        if reply is grpc.aio.EOF:
            raise RpcFailure(PluginStatus.UNREACHABLE, f"{self.socket_path} ListAndWatch: stream ended at once")
        msg = parsed(reply, f"{self.socket_path} ListAndWatch", "ListAndWatchResponse")
        return tuple(convert.device(d) for d in msg.devices)

    async def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
        log.debug("GetPreferredAllocation %s size=%d", self.socket_path, size)
        request = dp.PreferredAllocationRequest(
            container_requests=[
                dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available),
                    must_include_deviceIDs=list(must_include),
                    allocation_size=size,
                )
            ]
        )
        try:
            reply = await self._stub.GetPreferredAllocation(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "GetPreferredAllocation") from None
        reply = parsed(reply, f"{self.socket_path} GetPreferredAllocation", "PreferredAllocationResponse")
        if not reply.container_responses:
            return ()
        return tuple(reply.container_responses[0].deviceIDs)

    async def _allocate(self, device_ids: Sequence[str]) -> dp.ContainerAllocateResponse:
        """Allocate for one container, as the kubelet does (one ContainerAllocateRequest)."""
        log.debug("Allocate %s %s", self.socket_path, list(device_ids))
        request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=list(device_ids))])
        try:
            reply = await self._stub.Allocate(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "Allocate") from None
        reply = parsed(reply, f"{self.socket_path} Allocate", "AllocateResponse")
        if not reply.container_responses:
            # pkg/kubelet/cm/devicemanager/manager.go refuses this reply the same way.
            raise RpcFailure(
                PluginStatus.UNREACHABLE, "no containers return in allocation response", kind=ErrorKind.MALFORMED
            )
        return reply.container_responses[0]

    async def allocate(self, device_ids: Sequence[str]) -> Allocation:
        """What the container would be given for these devices."""
        return convert.allocation(await self._allocate(device_ids))

    async def allocate_raw(self, device_ids: Sequence[str]) -> bytes:
        """The reply serialized, as the kubelet stores it in the checkpoint's AllocResp."""
        return (await self._allocate(device_ids)).SerializeToString(deterministic=True)

    async def prestart(self, device_ids: Sequence[str]) -> None:
        log.debug("PreStartContainer %s %s", self.socket_path, list(device_ids))
        try:
            await self._stub.PreStartContainer(
                dp.PreStartContainerRequest(devices_ids=list(device_ids)), timeout=self.timeout
            )
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "PreStartContainer") from None

    async def probe(self) -> tuple[PluginOptions, tuple[Device, ...], float]:
        """Options and the first device list, with the round-trip latency of the options call in ms."""
        start = time.perf_counter()
        opts = await self.options()
        latency = (time.perf_counter() - start) * 1000
        return opts, await self.first_list(), latency


async def register(
    kubelet_socket: str,
    endpoint: str,
    resource: str,
    options: PluginOptions,
    timeout: float = 15.0,
) -> None:
    """Register a plugin with the kubelet. The kubelet dials the plugin inside Register (10 s), so allow longer."""
    log.debug("Register %s as %s at %s", resource, endpoint, kubelet_socket)
    async with channel(kubelet_socket) as ch:
        stub = dp_grpc.RegistrationStub(ch)
        request = dp.RegisterRequest(
            version=API_VERSION, endpoint=endpoint, resource_name=resource, options=convert.options_to_pb(options)
        )
        try:
            await stub.Register(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"Register {resource} with {kubelet_socket}", timeout) from None


async def registry_info(socket_path: str, timeout: float = 5.0) -> RegistryInfo:
    """GetInfo of a plugin-watcher socket in plugins_registry/."""
    async with channel(socket_path) as ch:
        try:
            info = await reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"{socket_path} GetInfo", timeout) from None
    info = parsed(info, f"{socket_path} GetInfo", "PluginInfo")
    return RegistryInfo(
        type=info.type, name=info.name, endpoint=info.endpoint, supported_versions=tuple(info.supported_versions)
    )
