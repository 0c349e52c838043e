"""The in-process device plugin: a real DevicePlugin gRPC server on a unix socket.

It behaves like the minimal plugin the kubelet's own tests use
(pkg/kubelet/cm/devicemanager/plugin/v1beta1/stub.go): serve first, then
register (the kubelet dials back inside Register), push every device change
into every open ListAndWatch stream, and register again when the kubelet
restarts. Devices and their health can be changed while it runs, from this
process (the simulator, tests) or from another shell (``control.py``).

All methods run on the event loop that called ``start``; none is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import grpc

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.base.errors import DevctlError
from devctl.base.waits import cancel_and_wait, within
from devctl.lab import made, serving
from devctl.lab.plugin.control import ControlServer
from devctl.lab.plugin.preferred import preferred_allocation
from devctl.lab.plugin.spec import DeviceError, PluginSpec, UnknownDevice
from devctl.model import Device, PluginOptions
from devctl.node import convert, deviceplugin
from devctl.node.rpc import RpcFailure

# How often the plugins dir is looked at for a kubelet restart. Polling is portable
# and cheap; the upstream stub uses fsnotify for the same purpose.
WATCH_INTERVAL = 0.15
# Registration retries: quick at first, never slower than this, so that a kubelet
# that comes back late is still found well within the 5 s the contract allows.
BACKOFF_START = 0.1
BACKOFF_MAX = 2.0
# How long stop() lets open streams finish after they were told to end.
STOP_GRACE = 1.0
RPC_LOG_SIZE = 500


class ServeError(DevctlError, RuntimeError):
    """The plugin cannot serve: its socket is taken by a live server, or cannot be bound."""


@dataclass(frozen=True)
class RpcRecord:
    """One RPC the plugin served, for tests and the TUI."""

    time: float  # seconds since the epoch
    rpc: str
    device_ids: tuple[str, ...] = ()
    detail: str = ""


def _identity(path: str) -> tuple[int, int] | None:
    """Which socket file sits at ``path`` (through a symlink: kubelet.sock may be one), or None."""
    return made.socket_identity(path, follow_symlinks=True)


class DevicePluginServer(serving.StartStop):
    """Serve one resource (a PluginSpec) on ``<plugins_dir>/<spec.socket>``.

    ``register=False`` only serves (for a plugin that something else registers,
    or to look at a plugin without a kubelet). With ``control_dir`` the plugin
    also answers ``devctl plugin set-health|add|remove`` on a control socket there.
    """

    def __init__(
        self,
        spec: PluginSpec,
        plugins_dir: str,
        *,
        kubelet_socket: str | None = None,
        register: bool = True,
        control_dir: str | None = None,
        log: logging.Logger | None = None,
    ):
        self.spec = spec
        self.plugins_dir = plugins_dir
        self.socket_path = os.path.join(plugins_dir, spec.socket)
        self.kubelet_socket = kubelet_socket or os.path.join(plugins_dir, "kubelet.sock")
        self.register_enabled = register
        self.control_dir = control_dir
        self.log = log or logging.getLogger("devctl.lab.plugin")
        self.options = PluginOptions(
            pre_start_required=spec.pre_start, get_preferred_allocation_available=spec.preferred_allocation
        )
        self.rpc_log: deque[RpcRecord] = deque(maxlen=RPC_LOG_SIZE)
        self.registrations = 0  # successful Register calls so far
        self.registered = False  # True from a successful Register until the kubelet goes away
        self._devices: dict[str, Device] = {d.id: d for d in spec.devices}
        self._streams: set[_Newest] = set()
        # The last list sent and its message: every stream and every new one shares it until the list changes.
        self._sent: tuple[tuple[Device, ...], dp.ListAndWatchResponse] | None = None
        self._serving = serving.UnixGrpcServer(self.socket_path, self._add, grace=STOP_GRACE, dir_mode=0o750)
        self._kubelet_id: tuple[int, int] | None = None
        self._register_wanted = asyncio.Event()
        self._registered_cond = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._control: ControlServer | None = None  # while running with control_dir

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Serve, then register, then watch the plugins dir for a kubelet restart.

        ServeError (one line) when the socket path is too long, or taken by a live
        plugin or by anything that is not a socket: nothing there is removed.
        """
        try:
            made.check_socket_path(self.socket_path)
        except ValueError as e:
            raise ServeError(str(e)) from None
        await self._refuse_live_socket()
        await self._serve(first=True)
        if self.control_dir is not None:
            self._control = ControlServer(self, self.control_dir)
            await self._control.start()
        self._kubelet_id = _identity(self.kubelet_socket)
        if self.register_enabled:
            self._register_wanted.set()
            self._tasks.append(asyncio.create_task(self._register_loop(), name=f"register {self.spec.resource}"))
        self._tasks.append(asyncio.create_task(self._watch_loop(), name=f"watch {self.plugins_dir}"))

    async def stop(self) -> None:
        """End open streams, stop serving and remove our sockets. Safe to call twice."""
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        if self._control is not None:
            await self._control.stop()
            self._control = None
        await self._stop_server()
        self.registered = False

    async def _refuse_live_socket(self) -> None:
        # gRPC unlinks any socket at a unix path before it binds, which would
        # silently take the socket of a plugin that is still serving.
        if made.socket_identity(self.socket_path) is None:
            if (taken := made.what_is_at(self.socket_path)) != "nothing":
                raise ServeError(f"{self.socket_path} is taken: {taken} is there (devctl removes only its own sockets)")
            return
        try:
            _, writer = await within(asyncio.open_unix_connection(self.socket_path), 1.0)
        except (OSError, asyncio.TimeoutError):
            return  # stale: nothing listens, so binding over it harms no one
        writer.close()
        raise ServeError(f"{self.socket_path} is already served by a live process; choose another --socket")

    def _add(self, server: grpc.aio.Server) -> None:
        dp_grpc.add_DevicePluginServicer_to_server(_Servicer(self), server)

    async def _serve(self, first: bool = False) -> None:
        try:
            await self._serving.start()
        except (made.PathTaken, serving.BindError) as e:
            raise ServeError(str(e)) from None
        # The first time, whoever started the plugin says "serving"; a re-serve after a kubelet restart is news.
        self.log.log(
            logging.DEBUG if first else logging.INFO,
            "serving %s on %s (%d devices)",
            self.spec.resource,
            self.socket_path,
            len(self._devices),
        )

    async def _stop_server(self) -> None:
        for stream in self._streams:
            stream.end()  # ends each ListAndWatch cleanly, status OK
        await self._serving.stop()

    # --- registration and kubelet restarts ------------------------------------------

    async def wait_registered(self, timeout: float = 5.0, count: int = 1) -> None:
        """Wait until Register has succeeded ``count`` times in all; asyncio.TimeoutError after ``timeout``."""

        async def reached() -> None:
            async with self._registered_cond:
                await self._registered_cond.wait_for(lambda: self.registrations >= count)

        await within(reached(), timeout)

    async def _register_loop(self) -> None:
        delay = BACKOFF_START
        # Warn once per outage, of each kind; a plugin waiting for its kubelet should not flood the log.
        warned_absent = warned_failing = False
        while True:
            await self._register_wanted.wait()
            self._register_wanted.clear()
            if _identity(self.kubelet_socket) is None:
                # No kubelet yet, or it is restarting: the watcher wakes us when kubelet.sock appears.
                if not warned_absent:
                    self.log.warning("no kubelet at %s yet; will register when it appears", self.kubelet_socket)
                warned_absent = True
                continue
            try:
                await deviceplugin.register(self.kubelet_socket, self.spec.socket, self.spec.resource, self.options)
            except RpcFailure as e:
                level = logging.DEBUG if warned_failing else logging.WARNING
                self.log.log(level, "register %s: %s (retrying)", self.spec.resource, e.message)
                warned_failing = True
                # Retry after the backoff, or at once when the watcher sees a new kubelet.sock.
                with contextlib.suppress(asyncio.TimeoutError):
                    await within(self._register_wanted.wait(), delay)
                delay = min(delay * 2, BACKOFF_MAX)
                self._register_wanted.set()
                continue
            delay, warned_absent, warned_failing = BACKOFF_START, False, False
            self.registered = True
            # The kubelet's side logs the registration too: in `devctl sim` this one is the RPC's line.
            self.log.getChild("rpc").info("registered %s with %s", self.spec.resource, self.kubelet_socket)
            async with self._registered_cond:
                self.registrations += 1
                self._registered_cond.notify_all()

    async def _watch_loop(self) -> None:
        warned = False
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                await self._check_dir()
            except ServeError as e:
                self.log.log(logging.DEBUG if warned else logging.WARNING, "%s (retrying)", e)
                warned = True
            else:
                warned = False

    async def _check_dir(self) -> None:
        # A restarting kubelet deletes every socket in the plugins dir, ours too
        # (pkg/kubelet/cm/devicemanager/manager.go, removeContents), then creates
        # kubelet.sock again and forgets every plugin until it registers again.
        if not self._serving.still_bound():
            self.log.debug("%s was removed; serving it again", self.socket_path)
            # The old server stops before the new one binds: its socket at the path is gone,
            # and it never unlinks the new one (add_private_port).
            await self._stop_server()
            await self._serve()
            self._want_registration()
        kubelet = _identity(self.kubelet_socket)
        if kubelet != self._kubelet_id:
            self._kubelet_id = kubelet
            if kubelet is None:
                self.registered = False
            else:
                self.log.info("%s was created again; registering again", self.kubelet_socket)
                self._want_registration()

    def _want_registration(self) -> None:
        self.registered = False
        if self.register_enabled:
            self._register_wanted.set()

    # --- devices ----------------------------------------------------------------------

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(self._devices.values())

    def _message(self, devices: tuple[Device, ...]) -> dp.ListAndWatchResponse:
        """The ListAndWatch message of ``devices``: made once per list, not once per stream that reads it."""
        if self._sent is None or self._sent[0] != devices:
            self._sent = (devices, dp.ListAndWatchResponse(devices=[convert.device_to_pb(d) for d in devices]))
        return self._sent[1]

    def set_health(self, device_id: str, health: str) -> None:
        """Change one device's health and push the new list to every open stream."""
        device = self._get(device_id)
        if device.health != health:
            self._devices[device_id] = replace(device, health=health)
            self.log.info("%s %s: %s -> %s", self.spec.resource, device_id, device.health, health)
            self._publish()

    def add(self, device: Device) -> None:
        if device.id in self._devices:
            raise DeviceError(f"{self.spec.resource} already has a device {device.id!r}")
        self._devices[device.id] = device
        self.log.info("%s: added %s", self.spec.resource, device.id)
        self._publish()

    def remove(self, device_id: str) -> None:
        self._get(device_id)
        del self._devices[device_id]
        self.log.info("%s: removed %s", self.spec.resource, device_id)
        self._publish()

    def _get(self, device_id: str) -> Device:
        try:
            return self._devices[device_id]
        except KeyError:
            from devctl.base.names import likely

            guess = likely(device_id, self._devices)
            hint = f" (did you mean {guess}?)" if guess else ""
            raise UnknownDevice(f"{self.spec.resource} has no device {device_id!r}{hint}") from None

    def _publish(self) -> None:
        devices = self.devices
        for stream in self._streams:
            stream.put(devices)

    def _record(self, rpc: str, device_ids: tuple[str, ...] = (), detail: str = "") -> None:
        self.rpc_log.append(RpcRecord(time.time(), rpc, device_ids, detail))
        ids = f" {','.join(device_ids)}" if device_ids else ""
        # A child logger: `devctl sim` keeps its log to one line per event and lowers this one (-v shows it).
        self.log.getChild("rpc").info("%s %s%s%s", rpc, self.spec.resource, ids, f" {detail}" if detail else "")


