"""The scouts: one stream per socket that may serve a resource, dialled ahead, so a follower takes the right one.

A follower of a resource (not of a socket) asks ``Scouts`` which socket serves it now; each socket in the
plugins dir is dialled once, retried with backoff after a failure, and forgotten when its file goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from devctl.base.backoff import Backoff
from devctl.base.waits import within
from devctl.core.watch.sockets import Namer, Registered, inode_of, plugin_sockets
from devctl.core.watch.stream import (
    SCOUT_POLL,
    SCOUT_RETRY,
    SCOUT_RETRY_CAP,
    OpenStream,
    open_stream,
)

log = logging.getLogger(__name__)


@dataclass
class Scouted:
    inode: int | None
    settled: bool = False  # answered, failed, or passed its deadline
    resource: str | None = None
    named: bool = False
    retry_at: float | None = None  # for a failed dial: when to try again
    task: asyncio.Future[None] | None = None


class Scouts:
    """Dial every socket of the plugins dir at once and name each from its own first list.

    A socket found to serve a wanted resource keeps its stream open for that
    resource's follower (``take``); the others are closed. A hung socket holds
    nobody up: it is only "settled" once its deadline passes, and if it
    answers later still, it is named then and joins the watch.
    """

    def __init__(
        self,
        plugins_dir: str,
        wanted: set[str],
        name: Namer,
        timeout: float,
        root: str | None = None,
        registered: Registered | None = None,
    ):
        self.plugins_dir = plugins_dir
        self.root = root
        self.registered = registered  # device plugins registered in plugins_registry/: their sockets are dialled too
        self.wanted = wanted
        self.name = name
        self.timeout = timeout
        self.scanned = False
        self._seen: dict[str, Scouted] = {}
        self._handoff: dict[str, OpenStream] = {}
        self._changed = asyncio.Event()
        self._closing: set[asyncio.Future[None]] = set()  # streams being closed, kept from the collector
        self._retries: dict[str, Backoff] = {}  # each socket's delays after failed or unnamed dials in a row

    def _notify(self) -> None:
        self._changed.set()

    async def changed(self, timeout: float) -> None:
        """Return when something was found or failed, or after ``timeout``."""
        self._changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await within(self._changed.wait(), timeout)

    def serving(self, resource: str) -> list[str]:
        return sorted(s for s, seen in self._seen.items() if seen.named and seen.resource == resource)

    def names(self) -> set[str | None]:
        return {seen.resource for seen in self._seen.values() if seen.named}

    def settled(self) -> bool:
        """Every socket listed so far (and every registration's) has answered, failed, or passed its deadline."""
        if self.registered is not None and not (
            self.registered.settled() and all(s in self._seen for s in self.registered.sockets())
        ):
            return False
        return self.scanned and all(seen.settled for seen in self._seen.values())

    def take(self, resource: str, prefer: str | None) -> OpenStream | None:
        """An open stream of a socket serving ``resource`` (``prefer``'s when it is one), or None."""
        ready = [s for s in self.serving(resource) if s in self._handoff]
        if not ready:
            return None
        return self._handoff.pop(prefer if prefer in ready else ready[0])

    def release(self, resource: str) -> None:
        """Dial the sockets of ``resource`` again: its stream ended, and it may come back on any of them."""
        for socket in self.serving(resource):
            self._forget(socket)

    async def run(self) -> None:
        try:
            while True:
                self._scan()
                await asyncio.sleep(SCOUT_POLL)
        finally:
            for seen in self._seen.values():
                if seen.task is not None:
                    seen.task.cancel()
            for opened in self._handoff.values():
                await opened.close()
            self._handoff.clear()

    def _listed(self) -> list[str]:
        listed = plugin_sockets(self.plugins_dir, self.root)
        if self.registered is None:
            return listed
        return list(dict.fromkeys([*listed, *self.registered.sockets()]))

    def _scan(self) -> None:
        listed = self._listed()
        for socket in set(self._seen) - set(listed):
            self._forget(socket)
        for socket in listed:
            inode = inode_of(socket)
            seen = self._seen.get(socket)
            if seen is not None and seen.inode == inode and (seen.retry_at is None or time.monotonic() < seen.retry_at):
                continue
            if seen is not None:
                self._forget(socket)
            seen = self._seen[socket] = Scouted(inode)
            seen.task = asyncio.ensure_future(self._scout(socket, seen))
        if not self.scanned:
            self.scanned = True
            self._notify()

    def _retry_at(self, socket: str) -> float:
        """When to dial a socket again that failed or could not be named: sooner at first, then less often."""
        backoff = self._retries.setdefault(socket, Backoff(SCOUT_RETRY, SCOUT_RETRY_CAP, jitter=0.0))
        return time.monotonic() + backoff.next()

    def _forget(self, socket: str) -> None:
        seen = self._seen.pop(socket)
        if seen.task is not None:
            seen.task.cancel()
        opened = self._handoff.pop(socket, None)
        if opened is not None:
            closing = asyncio.ensure_future(opened.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        self._notify()

    async def _scout(self, socket: str, seen: Scouted) -> None:
        def passed_deadline() -> None:
            seen.settled = True
            self._notify()

        deadline = asyncio.get_running_loop().call_later(self.timeout, passed_deadline)
        try:
            opened = await open_stream(socket, self.timeout, None)
        except Exception as e:  # stale, hung past nothing, another API: a socket that does not serve, for now
            log.debug("scouting %s: %s", socket, e)
            seen.settled = True
            seen.retry_at = self._retry_at(socket)
            self._notify()
            return
        finally:
            deadline.cancel()
        try:
            seen.resource = await self.name(socket, opened.first)
        except BaseException:
            await opened.close()
            raise
        seen.named = seen.settled = True
        if seen.resource is None:
            seen.retry_at = self._retry_at(socket)  # the kubelet may learn its devices later
        else:
            self._retries.pop(socket, None)
        if seen.resource in self.wanted and self._seen.get(socket) is seen:
            self._handoff[socket] = opened
        else:
            await opened.close()
        self._notify()
