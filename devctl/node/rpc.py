"""Channels to unix sockets, and gRPC failures turned into one-line errors.

Every client in ``node/`` opens its channel here so that the receive limit and
the way a failure is named are the same everywhere.
"""

from __future__ import annotations

import os
import re
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

# The kubelet dials device plugins (pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go, dial), DRA
# drivers (pkg/kubelet/cm/dra/plugin, getOrCreateGRPCConn) and registration sockets
# (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go, dial) with no MaxCallRecvMsgSize, so
# grpc-go's default of 4 MiB holds: a plugin's reply above it never reaches the kubelet (its devices never
# reach the node's capacity). devctl reads these channels with the same limit, so that it shows what the
# kubelet sees and says why, instead of a list the kubelet cannot have.
KUBELET_RECEIVE_BYTES = 4 * 1024 * 1024


T = TypeVar("T")


def channel(socket_path: str, max_receive: int = MAX_RECEIVE_BYTES) -> grpc.aio.Channel:
    """An insecure channel to a unix socket, created on the running loop."""
    options = (
        ("grpc.max_receive_message_length", max_receive),
        # Unix sockets need no DNS or proxy; keep grpc from looking for either.
        ("grpc.enable_http_proxy", 0),
    )
    return grpc.aio.insecure_channel(f"unix:{os.path.abspath(socket_path)}", options=options)


def plugin_channel(socket_path: str) -> grpc.aio.Channel:
    """A channel to a device plugin, DRA driver or registration socket: it reads what the kubelet reads."""
    return channel(socket_path, KUBELET_RECEIVE_BYTES)


# gRPC's words (core's message_size_filter) for a reply above the channel's receive limit.
_LARGER_THAN_MAX = re.compile(r"Received message larger than max \((\d+) vs\. (\d+)\)")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n % 2**20 else f"{n // 2**20} MiB"


def _too_large(what: str, reply: str, size: int, limit: int, code: grpc.StatusCode) -> RpcFailure:
    """A reply above the receive limit: how large, and whose limit it is (the kubelet's, or devctl's own)."""
    if limit == KUBELET_RECEIVE_BYTES:
        why = f"above the {_mib(limit)} the kubelet reads (gRPC's default): the kubelet cannot read it either"
    else:
        why = f"above devctl's receive limit of {_mib(limit)}"
    return RpcFailure(PluginStatus.UNREACHABLE, f"{what}: {reply} of {_mib(size)}, {why}", code, ErrorKind.TOO_LARGE)


def failure(error: grpc.aio.AioRpcError, what: str, timeout: float | None = None, reply: str = "a reply") -> RpcFailure:
    """Name a failed RPC the way a person reads it: what failed, and why, on one line.

    ``reply`` names what the RPC answers with, for a reply too large to read ("a device list").
    """
    code = error.code()
    details = (error.details() or "").splitlines()[0] if error.details() else ""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and (large := _LARGER_THAN_MAX.search(details)):
        return _too_large(what, reply, int(large.group(1)), int(large.group(2)), code)
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
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorKind.RATE_LIMITED,  # a reply too large is told apart in ``failure``
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
