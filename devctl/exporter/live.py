"""The exporter's live ListAndWatch streams: one per plugin socket, followed by devctl's one follower.

Device health must reach Prometheus as the kubelet sees it — from the stream,
not from a fresh RPC per scrape. The sockets are found by the watch's one
discovery (``devctl.core.watch.sockets.discover``: the plugins dir, and device
plugins registered in ``plugins_registry/``), and each is followed by the
watch's ``Follower``: its own stream client, reconnects with backoff when the
stream breaks, the newest list taken when it falls behind; a socket file
created again (a plugin or kubelet restart) gets a new follower at once.
This module only turns what the follower hears into ``LiveSocket`` values:
every full list goes to ``on_change``, the first list of each stream's RPC
time to ``on_rpc``, and a stream that broke reports the socket down (no
devices: a device list that is not live is not reported).
The timeline of events the follower also writes is kept by nobody here.

Sockets come and go (a kubelet restart deletes them all; a plugin that stops
removes its own): a socket that vanished is reported down, and forgotten after
``FORGET_AFTER`` — the kubelet's own grace period for a stopped plugin's devices.
Each socket is reported under the name ``devctl plugins`` lists it by (a
registration's path for a plugin registered in ``plugins_registry/``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from devctl.base.waits import cancel_and_wait
from devctl.core.watch import DISCOVERY_POLL, Backoff, WatchItem
from devctl.core.watch.follow import Follower, StreamEnd
from devctl.core.watch.sockets import Registered, discover, inode_of
from devctl.model import Device, NodePaths, PluginStatus

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


class _NoTimeline:
    """The follower's timeline, kept by nobody: the exporter wants the lists, not the events between them."""

    def put_nowait(self, item: WatchItem, /) -> None:
        pass


async def _unnamed(socket: str, devices: Sequence[Device]) -> str | None:
    return None  # the refresh names each socket (state.learn); the follower need not ask the kubelet


class _Followed:
    """One followed socket: its follower's task, and what the follower hears, said as ``LiveSocket`` values."""

    def __init__(self, streams: PluginStreams, name: str, dial: str):
        self.streams = streams
        self.name = name
        self.inode = inode_of(dial)
        self.follower = Follower(
            _NoTimeline(),
            _unnamed,
            resource=None,
            socket=dial,
            scouts=None,
            wait=True,
            once=False,
            timeout=streams.timeout,
            backoff=Backoff(),
            listener=self,
            watch_file=False,  # PluginStreams' discovery looks at each file: a new one starts a new follower
        )
        self.task = asyncio.ensure_future(self.follower.run())

    def listed(self, socket: str, devices: tuple[Device, ...], took: float | None) -> None:
        if took is not None:
            self.streams.on_rpc("ListAndWatch", took)
        self.streams.on_change(self.name, LiveSocket(self.name, up=True, devices=devices))

    def ended(self, socket: str, end: StreamEnd) -> None:
        log.debug("%s", end.message)
        self.streams.on_change(self.name, LiveSocket(self.name, up=False, status=end.status, error=end.message))


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
        paths: NodePaths | None = None,
    ):
        self.plugins_dir = plugins_dir
        self.root = root
        self.timeout = timeout
        self.on_change = on_change
        self.on_rpc = on_rpc
        self.poll = poll
        self.forget_after = forget_after
        # With the node's paths, device plugins registered in plugins_registry/ are followed too.
        self.registered = Registered(paths, timeout) if paths is not None else None
        self._followed: dict[str, _Followed] = {}  # socket to dial -> its follower
        self._gone: dict[str, float] = {}  # socket to dial -> when its file vanished
        self._stopping: set[asyncio.Future[None]] = set()  # followers replaced, still ending

    async def run(self) -> None:
        """Follow sockets until cancelled: a follower on each new one, each vanished one reported and forgotten."""
        looking = discover(self.plugins_dir, self.root, self.registered, self._found, self.poll, scan_registry=True)
        task = asyncio.ensure_future(looking)
        try:
            await task
        finally:
            await cancel_and_wait(task, *self._stopping, *(f.task for f in self._followed.values()))
            if self.registered is not None:
                self.registered.stop()

    def _stop(self, followed: _Followed) -> None:
        followed.task.cancel()
        self._stopping.add(followed.task)
        followed.task.add_done_callback(self._stopping.discard)

    def _found(self, found: dict[str, str]) -> None:
        for dial, name in found.items():
            followed = self._followed.get(dial)
            if (
                followed is not None
                and dial not in self._gone
                and (followed.name, followed.inode) == (name, inode_of(dial))
            ):
                continue
            if followed is not None:
                # Created again (a plugin or kubelet restart): the old stream may hang on a dead server.
                self._stop(followed)
            self._gone.pop(dial, None)
            self._followed[dial] = _Followed(self, name, dial)
        now = time.monotonic()
        for dial in list(self._followed):
            if dial in found:
                continue
            followed = self._followed[dial]
            if dial not in self._gone:
                # Stopped now: a follower would wait for the file to come back, but a new one starts when it does.
                self._stop(followed)
                self._gone[dial] = now
                self.on_change(
                    followed.name,
                    LiveSocket(
                        followed.name,
                        up=False,
                        status=PluginStatus.UNREACHABLE,
                        error=f"{followed.name}: the socket file is gone",
                        gone_since=now,
                    ),
                )
            elif now - self._gone[dial] >= self.forget_after:
                del self._followed[dial], self._gone[dial]
                self.on_change(followed.name, None)
