"""The server of the control sockets (``devctl.node.control`` is the client): one JSON object per line each way.

``LineServer`` turns each request line into a call of ``answer`` and never dies
of a bad line. A control socket changes devices of a plugin the real kubelet
may schedule on, so it is its owner's alone whatever the umask: it is made
0600 in a directory of mode 0700 (``devctl.lab.made.private_dir``), and each
connection's peer credentials (SO_PEERCRED) are checked: the same user or
root, else the connection is refused with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from devctl.base.waits import within
from devctl.lab import made
from devctl.node.control import LINE_LIMIT

log = logging.getLogger(__name__)

Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

REFUSAL_LINGER = 1.0  # how long a refused connection is kept open for its peer to read why


class LineServer:
    """Answers each request line of each connection on ``path`` with ``await answer(request)``.

    A line that is not a JSON object, and an ``answer`` that raises, get an
    ``{"ok": false, "error": ...}`` reply: a bad request must not take the
    process that serves it down.
    """

    def __init__(self, path: str, answer: Answer):
        self.path = path
        self.answer = answer
        self._server: asyncio.AbstractServer | None = None
        self._identity: made.SocketId | None = None

    async def start(self) -> None:
        """Listen on ``path``: OSError (one line) when its directory is not ours or the path is taken.

        Only a stale socket (left by a killed process) is replaced; a live one,
        a regular file or anything else at the path is refused, never removed.
        """
        made.check_socket_path(self.path)
        made.private_dir(os.path.dirname(self.path))
        made.clear_for_bind(self.path)
        # Bound here, not by asyncio: the mode is set before it listens, and the socket is known as ours
        # (so stop removes it) even when a cancellation comes while the server starts.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            made.bind_private(sock, self.path)
        except BaseException:
            sock.close()
            raise
        self._identity = made.socket_identity(self.path)
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=LINE_LIMIT)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        made.unlink_socket(self.path, self._identity)
        self._identity = None

    def _refusal(self, writer: asyncio.StreamWriter) -> str | None:
        """Why this connection may not use the socket (another user, not root), or None."""
        sock = writer.get_extra_info("socket")
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except (AttributeError, OSError):
            return "its peer credentials cannot be read"
        pid, uid, _ = struct.unpack("3i", raw)
        me = os.geteuid()
        if uid in (0, me):
            return None
        log.warning(
            "%s: refused a connection of uid %d (pid %d): only uid %d and root may use it",
            self.path,
            uid,
            pid,
            me,
        )
        return f"permission denied: only uid {me} and root may use this socket"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        refused = self._refusal(writer)
        try:
            if refused is not None:
                writer.write(json.dumps({"ok": False, "refused": True, "error": refused}).encode() + b"\n")
                writer.write_eof()
                # Read what it sent until it hangs up (bounded): closing with its request unread
                # would reset the connection before it reads why it was refused.
                with contextlib.suppress(asyncio.TimeoutError):
                    await within(reader.read(LINE_LIMIT), REFUSAL_LINGER)
                return
            while line := await reader.readline():
                writer.write(json.dumps(await self._reply(line)).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass  # the client went away, or sent a line past the limit
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _reply(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "not a JSON line"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "a request is a JSON object"}
        try:
            return await self.answer(request)
        except Exception as e:  # any failure of one request becomes its reply
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
