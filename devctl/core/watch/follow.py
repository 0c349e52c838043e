"""Following one target's ListAndWatch stream across plugin and kubelet restarts.

A target is a socket (``--socket``, or each socket of a whole-node watch),
or a resource, whose socket the scouts find. We open our own stream on a
plugin socket (a plugin serves many streams; the kubelet's own is untouched),
and the first list of that very stream is the snapshot: nothing is probed
first and streamed later, so no change falls between the two.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from devctl.base.backoff import Backoff
from devctl.core.events import DISCONNECTED, RECONNECTED, SNAPSHOT, Change, Notice, WatchEvent
from devctl.core.watch.diff import counts, diff
from devctl.core.watch.scouts import Scouts
from devctl.core.watch.sockets import Namer, inode_of
from devctl.core.watch.stream import (
    BEHIND,
    SCOUT_POLL,
    SCOUT_RETRY,
    SCOUT_RETRY_CAP,
    SKIP_NOTICE_EVERY,
    SOCKET_POLL,
    STABLE_AFTER,
    OpenStream,
    StreamEnded,
    exists,
    now,
    open_stream,
)
from devctl.model import Device, PluginStatus
from devctl.model.udev import KernelEvent
from devctl.node.rpc import RpcFailure

log = logging.getLogger(__name__)

WatchItem = WatchEvent | KernelEvent | Notice


class Sink(Protocol):
    """Where a follower puts its timeline items: the watch's queue, or a sink that keeps none (the exporter)."""

    def put_nowait(self, item: WatchItem, /) -> None: ...


@dataclass(frozen=True)
class StreamEnd:
    """Why a followed stream ended or could not start, typed: a status and one line naming its socket."""

    status: PluginStatus
    message: str


class Listener(Protocol):
    """Who hears a follower's full lists and ends besides its timeline (the exporter's live device lists)."""

    def listed(self, socket: str, devices: tuple[Device, ...], took: float | None) -> None:
        """A full list; ``took``: the seconds the first list of a session took (the RPC's time), else None."""

    def ended(self, socket: str, end: StreamEnd) -> None:
        """The stream ended or could not be opened; the follower tries again with backoff."""


def _named_once(name: str, reason: str, names_it: bool) -> str:
    """``reason`` prefixed with the target's name, unless it names the target already (``names_it``).

    A socket followed before its resource is known is named by its path, and
    devctl's own failures of a socket (``RpcFailure``, ``StreamEnded``) begin
    with the path they dialled (devctl.node.connect.RpcFailure): the notice
    names its subject once.
    """
    return reason if names_it else f"{name}: {reason}"


async def _never() -> str:
    await asyncio.Event().wait()
    return ""


def stream_end(socket: str, error: Exception | None, ended: str) -> StreamEnd:
    """Why a session of ``socket`` ended, typed: ``error``'s status, or the stream's own end (``ended``)."""
    if isinstance(error, RpcFailure):
        return StreamEnd(error.status, error.message)
    if isinstance(error, (AttributeError, TypeError)):
        # grpc.aio hands back None for a reply it cannot decode: another API on this socket.
        return StreamEnd(PluginStatus.UNREACHABLE, f"{socket}: the reply could not be decoded (not a device plugin)")
    if isinstance(error, StreamEnded):
        return StreamEnd(error.status, error.args[0])
    reason = ended if error is None else f"{type(error).__name__}: {error}"
    return StreamEnd(PluginStatus.UNREACHABLE, _named_once(socket, reason, names_it=False))


