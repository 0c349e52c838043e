"""Misbehaving servers on real unix sockets, for testing every client against them.

Each is a real ``grpc.aio`` server (or a bare socket) on a path you give, as an
async context manager that stops it and removes the socket on exit. They are
the nodes a troubleshooter actually meets: a kubelet or plugin that accepts and
never answers, a frozen process, a plugin that dies mid-stream, a socket file
left behind, a node with thousands of pods, and a server speaking another
protocol, and a plugin whose device list the kubelet cannot read. Use paths
under the ``short_root`` fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import grpc

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.lab.sim.podresources import PodResourcesServer
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerResources,
    Device,
    PodResources,
)
from devctl.node import convert

LIST_AND_WATCH = "/v1beta1.DevicePlugin/ListAndWatch"

# Field 1, length-delimited, says 5 bytes follow but only 3 do: no protobuf message parses it.
GARBAGE = b"\x0a\x05abc"

# gRPC's default receive limit, which the huge pod-resources reply must exceed.
DEFAULT_RECEIVE_LIMIT = 4 * 1024 * 1024


@asynccontextmanager
async def _serving(path: str, server: grpc.aio.Server) -> AsyncIterator[grpc.aio.Server]:
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield server
    finally:
        # No grace: handlers that await forever are cancelled here.
        await server.stop(None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class _EveryMethod(grpc.GenericRpcHandler):
    """Answers any method of any service with ``unary``; ListAndWatch with ``stream``.

    Requests and replies stay raw bytes (no serializers), so any service path is
    served: PodResourcesLister, DevicePlugin, Registration, plugin-watcher GetInfo.
    """

    def __init__(self, unary, stream):
        self._unary = grpc.unary_unary_rpc_method_handler(unary)
        self._stream = grpc.unary_stream_rpc_method_handler(stream)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return self._stream if handler_call_details.method == LIST_AND_WATCH else self._unary


async def _forever(request: bytes, context: grpc.aio.ServicerContext) -> None:
    await asyncio.Event().wait()


@asynccontextmanager
async def hung_server(path: str) -> AsyncIterator[grpc.aio.Server]:
    """A gRPC server that accepts every call on every service and never answers any.

    A kubelet or plugin stuck in a lock looks like this: the connection and the
    HTTP/2 handshake succeed, the reply never comes. Only a deadline ends the call.
    """
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_EveryMethod(_forever, _forever)])
    async with _serving(path, server) as s:
        yield s


@asynccontextmanager
async def frozen_socket(path: str) -> AsyncIterator[str]:
    """A socket that listens but never accepts: a plugin process stopped with SIGSTOP.

    The kernel completes connections into the backlog, so a connect succeeds and
    ``check_socket`` sees nothing wrong; gRPC's HTTP/2 handshake never completes.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(64)
        yield path
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def growing_lists(n: int) -> list[tuple[Device, ...]]:
    """What ``dying_stream_plugin`` sends: list k (from 0) holds healthy ``dev-0`` … ``dev-k``."""
    return [tuple(Device(id=f"dev-{i}") for i in range(k + 1)) for k in range(n)]


