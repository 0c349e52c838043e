"""The reason and message the CRI runtime gives for a few containers (``crictl inspect``'s, not verbose).

For doctor's pod-level findings: only the containers the runtime lists as not running are asked about
(ContainerStatus each, at most ``MAX_ASKED``, all at once under one deadline), so a healthy node costs no call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.cri.runtime.v1 import api_pb2_grpc as cri_grpc
from devctl.node.paths import socket_of
from devctl.node.rpc import channel, failure, parsed

MAX_ASKED = 64


async def container_reasons(endpoint: str, timeout: float, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """container ID -> (reason, message) for ``ids`` (the first ``MAX_ASKED``); a container gone meanwhile is left
    out. Raises RpcFailure (one line, a kind) when the runtime fails."""
    if not ids:
        return {}
    path = socket_of(endpoint)
    async with channel(path) as ch:
        stub = cri_grpc.RuntimeServiceStub(ch)

        async def one(cid: str) -> tuple[str, tuple[str, str] | None]:
            try:
                reply = await stub.ContainerStatus(cri.ContainerStatusRequest(container_id=cid), timeout=timeout)
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:
                    return cid, None
                raise failure(e, f"{path} (CRI)", timeout) from None
            s = parsed(reply, f"{path} ContainerStatus", "ContainerStatusResponse").status
            return cid, (s.reason, s.message)

        got = await asyncio.gather(*(one(cid) for cid in ids[:MAX_ASKED]))
    return {cid: found for cid, found in got if found is not None}
