"""Clients of a device plugin socket (DevicePlugin), the kubelet's Registration, and plugin-watcher sockets."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence

import grpc
from google.protobuf.message import DecodeError

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.base.waits import cancel_and_wait
from devctl.model import Allocation, Device, DeviceList, ErrorKind, PluginOptions, PluginStatus, RegistryInfo
from devctl.node import convert
from devctl.node.rpc import RpcFailure, channel, failure, parsed, plugin_channel
from devctl.node.rpclog import logged, outcome, since

log = logging.getLogger(__name__)

API_VERSION = "v1beta1"
LIST_AND_WATCH = "/v1beta1.DevicePlugin/ListAndWatch"


class DevicePluginClient:
    """The five DevicePlugin RPCs against one socket; every unary call has a deadline.

    ListAndWatch is an async iterator of full device lists that lives until the
    plugin ends the stream or the caller stops iterating; a plugin serves many
    streams, so opening our own leaves the kubelet's untouched.
    """

    def __init__(self, socket_path: str, timeout: float = 5.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel = plugin_channel(socket_path)  # the kubelet's receive limit: it reads no more
        self._stub = dp_grpc.DevicePluginStub(self._channel)
        self.skipped = 0  # lists of the current ListAndWatch skipped for newer ones (see list_and_watch)

    async def __aenter__(self) -> DevicePluginClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _fail(self, e: grpc.aio.AioRpcError, rpc: str) -> RpcFailure:
        reply = "a device list" if rpc == "ListAndWatch" else "a reply"
        return failure(e, f"{self.socket_path} {rpc}", self.timeout, reply)

    async def options(self) -> PluginOptions:
        try:
            with logged(self.socket_path, "GetDevicePluginOptions"):
                reply = await self._stub.GetDevicePluginOptions(dp.Empty(), timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "GetDevicePluginOptions") from None
        return convert.options(parsed(reply, f"{self.socket_path} GetDevicePluginOptions", "DevicePluginOptions"))

    async def list_and_watch(self, behind: float | None = None) -> AsyncIterator[tuple[Device, ...]]:
        """Yield each device list the plugin sends; raises RpcFailure when the stream breaks.

        With ``behind``, a caller that cannot keep up is not left further and
        further behind: when the oldest list not yet taken arrived more than
        ``behind`` seconds ago, the lists before the newest are skipped (each
        is the full list, so the newest holds everything they did; a diff
        against it folds their changes together). ``skipped`` counts them, for
        the caller to say so. A caller that keeps up gets every list.
        """
        # Replies are taken as bytes and parsed only when taken: a list skipped costs no parse.
        call = self._channel.unary_stream(
            LIST_AND_WATCH, request_serializer=dp.Empty.SerializeToString, response_deserializer=None
        )(dp.Empty())
        start = time.perf_counter()
        lists = 0
        ended = "ended by the plugin"
        backlog = Backlog(call)
        # Each message is the full list, usually with one device changed: converting
        # only devices whose bytes differ from the previous message keeps a
        # 10,000-device plugin at 20 lists/s from falling behind (bench/bench_watch.py).
        known: dict[bytes, Device] = {}
        try:
            while (wire := await backlog.take(behind)) is not None:
                msg = parsed(_decoded(wire), f"{self.socket_path} ListAndWatch", "ListAndWatchResponse")
                current: dict[bytes, Device] = {}
                devices = []
                for d in msg.devices:
                    raw = d.SerializeToString(deterministic=True)
                    device = current[raw] = current.get(raw) or known.get(raw) or convert.device(d)
                    devices.append(device)
                known = current
                if not lists:
                    log.debug(
                        "ListAndWatch %s: first list (%d devices) in %s", self.socket_path, len(devices), since(start)
                    )
                lists += 1
                self.skipped = backlog.skipped
                yield tuple(devices)
        except grpc.aio.AioRpcError as e:
            ended = outcome(e)
            raise self._fail(e, "ListAndWatch") from None
        except BaseException as e:
            ended = "closed by devctl" if isinstance(e, GeneratorExit) else outcome(e)
            raise
        finally:
            await backlog.close()
            log.debug(
                "ListAndWatch %s: %s after %d lists (%d skipped) in %s",
                self.socket_path,
                ended,
                lists,
                backlog.skipped,
                since(start),
            )

    async def first_list(self) -> DeviceList:
        """The first ListAndWatch message, under the deadline; the stream is then cancelled."""
        # Taken as bytes: a list of a million devices is read a column at a time (convert.device_list).
        call = self._channel.unary_stream(
            LIST_AND_WATCH, request_serializer=dp.Empty.SerializeToString, response_deserializer=None
        )(dp.Empty(), timeout=self.timeout)
        try:
            with logged(self.socket_path, "ListAndWatch (first list)"):
                reply = await call.read()
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "ListAndWatch") from None
        finally:
            call.cancel()
        if reply is grpc.aio.EOF:
            raise RpcFailure(PluginStatus.UNREACHABLE, f"{self.socket_path} ListAndWatch: stream ended at once")
        return parsed(convert.device_list(reply), f"{self.socket_path} ListAndWatch", "ListAndWatchResponse")

    async def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> tuple[str, ...]:
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
            with logged(self.socket_path, f"GetPreferredAllocation size={size}"):
                reply = await self._stub.GetPreferredAllocation(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "GetPreferredAllocation") from None
        reply = parsed(reply, f"{self.socket_path} GetPreferredAllocation", "PreferredAllocationResponse")
        if not reply.container_responses:
            return ()
        return tuple(reply.container_responses[0].deviceIDs)

    async def _allocate(self, device_ids: Sequence[str]) -> dp.ContainerAllocateResponse:
        """Allocate for one container, as the kubelet does (one ContainerAllocateRequest)."""
        request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=list(device_ids))])
        try:
            with logged(self.socket_path, f"Allocate {','.join(device_ids)}"):
                reply = await self._stub.Allocate(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "Allocate") from None
        answer: dp.AllocateResponse = parsed(reply, f"{self.socket_path} Allocate", "AllocateResponse")
        if not answer.container_responses:
            # pkg/kubelet/cm/devicemanager/manager.go refuses this reply the same way.
            raise RpcFailure(
                PluginStatus.UNREACHABLE, "no containers return in allocation response", kind=ErrorKind.MALFORMED
            )
        return answer.container_responses[0]

    async def allocate(self, device_ids: Sequence[str]) -> Allocation:
        """What the container would be given for these devices."""
        return convert.allocation(await self._allocate(device_ids))

    async def allocate_raw(self, device_ids: Sequence[str]) -> bytes:
        """The reply serialized, as the kubelet stores it in the checkpoint's AllocResp."""
        return (await self._allocate(device_ids)).SerializeToString(deterministic=True)

    async def prestart(self, device_ids: Sequence[str]) -> None:
        try:
            with logged(self.socket_path, f"PreStartContainer {','.join(device_ids)}"):
                await self._stub.PreStartContainer(
                    dp.PreStartContainerRequest(devices_ids=list(device_ids)), timeout=self.timeout
                )
        except grpc.aio.AioRpcError as e:
            raise self._fail(e, "PreStartContainer") from None

    async def probe(self) -> tuple[PluginOptions, DeviceList, float]:
        """Options and the first device list, with the round-trip latency of the options call in ms."""
        start = time.perf_counter()
        opts = await self.options()
        latency = (time.perf_counter() - start) * 1000
        return opts, await self.first_list(), latency


