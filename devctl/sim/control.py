"""The running simulator's control socket ``<root>/run/devctl/sim.ctl``, so another shell can drive it.

One JSON object per line each way, as the plugins' control sockets
(``devctl.plugin.control``) speak:

    {"op": "info"}                           -> {"ok": true, "root": ..., "resources": [...], "pods": [...], ...}
    {"op": "restart-kubelet", "wait": true}  -> {"ok": true, "registered": [...]} | {"ok": false, "error": "..."}

``devctl sim restart-kubelet`` is the client; ``socat`` works too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]

LINE_LIMIT = 1024 * 1024


class SimNotRunning(Exception):
    """No simulator answers at that root; the message is one line."""


def control_socket(root: str) -> str:
    """Where the simulator of ``root`` listens: ``<root>/run/devctl/sim.ctl``."""
    return os.path.join(root, "run", "devctl", "sim.ctl")


class SimControlServer:
    """Answers control requests with ``handlers[op](request)``; one connection may send many lines."""

    def __init__(self, path: str, handlers: Mapping[str, Handler]):
        self.path = path
        self.handlers = dict(handlers)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # left by a simulator that was killed; start() checked none answers
        self._server = await asyncio.start_unix_server(self._serve, self.path, limit=LINE_LIMIT)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(json.dumps(await self._answer(line)).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "not a JSON line"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "a request is a JSON object with an 'op'"}
        handler = self.handlers.get(str(request.get("op")))
        if handler is None:
            return {"ok": False, "error": f"unknown op {request.get('op')!r}; known: {', '.join(self.handlers)}"}
        try:
            return await handler(request)
        except Exception as e:  # a failed request must not take the simulator down
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}


async def request(root: str, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """Send one request to the simulator of ``root``; SimNotRunning when none answers there."""
    path = control_socket(root)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path, limit=LINE_LIMIT), timeout)
    except FileNotFoundError:
        raise SimNotRunning(f"no simulated node runs at {root} (no {path}); start one with: devctl sim") from None
    except (ConnectionRefusedError, OSError, asyncio.TimeoutError) as e:
        why = "connect timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or str(e))
        raise SimNotRunning(f"no simulated node answers at {root} ({path}: {why})") from None
    try:
        writer.write(json.dumps(dict(message)).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
    except asyncio.TimeoutError:
        raise SimNotRunning(f"the simulated node at {root} did not answer within {timeout:g}s") from None
    except (ConnectionError, asyncio.LimitOverrunError, ValueError) as e:
        raise SimNotRunning(f"the simulated node at {root} broke the connection: {e}") from None
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    if not line:
        raise SimNotRunning(f"the simulated node at {root} closed the connection without an answer")
    try:
        reply = json.loads(line)
    except ValueError:
        raise SimNotRunning(f"the simulated node at {root} answered something that is not JSON") from None
    return reply if isinstance(reply, dict) else {"ok": False, "error": "the answer is not a JSON object"}
