"""JSON lines on a unix socket: the control path of the in-process plugins and of the simulator, as a client.

One JSON object per line each way; one connection may carry many requests. A
line protocol on a plain unix socket keeps control free of gRPC, and anyone can
drive it with ``socat`` when devctl is not at hand. ``request`` asks once under
one deadline and turns every way that fails into a ``ControlSocketError`` whose
message is one line naming the socket. The server side is
``devctl.lab.lineserver``: only the lab serves a control socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.waits import within

LINE_LIMIT = 16 * 1024 * 1024  # a device list of thousands of devices still fits in one line


class ControlSocketError(DevctlError):
    """A control socket could not be asked or gave no usable answer; ``str()`` is ``<path>: <reason>``."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class NotListening(ControlSocketError):
    """Nothing listens there: no socket, or one left by a process that was killed."""


class AccessDenied(ControlSocketError):
    """The socket belongs to another user; said apart so that callers can suggest root."""


async def request(path: str, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """Send one request to the socket at ``path`` and return the reply object.

    ``timeout`` bounds the whole exchange (connect, send, answer). NotListening
    when no socket is there or nothing accepts on it, AccessDenied when we may
    not connect, ControlSocketError when no answer comes in time or the answer
    is not a JSON object.
    """
    try:
        line = await within(_exchange(path, message), timeout)
    except FileNotFoundError:
        raise NotListening(path, "no such socket") from None
    except ConnectionRefusedError:
        raise NotListening(path, "connection refused (nothing listens)") from None
    except PermissionError:
        raise AccessDenied(path, "permission denied") from None
    except asyncio.TimeoutError:
        raise ControlSocketError(path, f"no answer within {timeout:g}s") from None
    except (OSError, ValueError) as e:  # ValueError: an answer past LINE_LIMIT
        raise ControlSocketError(path, f"the connection broke: {getattr(e, 'strerror', None) or e}") from None
    if not line:
        raise ControlSocketError(path, "closed without an answer")
    try:
        reply = json.loads(line)
    except ValueError:
        raise ControlSocketError(path, "the answer is not JSON") from None
    if not isinstance(reply, dict):
        raise ControlSocketError(path, "the answer is not a JSON object")
    if reply.get("refused") is True:
        raise AccessDenied(path, str(reply.get("error") or "permission denied"))
    return reply


async def _exchange(path: str, message: Mapping[str, Any]) -> bytes:
    reader, writer = await asyncio.open_unix_connection(path, limit=LINE_LIMIT)
    try:
        writer.write(json.dumps(dict(message)).encode() + b"\n")
        await writer.drain()
        return await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
