"""Whether the kubelet serves its local Pods API (KEP-4188, ``pods/v1alpha1``) on this node: a probe, no decoding yet.

Where the socket is, as read for this module: the consumers of the API in public repositories and the
kubernetes.io API page (its 1.37 translations) name ``<kubelet-dir>/pods-api/pods-api.sock``; the 1.35
alpha page named ``<kubelet-dir>/pods/kubelet.sock`` (../shared/docs/admission-contract.md). The
constant itself in kubernetes/kubernetes ``pkg/kubelet`` was not found with the search tools at hand,
so both paths are probed, the newer first. devctl does not decode the served Pod bytes yet: a socket
that listens is reported as "served, not read by devctl", so ``why`` never claims to know what it says.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from dataclasses import dataclass

from devctl.base.waits import within

SOCKETS = ("pods-api/pods-api.sock", "pods/kubelet.sock")  # under the kubelet dir, newest release's first


@dataclass(frozen=True)
class PodsApiProbe:
    """``path``: the socket that listens, None when none does; ``tried``: every path looked at; ``present``: those
    that are sockets (one there that does not listen is a failure; none there is an API simply not enabled)."""

    path: str | None
    tried: tuple[str, ...]
    present: tuple[str, ...] = ()


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


async def _listens(path: str, timeout: float) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await within(asyncio.get_running_loop().sock_connect(sock, path), timeout)
        return True
    except (OSError, TimeoutError, asyncio.TimeoutError):
        return False
    finally:
        sock.close()


async def probe(kubelet_dir: str, timeout: float) -> PodsApiProbe:
    """The first of ``SOCKETS`` that is a socket with a listener, under ``timeout`` each."""
    tried = tuple(os.path.join(kubelet_dir, s) for s in SOCKETS)
    present = tuple(p for p in tried if _is_socket(p))
    for path in present:
        if await _listens(path, timeout):
            return PodsApiProbe(path, tried, present)
    return PodsApiProbe(None, tried, present)