class Reconnecting:
    """What every followed stream shares: connect, follow, and after each end say why and try again with backoff.

    A device plugin's ListAndWatch (``Follower``) and a DRA driver's health
    stream (``watch.dra.DraFollower``) differ in how they connect and what
    they read; the bookkeeping around a session is this one loop: a
    ``disconnected`` event and a "reconnecting" notice when a live stream
    ends, a notice only when the reason changes while it stays down, the
    backoff reset after a stable connection, and ``settled`` for ``--once``.
    """

    ENDED = "stream ended"  # the reason when a stream ends without an error

    def __init__(self, out: Sink, *, wait: bool, once: bool, timeout: float, backoff: Backoff):
        self.out = out
        self.wait = wait
        # ``--once`` without ``wait`` gives up after the first failure: no "retrying" then.
        self.retries = wait or not once
        self.timeout = timeout
        self.backoff = backoff
        self.connected = False
        self.said: str | None = None  # the last notice given while not connected, not to repeat it
        # Set once the first list arrived, or (without wait) the first attempt failed: ``--once`` waits on it.
        self.settled = asyncio.Event()

    @property
    def name(self) -> str:
        raise NotImplementedError

    def _notice(self, message: str) -> None:
        raise NotImplementedError

    def _disconnected(self) -> None:
        """Emit the ``disconnected`` event, with the counts of the last list."""
        raise NotImplementedError

    async def _session(self) -> bool:
        """Connect and follow until the stream ends (True, or raise why); False: nothing to connect to yet."""
        raise NotImplementedError

    async def _ended(self) -> None:
        """Called after a session ended, before it is reported."""

    def _failed(self, error: Exception | None) -> None:
        """Called with why each session ended (None: the stream ended by itself), before the notice."""

    def _names_target(self, error: Exception | None) -> bool:
        """Whether ``error``'s message begins with this target's name (then the notice does not repeat it)."""
        return False

    async def _idle(self) -> None:
        await asyncio.sleep(self.backoff.next())

    async def run(self) -> None:
        """Follow the target for ever: connect, stream, and after a failure try again with backoff."""
        while True:
            started = time.monotonic()
            error: Exception | None = None
            try:
                if not await self._session():
                    await self._idle()
                    continue
                reason = self.ENDED
            except (StreamEnded, RpcFailure) as e:
                reason, error = e.args[0], e
            except Exception as e:  # one misbehaving plugin or driver must never end the watch of the others
                log.debug("watching %s failed", self.name, exc_info=True)
                reason, error = f"{type(e).__name__}: {e}", e
            await self._ended()
            self._failed(error)
            # Not kept while idle: its traceback holds this frame and the session's (a closed channel among them), a
            # cycle per failed attempt that a process with a high gc threshold (devctl.cli.start) frees late.
            why = _named_once(self.name, reason, self._names_target(error))
            error = None
            if self.connected:
                self.connected = False
                self._disconnected()
                self.said = f"{why}; reconnecting"
                self._notice(self.said)
                if time.monotonic() - started >= STABLE_AFTER:
                    self.backoff.reset()
            elif self.said != (message := f"{why}; retrying" if self.retries else why):
                self._notice(message)
                self.said = message
            if not self.wait:
                self.settled.set()
            await self._idle()


