"""The socket-level side of reaching a node's sockets: connect once, and the failure every source reports.

Kept apart from devctl.node.rpc, which imports grpc: a socket that is missing,
stale or forbidden is told by a stat and one connect, so a read of a node
whose sockets are absent (no kubelet, no plugins) never loads grpc, protobuf
or the generated stubs, most of a cold start's cost (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from typing import TYPE_CHECKING

from devctl.base.errors import DevctlError
from devctl.base.waits import within
from devctl.model import ErrorKind, PluginStatus

if TYPE_CHECKING:
    import grpc


class RpcFailure(DevctlError):
    """A source that failed: the status devctl shows for it, a one-line message, and its kind.

    A failure of a call on a socket begins with the path dialled ("/p/gpu.sock: stale socket", "/p/gpu.sock
    ListAndWatch: ..."): the follower names a socket's failure once on that promise, not by reading the words.
    """

    def __init__(
        self,
        status: PluginStatus,
        message: str,
        code: grpc.StatusCode | None = None,
        kind: ErrorKind | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.kind = kind if kind is not None else status.failure_kind()


def _kind(path: str) -> str:
    """What sits at ``path``: socket, directory, regular file, other file, or missing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a regular file" if stat.S_ISREG(mode) else "another kind of file"


async def check_socket(socket_path: str, timeout: float) -> None:
    """Connect once at the socket level, to tell a missing, stale or forbidden socket apart.

    gRPC reports all of these as UNAVAILABLE; the person at the node needs to know which.
    """
    try:
        _, writer = await within(asyncio.open_unix_connection(socket_path), timeout)
    except FileNotFoundError:
        raise RpcFailure(PluginStatus.UNREACHABLE, f"{socket_path}: no such socket", kind=ErrorKind.MISSING) from None
    except PermissionError:
        raise RpcFailure(PluginStatus.PERMISSION_DENIED, f"{socket_path}: permission denied") from None
    except ConnectionRefusedError:
        # Linux refuses a connect to a regular file the same way as to a dead socket.
        kind = _kind(socket_path)
        if kind not in ("socket", "missing"):
            raise RpcFailure(
                PluginStatus.UNREACHABLE, f"{socket_path}: not a socket ({kind})", kind=ErrorKind.NOT_A_SOCKET
            ) from None
        raise RpcFailure(PluginStatus.STALE, f"{socket_path}: stale socket (nothing listens on it)") from None
    except asyncio.TimeoutError:
        raise RpcFailure(PluginStatus.TIMEOUT, f"{socket_path}: connect timed out after {timeout:g}s") from None
    except OSError as e:
        if e.errno == errno.ENOTSOCK:
            message = f"{socket_path}: not a socket"
            raise RpcFailure(PluginStatus.UNREACHABLE, message, kind=ErrorKind.NOT_A_SOCKET) from None
        if e.errno == errno.ECONNREFUSED:
            raise RpcFailure(PluginStatus.STALE, f"{socket_path}: not a listening socket") from None
        raise RpcFailure(PluginStatus.UNREACHABLE, f"{socket_path}: {e.strerror or e}") from None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


__all__ = ["RpcFailure", "check_socket"]