def _decoded(wire: bytes) -> dp.ListAndWatchResponse | None:
    """A ListAndWatch reply from its bytes; None when they are not one (``parsed`` then says so)."""
    try:
        return dp.ListAndWatchResponse.FromString(wire)
    except DecodeError:
        return None


class Backlog:
    """The ListAndWatch messages received and not yet taken, each with the time it arrived.

    A reader task takes every message gRPC holds as soon as the loop lets it,
    so the backlog, and how old it is, is seen here rather than hidden in
    gRPC's buffers; messages stay unparsed until taken.
    """

    # Before a list is taken, the reader is let run until it finds nothing more for this long.
    DRAIN = 0.001

    def __init__(self, call: grpc.aio.UnaryStreamCall):
        self._call = call
        self._items: collections.deque[tuple[float, bytes]] = collections.deque()
        self._arrived = asyncio.Event()
        self.skipped = 0
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for reply in self._call:
                self._items.append((time.monotonic(), reply))
                self._arrived.set()
        finally:
            self._arrived.set()

    async def take(self, behind: float | None) -> bytes | None:
        """The next message (the newest, when the oldest waited longer than ``behind``); None when the stream ended."""
        while not self._items:
            if self._reader.done():
                self._reader.result()  # the stream's failure, if it failed
                return None
            self._arrived.clear()
            await self._arrived.wait()
        if behind is not None:
            # Let the reader move what gRPC already holds into the backlog, then judge its age.
            held = -1
            while held != len(self._items) and not self._reader.done():
                held = len(self._items)
                await asyncio.sleep(self.DRAIN)
            if len(self._items) > 1 and time.monotonic() - self._items[0][0] > behind:
                self.skipped += len(self._items) - 1
                newest = self._items.pop()
                self._items.clear()
                self._items.append(newest)
        return self._items.popleft()[1]

    async def close(self) -> None:
        self._call.cancel()
        with contextlib.suppress(grpc.aio.AioRpcError):
            await cancel_and_wait(self._reader)


async def register(
    kubelet_socket: str,
    endpoint: str,
    resource: str,
    options: PluginOptions,
    timeout: float = 15.0,
) -> None:
    """Register a plugin with the kubelet. The kubelet dials the plugin inside Register (10 s), so allow longer."""
    async with channel(kubelet_socket) as ch:
        stub = dp_grpc.RegistrationStub(ch)
        request = dp.RegisterRequest(
            version=API_VERSION, endpoint=endpoint, resource_name=resource, options=convert.options_to_pb(options)
        )
        try:
            with logged(kubelet_socket, f"Register {resource} at {endpoint}"):
                await stub.Register(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"Register {resource} with {kubelet_socket}", timeout) from None


async def registry_info(socket_path: str, timeout: float = 5.0) -> RegistryInfo:
    """GetInfo of a plugin-watcher socket in plugins_registry/."""
    async with plugin_channel(socket_path) as ch:
        try:
            with logged(socket_path, "GetInfo"):
                info = await reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"{socket_path} GetInfo", timeout) from None
    info = parsed(info, f"{socket_path} GetInfo", "PluginInfo")
    return RegistryInfo(
        type=info.type, name=info.name, endpoint=info.endpoint, supported_versions=tuple(info.supported_versions)
    )
