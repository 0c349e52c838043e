"""Client of the container runtime's CRI socket (RuntimeService runtime.v1): pods and containers as crictl names them.

Only reads: ListPodSandbox and ListContainers (``crictl pods``, ``crictl ps -a``),
each under a deadline. The endpoint may be given as crictl takes it
(``unix:///run/containerd/containerd.sock`` or ``unix:/run/containerd/containerd.sock``) or as a plain path.
"""

from __future__ import annotations

import logging
import time

import grpc

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.cri.runtime.v1 import api_pb2_grpc as cri_grpc
from devctl.model import RuntimeContainer, RuntimeSandbox, RuntimeState
from devctl.node.paths import socket_of as socket_of  # re-exported: collect asks the runtime's socket here
from devctl.node.rpc import channel, failure, parsed

log = logging.getLogger(__name__)


def sandbox_state(value: int) -> str:
    names: dict[int, str] = {cri.SANDBOX_READY: "ready", cri.SANDBOX_NOTREADY: "notready"}
    return names.get(value, "unknown")


def container_state(value: int) -> str:
    names: dict[int, str] = {
        cri.CONTAINER_CREATED: "created",
        cri.CONTAINER_RUNNING: "running",
        cri.CONTAINER_EXITED: "exited",
        cri.CONTAINER_UNKNOWN: "unknown",
    }
    return names.get(value, "unknown")


async def list_pods(
    endpoint: str, timeout: float
) -> tuple[str, cri.ListPodSandboxResponse, cri.ListContainersResponse]:
    """The socket's path, and every pod sandbox and container the runtime lists (``crictl pods``, ``crictl ps
    -a``), each call under ``timeout``; raises RpcFailure (one line, a kind) on failure."""
    path = socket_of(endpoint)
    async with channel(path) as ch:
        stub = cri_grpc.RuntimeServiceStub(ch)
        start = time.perf_counter()
        try:
            pods = parsed(
                await stub.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=timeout),
                f"{path} ListPodSandbox",
                "ListPodSandboxResponse",
            )
            containers = parsed(
                await stub.ListContainers(cri.ListContainersRequest(), timeout=timeout),
                f"{path} ListContainers",
                "ListContainersResponse",
            )
        except grpc.aio.AioRpcError as e:
            log.debug("cri %s failed: %s", path, e.code().name)
            raise failure(e, f"{path} (CRI)", timeout) from None
        log.debug("cri %s: ListPodSandbox, ListContainers in %.1f ms", path, (time.perf_counter() - start) * 1000)
    return path, pods, containers


async def read_runtime(endpoint: str, timeout: float) -> RuntimeState:
    """Every pod sandbox and container the runtime knows; raises RpcFailure (one line, a kind) on failure."""
    path, pods, containers = await list_pods(endpoint, timeout)
    return RuntimeState(
        endpoint=path,
        sandboxes=tuple(
            RuntimeSandbox(
                id=p.id,
                name=p.metadata.name,
                namespace=p.metadata.namespace,
                uid=p.metadata.uid,
                state=sandbox_state(p.state),
            )
            for p in pods.items
        ),
        containers=tuple(
            RuntimeContainer(id=c.id, sandbox_id=c.pod_sandbox_id, name=c.metadata.name, state=container_state(c.state))
            for c in containers.containers
        ),
    )
