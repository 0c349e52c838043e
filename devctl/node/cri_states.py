"""One pod's sandboxes and containers as the CRI runtime has them, with each container's reason and message.

``crictl pods --label io.kubernetes.pod.name=… --label io.kubernetes.pod.namespace=…``, then
``crictl ps -a --pod ID`` and ``crictl inspect`` (ContainerStatus, not verbose) for each container: the
state, the reason and message the runtime gives (``CreateContainerError``-like words when the runtime
keeps a created container that failed, ``Error``/``OOMKilled`` with an exit code for an exited one).
Only reads, each call under the deadline; at most ``MAX_CONTAINERS`` statuses are asked for.
"""

from __future__ import annotations

import time

import grpc

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.cri.runtime.v1 import api_pb2_grpc as cri_grpc
from devctl.model.runtime import ContainerState, PodRuntimeState, SandboxState
from devctl.node.cri import container_state, sandbox_state
from devctl.node.paths import socket_of
from devctl.node.rpc import channel, failure, parsed

MAX_CONTAINERS = 64
POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"


def iso(nanoseconds: int) -> str | None:
    """A CRI timestamp (Unix nanoseconds) as UTC ISO 8601 to the second; None for 0."""
    if nanoseconds <= 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(nanoseconds / 1e9))


async def pod_states(endpoint: str, timeout: float, namespace: str, name: str) -> PodRuntimeState:
    """The pod's sandboxes and containers; raises RpcFailure (one line, a kind) on failure."""
    path = socket_of(endpoint)
    selector = {POD_NAME: name, POD_NAMESPACE: namespace}
    async with channel(path) as ch:
        stub = cri_grpc.RuntimeServiceStub(ch)
        try:
            pods = parsed(
                await stub.ListPodSandbox(
                    cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(label_selector=selector)), timeout=timeout
                ),
                f"{path} ListPodSandbox",
                "ListPodSandboxResponse",
            )
            items = sorted(pods.items, key=lambda p: -p.created_at)
            found = [p for p in items if p.metadata.name == name and p.metadata.namespace == namespace]
            containers = await _containers(stub, path, [p.id for p in found], timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"{path} (CRI)", timeout) from None
    sandboxes = tuple(SandboxState(p.id, p.metadata.uid, sandbox_state(p.state), iso(p.created_at)) for p in found)
    return PodRuntimeState(path, sandboxes, containers)


async def _containers(
    stub: cri_grpc.RuntimeServiceStub, path: str, sandbox_ids: list[str], timeout: float
) -> tuple[ContainerState, ...]:
    out: list[ContainerState] = []
    for sandbox in sandbox_ids:
        listed = parsed(
            await stub.ListContainers(
                cri.ListContainersRequest(filter=cri.ContainerFilter(pod_sandbox_id=sandbox)), timeout=timeout
            ),
            f"{path} ListContainers",
            "ListContainersResponse",
        )
        for c in listed.containers:
            if len(out) >= MAX_CONTAINERS:
                return tuple(out)
            out.append(await _status(stub, path, c, timeout))
    return tuple(out)


async def _status(stub: cri_grpc.RuntimeServiceStub, path: str, c: cri.Container, timeout: float) -> ContainerState:
    state = ContainerState(
        c.id,
        c.pod_sandbox_id,
        c.metadata.name,
        container_state(c.state),
        attempt=c.metadata.attempt,
        created_at=iso(c.created_at),
    )
    try:
        reply = await stub.ContainerStatus(cri.ContainerStatusRequest(container_id=c.id), timeout=timeout)
    except grpc.aio.AioRpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:  # gone between the list and the status
            return state
        raise
    s = parsed(reply, f"{path} ContainerStatus", "ContainerStatusResponse").status
    return ContainerState(
        state.id,
        state.sandbox_id,
        state.name,
        container_state(s.state) if s.id else state.state,
        reason=s.reason,
        message=s.message,
        exit_code=s.exit_code if s.state == cri.CONTAINER_EXITED else None,
        attempt=state.attempt,
        created_at=state.created_at,
    )
