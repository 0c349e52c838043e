"""The exporter's live ListAndWatch streams: one per plugin socket, for as long as the exporter runs.

Device health must reach Prometheus as the kubelet sees it — from the stream,
not from a fresh RPC per scrape. Each socket in the plugins dir gets a follower
that holds devctl's own stream client (``DevicePluginClient.list_and_watch``)
open, reconnects with devctl's ``Backoff`` when the plugin restarts, and hands
every full device list to ``on_change``. A follower whose stream broke reports
the socket down (no devices: a device list that is not live is not reported).

Sockets come and go (a kubelet restart deletes them all; a plugin that stops
removes its own): a socket that vanished is reported down, and forgotten after
``FORGET_AFTER`` — the kubelet's own grace period for a stopped plugin's devices.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import cast

from devctl.model import Device, PluginStatus
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.rpc import RpcFailure, check_socket
from devctl.waits import within
from devctl.watch import DISCOVERY_POLL, Backoff, plugin_sockets
from devctl.watch.follow import STABLE_AFTER

log = logging.getLogger(__name__)

# pkg/kubelet/cm/devicemanager/endpoint.go: endpointStopGracePeriod, 5 minutes.
FORGET_AFTER = 300.0


@dataclass(frozen=True)
class LiveSocket:
    """What one plugin socket's stream says now: up with its last full list, or down with why."""

    socket: str
    up: bool
    devices: tuple[Device, ...] = ()
    status: PluginStatus = PluginStatus.SERVING
    error: str | None = None
    gone_since: float | None = None  # monotonic time the socket file vanished, while it stays away


# (socket, its state or None when forgotten)
OnChange = Callable[[str, "LiveSocket | None"], None]
# (rpc, seconds): a call timed on the way (the first list of each stream)
OnRpc = Callable[[str, float], None]


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class PluginStreams:
    """Discover plugin sockets and keep one live stream on each; report every change through ``on_change``."""

    def __init__(
        self,
        plugins_dir: str,
        timeout: float,
        on_change: OnChange,
        on_rpc: OnRpc,
        *,
        poll: float = DISCOVERY_POLL,
        forget_after: float = FORGET_AFTER,
        root: str | None = None,
    ):
        self.plugins_dir = plugins_dir
        self.root = root
        self.timeout = timeout
        self.on_change = on_change
        self.on_rpc = on_rpc
        self.poll = poll
        self.forget_after = forget_after
        self._tasks: dict[str, tuple[int | None, asyncio.Task[None]]] = {}
        self._gone: dict[str, float] = {}

    async def run(self) -> None:
        """Follow sockets until cancelled: start a stream on each new one, restart it when its file is replaced."""
        try:
            while True:
                self._discover()
                await asyncio.sleep(self.poll)
        finally:
            tasks = [task for _, task in self._tasks.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _discover(self) -> None:
        found = set(plugin_sockets(self.plugins_dir, self.root))
        for socket in found:
            inode = _inode(socket)
            known = self._tasks.get(socket)
            if known is not None and known[0] == inode and not known[1].done():
                continue
            if known is not None:
                # Created again (a plugin or kubelet restart): the old stream may hang on a dead server.
                known[1].cancel()
            self._gone.pop(socket, None)
            self._tasks[socket] = (inode, asyncio.ensure_future(self._follow(socket)))
        now = time.monotonic()
        for socket in list(self._tasks):
            if socket in found:
                continue
            _, task = self._tasks[socket]
            if socket not in self._gone:
                task.cancel()
                self._gone[socket] = now
                self.on_change(
                    socket,
                    LiveSocket(
                        socket,
                        up=False,
                        status=PluginStatus.UNREACHABLE,
                        error=f"{socket}: the socket file is gone",
                        gone_since=now,
                    ),
                )
            elif now - self._gone[socket] >= self.forget_after:
                del self._tasks[socket], self._gone[socket]
                self.on_change(socket, None)

    async def _follow(self, socket: str) -> None:
        """One socket's stream for ever: each list goes to ``on_change``; a break is reported and retried."""
        backoff = Backoff()
        while True:
            started = time.monotonic()
            try:
                await check_socket(socket, self.timeout)
                async with DevicePluginClient(socket, self.timeout) as client:
                    # An async generator: closed below so the stream is cancelled at once.
                    stream = cast(AsyncGenerator[tuple[Device, ...], None], client.list_and_watch())
                    try:
                        clock = time.perf_counter()
                        try:
                            devices = await within(stream.__anext__(), self.timeout)
                        except asyncio.TimeoutError:
                            raise RpcFailure(
                                PluginStatus.TIMEOUT, f"{socket}: no device list within {self.timeout:g}s"
                            ) from None
                        self.on_rpc("ListAndWatch", time.perf_counter() - clock)
                        self.on_change(socket, LiveSocket(socket, up=True, devices=devices))
                        async for devices in stream:
                            self.on_change(socket, LiveSocket(socket, up=True, devices=devices))
                    except StopAsyncIteration:
                        pass
                    finally:
                        await stream.aclose()
                failure = LiveSocket(
                    socket, up=False, status=PluginStatus.UNREACHABLE, error=f"{socket}: ListAndWatch stream ended"
                )
            except RpcFailure as e:
                failure = LiveSocket(socket, up=False, status=e.status, error=e.message)
            except (AttributeError, TypeError):
                # grpc.aio hands back None for a reply it cannot decode: another API on this socket.
                failure = LiveSocket(
                    socket,
                    up=False,
                    status=PluginStatus.UNREACHABLE,
                    error=f"{socket}: the reply could not be decoded (not a device plugin)",
                )
            log.debug("%s", failure.error)
            self.on_change(socket, failure)
            if time.monotonic() - started >= STABLE_AFTER:
                backoff.reset()
            await asyncio.sleep(backoff.next())
