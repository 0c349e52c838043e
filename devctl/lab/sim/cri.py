"""The simulated node's container runtime: a CRI RuntimeService (runtime.v1) that names its pods and containers.

A container with ``waiting:`` in the scenario stays created, its status carrying that reason and message.
Serves ``ListPodSandbox``, ``ListContainers`` and ``ContainerStatus`` on
``<root>/run/containerd/containerd.sock`` as containerd does, with the IDs of
``devctl.lab.sim.workload``, so that ``crictl`` habits and ``devctl who`` agree.
Every other RuntimeService method answers UNIMPLEMENTED (the generated base).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import grpc

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.cri.runtime.v1 import api_pb2_grpc as cri_grpc
from devctl.lab import grpcserver, made
from devctl.lab.sim.ids import container_id, sandbox_id
from devctl.lab.sim.scenario import PodSpec

log = logging.getLogger("devctl.lab.sim")

SOCKET = "run/containerd/containerd.sock"


def _sandboxes(pods: tuple[PodSpec, ...], created: int) -> list[cri.PodSandbox]:
    return [
        cri.PodSandbox(
            id=sandbox_id(p.uid),
            metadata=cri.PodSandboxMetadata(name=p.name, uid=p.uid, namespace=p.namespace),
            state=cri.SANDBOX_READY,
            created_at=created,
            labels={
                "io.kubernetes.pod.name": p.name,
                "io.kubernetes.pod.namespace": p.namespace,
                "io.kubernetes.pod.uid": p.uid,
            },
        )
        for p in pods
    ]


def _containers(pods: tuple[PodSpec, ...], created: int) -> list[cri.Container]:
    return [
        cri.Container(
            id=container_id(p.uid, c.name),
            pod_sandbox_id=sandbox_id(p.uid),
            metadata=cri.ContainerMetadata(name=c.name),
            image=cri.ImageSpec(image=f"registry.example/{c.name}:latest"),
            state=cri.CONTAINER_RUNNING if c.waiting is None else cri.CONTAINER_CREATED,  # waiting: lab/sim/stuck.py
            created_at=created,
            labels={
                "io.kubernetes.container.name": c.name,
                "io.kubernetes.pod.name": p.name,
                "io.kubernetes.pod.namespace": p.namespace,
                "io.kubernetes.pod.uid": p.uid,
            },
        )
        for p in pods
        for c in p.containers
    ]


class _Runtime(cri_grpc.RuntimeServiceServicer):
    def __init__(self, pods: Callable[[], tuple[PodSpec, ...]]):
        self._pods = pods
        self._created = time.time_ns()

    async def ListPodSandbox(self, request: cri.ListPodSandboxRequest, context: object) -> cri.ListPodSandboxResponse:
        items = _sandboxes(self._pods(), self._created)
        f = request.filter
        items = [s for s in items if (not f.id or s.id == f.id) and f.label_selector.items() <= s.labels.items()]
        return cri.ListPodSandboxResponse(items=items)

    async def ListContainers(self, request: cri.ListContainersRequest, context: object) -> cri.ListContainersResponse:
        items = _containers(self._pods(), self._created)
        f = request.filter
        items = [
            c
            for c in items
            if (not f.id or c.id == f.id)
            and (not f.pod_sandbox_id or c.pod_sandbox_id == f.pod_sandbox_id)
            and f.label_selector.items() <= c.labels.items()
        ]
        return cri.ListContainersResponse(containers=items)

    async def ContainerStatus(
        self, request: cri.ContainerStatusRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> cri.ContainerStatusResponse:
        waiting = {container_id(p.uid, c.name): c.waiting for p in self._pods() for c in p.containers if c.waiting}
        for c in _containers(self._pods(), self._created):
            if c.id == request.container_id:
                reason, message = waiting.get(c.id, ("", ""))
                status = cri.ContainerStatus(
                    id=c.id,
                    metadata=c.metadata,
                    state=c.state,
                    created_at=c.created_at,
                    started_at=c.created_at,
                    image=c.image,
                    labels=c.labels,
                    reason=reason,
                    message=message,
                )
                return cri.ContainerStatusResponse(status=status)
        await context.abort(
            grpc.StatusCode.NOT_FOUND, f'an error occurred when try to find container "{request.container_id}"'
        )
        raise AssertionError("abort raises")


class RuntimeServer:
    """The CRI socket of the simulated node; ``pods`` gives the running pods at each call."""

    def __init__(self, socket_path: str, pods: Callable[[], tuple[PodSpec, ...]]):
        self.socket_path = socket_path
        self._pods = pods
        self._server: grpc.aio.Server | None = None
        self._identity: made.SocketId | None = None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self.socket_path), exist_ok=True)
        server = grpc.aio.server()
        cri_grpc.add_RuntimeServiceServicer_to_server(_Runtime(self._pods), server)
        try:
            made.add_private_port(server, self.socket_path)  # 0600 whatever the umask; a stale socket goes
        except RuntimeError:
            raise OSError(f"{self.socket_path}: cannot listen on this socket") from None
        self._identity = made.socket_identity(self.socket_path)  # bound by add_private_port
        self._server = server  # before it starts: a cancelled start still leaves it for stop() to shut down
        await grpcserver.start(server)
        log.info("CRI runtime serving on %s", self.socket_path)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        made.unlink_socket(self.socket_path, self._identity)