class Follower(Reconnecting):
    """One watched device-plugin target (a resource, or a socket) and the last device list known for it."""

    ENDED = "ListAndWatch stream ended"

    def __init__(
        self,
        out: Sink,
        name: Namer,
        *,
        resource: str | None,
        socket: str | None,
        scouts: Scouts | None,
        wait: bool,
        once: bool,
        timeout: float,
        backoff: Backoff,
        listener: Listener | None = None,
        watch_file: bool = True,
    ):
        super().__init__(out, wait=wait, once=once, timeout=timeout, backoff=backoff)
        self.listener = listener
        # Whether a live stream ends when its socket file is deleted or created again (SOCKET_POLL); off where the
        # caller's own discovery looks at the files already (the exporter), so no follower wakes up to look too.
        self.watch_file = watch_file
        self.namer = name
        self.resource = resource
        self.socket = socket
        self.scouts = scouts  # a resource's; a socket target (None) is dialled directly
        self.last: tuple[Device, ...] | None = None
        self.tally = (0, 0)  # (devices, healthy) of the last list

    @property
    def name(self) -> str:
        return self.resource or self.socket or "?"

    def _notice(self, message: str) -> None:
        self.out.put_nowait(Notice(now(), message, self.resource, self.socket))

    def _event(self, event: str, tally: tuple[int, int], change: Change | None = None) -> None:
        self.out.put_nowait(
            WatchEvent(
                time=now(),
                resource=self.resource,
                socket=self.socket,
                event=event,
                device=change.device if change else None,
                from_=change.from_ if change else None,
                to=change.to if change else None,
                devices=tally[0],
                healthy=tally[1],
            )
        )

    def _disconnected(self) -> None:
        self._event(DISCONNECTED, self.tally)

    def _names_target(self, error: Exception | None) -> bool:
        # Named by its socket until its resource is known; devctl's failures of the socket begin with its path.
        return self.resource is None and isinstance(error, (StreamEnded, RpcFailure))

    def _failed(self, error: Exception | None) -> None:
        if self.listener is not None and self.socket is not None:
            self.listener.ended(self.socket, stream_end(self.socket, error, self.ENDED))

    def _changes(self, devices: tuple[Device, ...]) -> None:
        """Emit what changed since the last list; counts are taken once per list, not per event."""
        changes = diff(self.last or (), devices)
        if changes:
            self.tally = counts(devices)
            for change in changes:
                self._event(change.event, self.tally, change)
        self.last = devices

    async def _connect(self) -> OpenStream | None:
        """A stream to follow now, with its first list read; None when nothing serves the target yet."""
        if self.scouts is None:
            if not exists(self.socket):
                return None
            assert self.socket is not None
            return await open_stream(self.socket, self.timeout, self.timeout)
        assert self.resource is not None
        opened = self.scouts.take(self.resource, self.socket)
        if opened is not None:
            served = self.scouts.serving(self.resource)
            if len(served) > 1 and self.socket not in served:
                self._notice(f"{self.resource} is served by {len(served)} sockets; following {opened.socket}")
            self.socket = opened.socket
        return opened

    async def _idle(self) -> None:
        if self.scouts is None:
            await asyncio.sleep(self.backoff.next())
        else:
            await self.scouts.changed(self.backoff.next())

    async def _session(self) -> bool:
        opened = await self._connect()
        if opened is None:
            # A resource is "not served" only once every socket has answered or timed out.
            if self.scouts is None or self.scouts.settled():
                message = f"waiting for {self.name} to be served" if self.resource else f"waiting for {self.name}"
                if self.said is None:
                    self._notice(message)
                    self.said = message
                if not self.wait:
                    self.settled.set()
            return False
        await self._follow(opened)
        return True

    async def _ended(self) -> None:
        if self.resource is None and self.socket is not None and self.last is not None:
            self.resource = await self.namer(self.socket, self.last)  # as late as possible: see _consume
        if self.scouts is not None and self.resource is not None:
            self.scouts.release(self.resource)

    async def _follow(self, opened: OpenStream) -> None:
        """Emit the stream's first list and every change; return or raise when the stream ends."""
        try:
            if self.resource is None:
                self.resource = await self.namer(opened.socket, opened.first)
            self._first_list(opened.first)
            if self.listener is not None:
                self.listener.listed(opened.socket, opened.first, opened.took)
            consume = asyncio.ensure_future(self._consume(opened))
            watched = self._until_replaced(opened.socket, opened.inode) if self.watch_file else _never()
            replaced = asyncio.ensure_future(watched)
            try:
                await asyncio.wait({consume, replaced}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (consume, replaced):
                    task.cancel()
                await asyncio.gather(consume, replaced, return_exceptions=True)
            if replaced.done() and not replaced.cancelled() and replaced.exception() is None:
                raise StreamEnded(replaced.result())
            consume.result()  # re-raises the RpcFailure that ended the stream
        finally:
            await opened.close()

    def _first_list(self, devices: tuple[Device, ...]) -> None:
        self.connected = True
        self.tally = counts(devices)
        if self.last is None:
            self._event(SNAPSHOT, self.tally)
            self.last = devices
        else:
            self._event(RECONNECTED, self.tally)
            self._changes(devices)
        self.settled.set()

    async def _consume(self, opened: OpenStream) -> None:
        told, told_at = opened.client.skipped, -SKIP_NOTICE_EVERY
        async for devices in opened.stream:
            if self.resource is None:
                # Not known at the first list (the node's sources had not answered yet): ask again, so that
                # later events, a disconnect among them, carry the resource as soon as it is known.
                self.resource = await self.namer(opened.socket, devices)
            self._changes(devices)
            if self.listener is not None:
                self.listener.listed(opened.socket, devices, None)
            skipped = opened.client.skipped
            if skipped != told and time.monotonic() - told_at >= SKIP_NOTICE_EVERY:
                self._notice(
                    f"{self.name}: behind the plugin; skipped {skipped - told} list(s) to show the newest"
                    " (their changes are folded into one diff)"
                )
                told, told_at = skipped, time.monotonic()

    async def _until_replaced(self, socket: str, inode: int | None) -> str:
        while True:
            await asyncio.sleep(SOCKET_POLL)
            current = inode_of(socket)
            if current is None:
                return f"{socket} was deleted (plugin or kubelet restart)"
            if current != inode:
                return f"{socket} was created again (plugin or kubelet restart)"


__all__ = [
    "BEHIND",
    "SCOUT_POLL",
    "SCOUT_RETRY",
    "SCOUT_RETRY_CAP",
    "SKIP_NOTICE_EVERY",
    "SOCKET_POLL",
    "STABLE_AFTER",
    "Follower",
    "Listener",
    "Reconnecting",
    "Scouts",
    "Sink",
    "StreamEnd",
    "StreamEnded",
    "WatchItem",
    "now",
    "stream_end",
]
