"""Channels to unix sockets, and gRPC failures turned into one-line errors.

Every client in ``node/`` opens its channel here so that the receive limit and
the way a failure is named are the same everywhere.
"""

from __future__ import annotations

import os
from typing import TypeVar

import grpc

from devctl.model import ErrorKind, PluginStatus

# The socket-level connect and the failure type live in a module without grpc (a missing socket needs no
# grpc to be told); the clients import them from here, with the channel.
from devctl.node.connect import RpcFailure as RpcFailure
from devctl.node.connect import check_socket as check_socket

# The kubelet sends pod-resources replies without limit; a node with many pods
# passes gRPC's 4 MiB default receive limit. A large ceiling costs nothing.
MAX_RECEIVE_BYTES = 256 * 1024 * 1024

CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
    # Unix sockets need no DNS or proxy; keep grpc from looking for either.
    ("grpc.enable_http_proxy", 0),
)


T = TypeVar("T")


def channel(socket_path: str) -> grpc.aio.Channel:
    """An insecure channel to a unix socket, created on the running loop."""
    return grpc.aio.insecure_channel(f"unix:{os.path.abspath(socket_path)}", options=CHANNEL_OPTIONS)


def failure(error: grpc.aio.AioRpcError, what: str, timeout: float | None = None) -> RpcFailure:
    """Name a failed RPC the way a person reads it: what failed, and why, on one line."""
    code = error.code()
    details = (error.details() or "").splitlines()[0] if error.details() else ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        after = f" after {timeout:g}s" if timeout else ""
        return RpcFailure(PluginStatus.TIMEOUT, f"{what}: no answer{after} (deadline exceeded)", code)
    if code == grpc.StatusCode.UNAVAILABLE:
        if "ermission denied" in details:
            return RpcFailure(PluginStatus.PERMISSION_DENIED, f"{what}: permission denied", code)
        if "onnection refused" in details:
            return RpcFailure(PluginStatus.STALE, f"{what}: stale socket (nothing listens on it)", code)
        if "No such file or directory" in details:
            return RpcFailure(PluginStatus.UNREACHABLE, f"{what}: no such socket", code, ErrorKind.MISSING)
        if "http1.x server" in details:  # gRPC's own words for a peer that answers HTTP/1.1
            return RpcFailure(PluginStatus.UNREACHABLE, f"{what}: speaks HTTP/1.x, not gRPC", code, ErrorKind.WRONG_API)
        return RpcFailure(PluginStatus.UNREACHABLE, f"{what}: unavailable: {details}", code)
    return RpcFailure(PluginStatus.UNREACHABLE, f"{what}: {code.name}: {details}", code, _CODE_KINDS.get(code))


# gRPC status codes that say what kind of failure it was, beyond "unreachable".
_CODE_KINDS = {
    grpc.StatusCode.UNIMPLEMENTED: ErrorKind.UNIMPLEMENTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorKind.RATE_LIMITED,
    grpc.StatusCode.PERMISSION_DENIED: ErrorKind.PERMISSION_DENIED,
}


def parsed(reply: T | None, what: str, message: str) -> T:
    """The reply, or a one-line failure when it did not parse as ``message``.

    grpc.aio does not raise for a reply it cannot deserialize: it logs the
    DecodeError and hands back None (grpc/_common.py, _transform). A socket that
    speaks another protocol or API version must not crash the caller.
    """
    if reply is None:
        raise RpcFailure(
            PluginStatus.UNREACHABLE,
            f"{what}: the reply is not a {message} (another API on this socket?)",
            kind=ErrorKind.WRONG_API,
        )
    return reply
