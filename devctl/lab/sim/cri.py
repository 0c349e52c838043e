"""The simulated node's container runtime: a CRI RuntimeService (runtime.v1) that names its pods and containers.

A container with ``waiting:`` in the scenario stays created, its status carrying that reason and message.
Serves ``ListPodSandbox``, ``ListContainers`` and ``ContainerStatus`` on
``<root>/run/containerd/containerd.sock`` as containerd does, with the IDs of
``devctl.lab.sim.workload``, so that ``crictl`` habits and ``devctl who`` agree.
Every other RuntimeService method answers UNIMPLEMENTED (the generated base).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import grpc

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.cri.runtime.v1 import api_pb2_grpc as cri_grpc
from devctl.lab import serving
from devctl.lab.sim.ids import container_id, sandbox_id
from devctl.lab.sim.scenario import PodSpec

log = logging.getLogger("devctl.lab.sim")

SOCKET = "run/containerd/containerd.sock"
# The scenario's pods were running before the node is first looked at: created half an hour before it started
# (after its "boot", an hour before: lab/sim/kmsg.py), so its start-up kernel lines (an Xid on a held GPU) come
# while they hold their devices, as on a node that has been up a while. A pod added later is created then.
RUNNING_BEFORE_START_NS = 30 * 60 * 10**9


def _sandboxes(pods: tuple[PodSpec, ...], created: Callable[[str], int]) -> list[cri.PodSandbox]:
    return [
        cri.PodSandbox(
            id=sandbox_id(p.uid),
            metadata=cri.PodSandboxMetadata(name=p.name, uid=p.uid, namespace=p.namespace),
            state=cri.SANDBOX_READY,
            created_at=created(p.uid),
            labels={
                "io.kubernetes.pod.name": p.name,
                "io.kubernetes.pod.namespace": p.namespace,
                "io.kubernetes.pod.uid": p.uid,
            },
        )
        for p in pods
    ]


def _containers(pods: tuple[PodSpec, ...], created: Callable[[str], int]) -> list[cri.Container]:
    return [
        cri.Container(
            id=container_id(p.uid, c.name),
            pod_sandbox_id=sandbox_id(p.uid),
            metadata=cri.ContainerMetadata(name=c.name),
            image=cri.ImageSpec(image=f"registry.example/{c.name}:latest"),
            state=cri.CONTAINER_RUNNING if c.waiting is None else cri.CONTAINER_CREATED,  # waiting: lab/sim/stuck.py
            created_at=created(p.uid),
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
    def __init__(self, pods: Callable[[], tuple[PodSpec, ...]], since: dict[str, int]):
        self._pods = pods
        self._since = since  # the server's: pod UID -> when it was created (ns)

    def _created(self, uid: str) -> int:
        """When the pod (its sandbox and containers) was created: before the start, or when it first showed."""
        return self._since.setdefault(uid, time.time_ns())

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
    """The CRI socket of the simulated node; ``pods`` gives the running pods at each call, ``scenario_pods`` the
    UIDs of the scenario's own pods (created before the start: ``RUNNING_BEFORE_START_NS``)."""

    def __init__(
        self, socket_path: str, pods: Callable[[], tuple[PodSpec, ...]], scenario_pods: frozenset[str] = frozenset()
    ):
        self.socket_path = socket_path
        self._pods = pods
        started = time.time_ns()
        self._since = {uid: started - RUNNING_BEFORE_START_NS for uid in scenario_pods}
        self._serving = serving.UnixGrpcServer(socket_path, self._add, grace=None, dir_mode=0o777)

    def _add(self, server: grpc.aio.Server) -> None:
        cri_grpc.add_RuntimeServiceServicer_to_server(_Runtime(self._pods, self._since), server)

    def pod_started(self, uid: str) -> None:
        """A pod added now is created now: a UID the scenario derives from the pod's name comes back with a new
        time when the pod is deleted and added again (its kernel lines before that were not its own)."""
        self._since[uid] = time.time_ns()

    def pod_ended(self, uid: str) -> None:
        self._since.pop(uid, None)

    async def start(self) -> None:
        await self._serving.start()
        log.info("CRI runtime serving on %s", self.socket_path)

    async def stop(self) -> None:
        await self._serving.stop()
