"""Starting a grpc.aio server so that a cancellation (a Ctrl-C during start-up) never leaves it half-started.

A grpc.aio server cancelled inside ``start()`` can be neither used nor
stopped: its own shutdown then fails with ``InvalidStateError``, and when it
is garbage-collected after the loop closed, Python prints "coroutine
'AioServer.shutdown' was never awaited". So the start always runs to its
end; a cancellation that came meanwhile is raised right after, when the caller
holds a started server that its ``stop`` can shut down cleanly.
"""

from __future__ import annotations

import asyncio

import grpc


async def start(server: grpc.aio.Server) -> None:
    """``await server.start()`` to its end even when cancelled meanwhile; then re-raise the cancellation."""
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