class _Newest:
    """The one list a ListAndWatch stream has still to send: the newest, never a backlog.

    Each message is the full device list, so a list not yet sent is worthless
    once a newer one exists. A client that stops reading (gRPC's flow control
    then holds the servicer at its ``yield``) costs one list, however often
    health flips meanwhile, and gets the newest when it reads again.
    """

    def __init__(self, devices: tuple[Device, ...]):
        self._pending: tuple[Device, ...] | None = devices
        self._ended = False
        self._ready = asyncio.Event()
        self._ready.set()

    def put(self, devices: tuple[Device, ...]) -> None:
        if not self._ended:
            self._pending = devices
            self._ready.set()

    def end(self) -> None:
        self._ended = True
        self._pending = None
        self._ready.set()

    async def get(self) -> tuple[Device, ...] | None:
        """The newest list not sent yet, waiting for one; None once the stream is to end."""
        await self._ready.wait()
        self._ready.clear()
        devices, self._pending = self._pending, None
        return devices


class _Servicer(dp_grpc.DevicePluginServicer):
    """The five DevicePlugin RPCs, answered from the server's current devices and spec."""

    def __init__(self, plugin: DevicePluginServer):
        self.plugin = plugin

    async def GetDevicePluginOptions(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> dp.DevicePluginOptions:
        self.plugin._record("GetDevicePluginOptions")
        return convert.options_to_pb(self.plugin.options)

    async def ListAndWatch(
        self, request: dp.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[dp.ListAndWatchResponse]:
        plugin = self.plugin
        newest = _Newest(plugin.devices)
        plugin._streams.add(newest)
        plugin._record("ListAndWatch", detail=f"open ({len(plugin._streams)} streams)")
        try:
            # Every message is the full device list: the kubelet replaces its view with each one.
            while (devices := await newest.get()) is not None:
                yield plugin._message(devices)
        finally:
            plugin._streams.discard(newest)

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        plugin = self.plugin
        if not plugin.spec.preferred_allocation:
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED, f"{plugin.spec.resource}: GetPreferredAllocation is not offered"
            )
        responses = []
        for req in request.container_requests:
            chosen = preferred_allocation(
                plugin.devices, req.available_deviceIDs, req.must_include_deviceIDs, req.allocation_size
            )
            plugin._record(
                "GetPreferredAllocation",
                tuple(chosen),
                f"size={req.allocation_size} available={len(req.available_deviceIDs)}"
                f" must_include={','.join(req.must_include_deviceIDs) or '-'}",
            )
            responses.append(dp.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return dp.PreferredAllocationResponse(container_responses=responses)

    async def Allocate(self, request: dp.AllocateRequest, context: grpc.aio.ServicerContext) -> dp.AllocateResponse:
        plugin = self.plugin
        responses = []
        for req in request.container_requests:
            ids = tuple(req.devices_ids)
            unknown = [i for i in ids if i not in plugin._devices]
            if unknown:
                plugin._record("Allocate", ids, f"refused: unknown {','.join(unknown)}")
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{plugin.spec.resource}: unknown device(s) {', '.join(unknown)}",
                )
            plugin._record("Allocate", ids)
            responses.append(convert.allocation_to_pb(plugin.spec.render_allocation(ids)))
        return dp.AllocateResponse(container_responses=responses)

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: grpc.aio.ServicerContext
    ) -> dp.PreStartContainerResponse:
        plugin = self.plugin
        ids = tuple(request.devices_ids)
        if not plugin.spec.pre_start:
            plugin._record("PreStartContainer", ids, "refused: not required")
            await context.abort(
                grpc.StatusCode.UNIMPLEMENTED, f"{plugin.spec.resource}: PreStartContainer is not required"
            )
        plugin._record("PreStartContainer", ids)
        return dp.PreStartContainerResponse()