class _DyingPlugin(dp_grpc.DevicePluginServicer):
    def __init__(self, after: int, clean: bool):
        self._after = after
        self._clean = clean

    async def GetDevicePluginOptions(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions()

    async def ListAndWatch(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        for devices in growing_lists(self._after):
            yield dp.ListAndWatchResponse(devices=[convert.device_to_pb(d) for d in devices])
        if not self._clean:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "device plugin exited")


@asynccontextmanager
async def dying_stream_plugin(path: str, after: int = 2, *, clean: bool = False) -> AsyncIterator[grpc.aio.Server]:
    """A DevicePlugin whose ListAndWatch sends ``after`` lists (``growing_lists``), then dies.

    By default the stream fails with UNAVAILABLE, as when the plugin crashes;
    ``clean=True`` ends it with status OK instead, which the kubelet treats the
    same way (the plugin is gone until it registers again). The other RPCs are
    served normally or answer UNIMPLEMENTED, so the socket itself looks alive.
    """
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(_DyingPlugin(after, clean), server)
    async with _serving(path, server) as s:
        yield s


def stale_socket(path: str) -> str:
    """Leave a socket file nobody listens on, as a plugin killed with SIGKILL does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
    finally:
        sock.close()
    return path


class _ManyPods:
    def __init__(self, pods: Sequence[PodResources]):
        self._pods = tuple(pods)

    def pods(self) -> tuple[PodResources, ...]:
        return self._pods

    def allocatable(self) -> AllocatableResources:
        return AllocatableResources()


def many_pods(n: int) -> tuple[PodResources, ...]:
    """``n`` pods with long names, two containers each holding two devices on two NUMA nodes.

    About 1 KiB per pod on the wire, so 5,000 pods pass 4 MiB.
    """
    pods = []
    for i in range(n):
        containers = tuple(
            ContainerResources(
                name=f"container-{c}-with-a-name-as-long-as-the-kubelet-allows-{i:07d}"[:63],
                devices=(
                    ContainerDevices(
                        resource="hardware-vendor.example/foo",
                        ids=tuple(f"GPU-{i:05d}{c}{d}-9f0c3e2a-7b1d-4c8e-a5f6-0123456789ab-{i:07d}" for d in range(2)),
                        numa_nodes=(0, 1),
                    ),
                ),
                cpu_ids=(2 * c, 2 * c + 1),
            )
            for c in range(2)
        )
        pods.append(
            PodResources(
                namespace="team-with-a-long-namespace-name",
                name=f"a-pod-name-as-long-as-a-statefulset-would-make-it-{i:07d}",
                containers=containers,
            )
        )
    return tuple(pods)


@asynccontextmanager
async def huge_pod_resources(path: str, pods: int = 5000) -> AsyncIterator[PodResourcesServer]:
    """A pod-resources server whose List reply is larger than gRPC's 4 MiB default limit.

    It is the simulator's own server, with ``many_pods(pods)`` and no rate limit in
    the way, so only the receive limit of the client decides.
    """
    async with PodResourcesServer(path, _ManyPods(many_pods(pods)), rate=1000.0, burst=1000) as server:
        yield server


async def _garbage(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return GARBAGE


async def _garbage_then_silence(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    yield GARBAGE
    # A plugin's stream stays open; the client must fail on the message, not on the end.
    await asyncio.Event().wait()


@asynccontextmanager
async def malformed_plugin(path: str) -> AsyncIterator[grpc.aio.Server]:
    """A server whose every reply is bytes that parse as no protobuf message.

    ListAndWatch sends one such message and keeps the stream open; every unary
    method (DevicePlugin, and PodResourcesLister too, so it doubles as a broken
    kubelet) answers with the same bytes. It is what a socket serving some other
    protocol, or a plugin built from a corrupt .proto, looks like to a client.
    """
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_EveryMethod(_garbage, _garbage_then_silence)])
    async with _serving(path, server) as s:
        yield s


class NewestStreamOnly(dp_grpc.DevicePluginServicer):
    """A DevicePlugin that sends each update to its newest ListAndWatch stream only.

    A plugin that keeps the stream of its last ``ListAndWatch`` in one variable
    does this: once anyone else (devctl, a second kubelet connection) has opened
    a stream, the kubelet's stream never hears of a change again, and the kubelet
    keeps offering what the plugin no longer calls healthy. Every new stream
    starts with the current list, so a fresh look at the plugin sees the truth.
    Call ``update`` on the server's loop.
    """

    def __init__(self, devices: Sequence[Device]):
        self.devices = tuple(devices)
        self._newest: asyncio.Queue[tuple[Device, ...]] | None = None

    def update(self, devices: Sequence[Device]) -> None:
        self.devices = tuple(devices)
        if self._newest is not None:
            self._newest.put_nowait(self.devices)

    async def GetDevicePluginOptions(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions()

    async def ListAndWatch(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        queue: asyncio.Queue[tuple[Device, ...]] = asyncio.Queue()
        self._newest = queue
        devices = self.devices
        while True:
            yield dp.ListAndWatchResponse(devices=[convert.device_to_pb(d) for d in devices])
            devices = await queue.get()


@asynccontextmanager
async def newest_stream_only_plugin(path: str, devices: Sequence[Device]) -> AsyncIterator[NewestStreamOnly]:
    """A ``NewestStreamOnly`` plugin serving ``devices`` on ``path`` (it does not register: the test does)."""
    plugin = NewestStreamOnly(devices)
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(plugin, server)
    async with _serving(path, server):
        yield plugin


@asynccontextmanager
async def rate_limited_pod_resources(path: str) -> AsyncIterator[PodResourcesServer]:
    """A pod-resources server whose token bucket is always empty: every call is RESOURCE_EXHAUSTED.

    What a node looks like to devctl while another client (a monitoring agent
    polling too fast) spends the kubelet's shared limit for the whole run.
    """
    async with PodResourcesServer(path, _ManyPods(()), rate=0.0, burst=0) as server:
        yield server


def too_large_list(devices: int = 200_000) -> bytes:
    """A ListAndWatchResponse of ``devices`` healthy devices: 200,000 (``big-000000`` …) take 4.4 MiB, above 4 MiB."""
    return dp.ListAndWatchResponse(
        devices=[dp.Device(ID=f"big-{i:06d}", health="Healthy") for i in range(devices)]
    ).SerializeToString()


async def _empty(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b""  # an empty message of any type: DevicePluginOptions with every option off


@asynccontextmanager
async def too_large_plugin(path: str, devices: int = 200_000) -> AsyncIterator[grpc.aio.Server]:
    """A device plugin whose one ListAndWatch message is above gRPC's default 4 MiB receive limit.

    The kubelet reads plugins with that default, so it cannot read this list
    either. The server sends without limit (``max_send_message_length`` -1);
    the stream stays open after the list, as a plugin's does. Every unary
    method answers an empty message.
    """
    wire = too_large_list(devices)

    async def once_then_silence(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        yield wire
        await asyncio.Event().wait()

    server = grpc.aio.server(options=[("grpc.max_send_message_length", -1)])
    server.add_generic_rpc_handlers([_EveryMethod(_empty, once_then_silence)])
    async with _serving(path, server) as s:
        yield s
