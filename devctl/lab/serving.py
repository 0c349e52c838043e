"""The lab's one way to serve gRPC servicers on a unix socket and to stop serving them.

Every gRPC server of the lab (the simulated kubelet's registration, pod-resources
and CRI sockets, the in-process device plugin, the DRA driver's two sockets) is a
:class:`UnixGrpcServer`: its directory made if asked, its socket bound 0600 from
its first moment whatever the umask with only a stale socket removed first
(:func:`devctl.lab.made.add_private_port`), the servicers added, the server
started to its end even when cancelled meanwhile (:func:`start_to_end`), and on
stop shut down with the caller's grace and its socket unlinked only if it is
still the one bound. What each server logs, and when, stays with it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from devctl.base.errors import DevctlError
from devctl.lab import made

_Self = TypeVar("_Self", bound="StartStop")


class StartStop:
    """A thing with ``start`` and ``stop`` that ``async with`` starts and stops: the lab's servers and its node."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _Self) -> _Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class BindError(DevctlError, OSError):
    """gRPC could not bind the socket; ``str()`` is one line saying what is in the way."""

    def __init__(self, path: str):
        self.message = f"cannot bind {path}: {made.bind_failure(path)}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


async def start_to_end(server: grpc.aio.Server) -> None:
    """``await server.start()`` to its end even when cancelled meanwhile; then re-raise the cancellation.

    A grpc.aio server cancelled inside ``start()`` can be neither used nor
    stopped: its own shutdown then fails with ``InvalidStateError``, and when it
    is garbage-collected after the loop closed, Python prints "coroutine
    'AioServer.shutdown' was never awaited". So the start always runs to its
    end; a cancellation that came meanwhile is raised right after, when the
    caller holds a started server that its ``stop`` can shut down cleanly.
    """
    starting = asyncio.ensure_future(server.start())
    cancelled = False
    while True:
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            if starting.done() and starting.cancelled():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError


class UnixGrpcServer(StartStop):
    """The servicers ``add`` puts on a grpc.aio server, served on the unix socket at ``path``.

    ``grace`` is what ``stop`` gives calls in flight (None: cancelled at once);
    ``options`` and ``interceptors`` go to ``grpc.aio.server`` as given;
    ``dir_mode``, when set, makes the socket's directory (and missing parents)
    with that mode before binding. Not thread-safe: one event loop.
    """

    def __init__(
        self,
        path: str,
        add: Callable[[grpc.aio.Server], None],
        *,
        grace: float | None,
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
        dir_mode: int | None = None,
    ):
        self.path = path
        self.grace = grace
        self._add = add
        self._options = tuple(options)
        self._interceptors = tuple(interceptors)
        self._dir_mode = dir_mode
        self._server: grpc.aio.Server | None = None
        self.identity: made.SocketId | None = None  # the socket bound at ``path`` (made.socket_identity)

    @property
    def running(self) -> bool:
        """Whether a server was bound and not stopped since (it may still be starting)."""
        return self._server is not None

    def still_bound(self) -> bool:
        """Whether it runs and the socket at ``path`` is still the one it bound (a restarting kubelet removes it)."""
        return self._server is not None and made.socket_identity(self.path) == self.identity

    async def start(self) -> None:
        """Bind and start: PathTaken when what is at ``path`` may not be removed, BindError when gRPC cannot bind."""
        if self._dir_mode is not None:
            os.makedirs(os.path.dirname(self.path), self._dir_mode, exist_ok=True)
        server = grpc.aio.server(interceptors=self._interceptors or None, options=self._options or None)
        self._add(server)
        try:
            made.add_private_port(server, self.path)  # 0600 whatever the umask; only a stale socket goes
        except RuntimeError:
            # gRPC's own message only says that binding failed; say what is in the way.
            raise BindError(self.path) from None
        self.identity = made.socket_identity(self.path)  # bound by add_private_port
        self._server = server  # before it starts: a cancelled start still leaves it for stop() to shut down
        await start_to_end(server)

    async def stop(self) -> None:
        """Stop serving (calls in flight get ``grace``) and unlink the socket if it is still ours. Safe twice."""
        if self._server is None:
            return
        server, self._server = self._server, None
        await server.stop(self.grace)
        # gRPC unlinks only the temporary name it bound; the path is ours to remove, if it is still our socket.
        made.unlink_socket(self.path, self.identity)
        self.identity = None
