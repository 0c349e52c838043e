"""The simulated kubelet's pod-resources socket: PodResourcesLister v1 and v1alpha1.

It answers the way the kubelet's server does (pkg/kubelet/apis/podresources/
server_v1.go, server_v1alpha1.go and grpc/ratelimit.go), so that devctl's client
meets here the rate limit, the disabled ``Get``, the per-device-per-NUMA entries
and the unlimited reply size it meets on a real node. What the node holds comes
from a ``PodResourcesState`` (the simulated device manager); this module only
turns it into the wire.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import grpc

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1
from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    DynamicResource,
    PodResources,
)
from devctl.sim.ratelimit import DEFAULT_BURST, DEFAULT_RATE, TokenBucket

log = logging.getLogger(__name__)

APIS = ("v1", "v1alpha1")

# A unix socket path must fit sockaddr_un.sun_path (108 bytes with the NUL).
MAX_SOCKET_PATH = 107

# The kubelet's answers, verbatim: status RESOURCE_EXHAUSTED from grpc/ratelimit.go,
# and plain Go errors (status UNKNOWN) from server_v1.go's Get.
RATE_LIMITED = "rejected by rate limit"
GET_DISABLED = "PodResources API Get method disabled"

# In-flight calls finish in microseconds; this only bounds a stop during a storm.
STOP_GRACE = 1.0


class PodResourcesState(Protocol):
    """What the node holds, asked afresh on every call."""

    def pods(self) -> tuple[PodResources, ...]:
        """Active pods with what each container holds."""
        ...

    def allocatable(self) -> AllocatableResources:
        """Healthy devices only, plus allocatable CPUs and memory."""
        ...


# --- model -> protobuf (the reverse of devctl.node.convert) ----------------------------


def _topology(numa_nodes: Iterable[int]) -> v1.TopologyInfo | None:
    nodes = [v1.NUMANode(ID=n) for n in numa_nodes]
    return v1.TopologyInfo(nodes=nodes) if nodes else None


def device_entries(devices: Iterable[ContainerDevices]) -> list[v1.ContainerDevices]:
    """One entry per device per NUMA node, each with one ID, as the kubelet sends them.

    pkg/kubelet/cm/devicemanager/pod_devices.go (containerDevicesFromResourceDeviceInstances)
    walks every device and every NUMA node of it; a device without topology gets one
    entry without topology. The state may group IDs; the wire never does.
    """
    out = []
    for d in devices:
        for device_id in d.ids:
            if not d.numa_nodes:
                out.append(v1.ContainerDevices(resource_name=d.resource, device_ids=[device_id]))
            for node in d.numa_nodes:
                out.append(
                    v1.ContainerDevices(resource_name=d.resource, device_ids=[device_id], topology=_topology([node]))
                )
    return out


def _memory(m: ContainerMemory) -> v1.ContainerMemory:
    return v1.ContainerMemory(memory_type=m.type, size=m.size, topology=_topology(m.numa_nodes))


def _dynamic_resource(r: DynamicResource) -> v1.DynamicResource:
    return v1.DynamicResource(
        claim_name=r.claim_name,
        claim_namespace=r.claim_namespace,
        claim_resources=[
            v1.ClaimResource(
                cdi_devices=[v1.CDIDevice(name=n) for n in c.cdi_devices],
                driver_name=c.driver,
                pool_name=c.pool,
                device_name=c.device,
            )
            for c in r.devices
        ],
    )


def _container(c: ContainerResources, dynamic_resources: bool) -> v1.ContainerResources:
    return v1.ContainerResources(
        name=c.name,
        devices=device_entries(c.devices),
        cpu_ids=list(c.cpu_ids),
        memory=[_memory(m) for m in c.memory],
        dynamic_resources=[_dynamic_resource(r) for r in c.dynamic_resources] if dynamic_resources else [],
    )


def pod_to_pb(p: PodResources, dynamic_resources: bool = True) -> v1.PodResources:
    """A pod on the v1 wire; ``dynamic_resources=False`` is the kubelet with that gate off."""
    return v1.PodResources(
        name=p.name, namespace=p.namespace, containers=[_container(c, dynamic_resources) for c in p.containers]
    )


def pod_to_v1alpha1(p: PodResources) -> v1alpha1.PodResources:
    """A pod on the v1alpha1 wire: containers with their devices, nothing else."""
    return v1alpha1.PodResources(
        name=p.name,
        namespace=p.namespace,
        containers=[
            v1alpha1.ContainerResources(
                name=c.name,
                devices=[
                    v1alpha1.ContainerDevices(resource_name=e.resource_name, device_ids=e.device_ids)
                    for e in device_entries(c.devices)
                ],
            )
            for c in p.containers
        ],
    )


def allocatable_to_pb(a: AllocatableResources) -> v1.AllocatableResourcesResponse:
    return v1.AllocatableResourcesResponse(
        devices=device_entries(a.devices), cpu_ids=list(a.cpu_ids), memory=[_memory(m) for m in a.memory]
    )


# --- the servicers ---------------------------------------------------------------------


class _V1Lister(v1_grpc.PodResourcesListerServicer):
    def __init__(self, server: PodResourcesServer):
        self._server = server

    async def List(self, request: v1.ListPodResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        dynamic = self._server.dynamic_resources
        pods = self._server.state.pods()
        return v1.ListPodResourcesResponse(pod_resources=[pod_to_pb(p, dynamic) for p in pods])

    async def GetAllocatableResources(
        self, request: v1.AllocatableResourcesRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        return allocatable_to_pb(self._server.state.allocatable())

    async def Get(self, request: v1.GetPodResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        # server_v1.go returns plain Go errors here, which gRPC sends as status UNKNOWN.
        if not self._server.get_enabled:
            await context.abort(grpc.StatusCode.UNKNOWN, GET_DISABLED)
        for p in self._server.state.pods():
            if p.name == request.pod_name and p.namespace == request.pod_namespace:
                return v1.GetPodResourcesResponse(pod_resources=pod_to_pb(p, self._server.dynamic_resources))
        await context.abort(
            grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
        )


class _V1alpha1Lister(v1alpha1_grpc.PodResourcesListerServicer):
    def __init__(self, server: PodResourcesServer):
        self._server = server

    async def List(self, request: v1alpha1.ListPodResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        return v1alpha1.ListPodResourcesResponse(pod_resources=[pod_to_v1alpha1(p) for p in self._server.state.pods()])


async def _reject(request: bytes, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMITED)


class _RateLimit(grpc.aio.ServerInterceptor):
    """Every call to a served method takes a token first, from one bucket for all clients.

    Like grpc-go's unary interceptor it never sees a method the server does not
    serve, so an old kubelet's UNIMPLEMENTED costs no token.
    """

    def __init__(self, server: PodResourcesServer):
        self._server = server

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        log.debug("pod-resources %s", handler_call_details.method)
        if handler is None or self._server.bucket.allow():
            return handler
        self._server.rejected += 1
        return grpc.unary_unary_rpc_method_handler(_reject)


class PodResourcesServer:
    """PodResourcesLister on a unix socket, as the kubelet serves it.

    ``api="v1"`` serves v1 and v1alpha1 on one socket, like every kubelet since 1.20;
    ``api="v1alpha1"`` is an older kubelet, whose v1 methods answer UNIMPLEMENTED.
    ``get_enabled`` and ``dynamic_resources`` are the feature gates
    ``KubeletPodResourcesGet`` and ``KubeletPodResourcesDynamicResources``; both
    may be flipped while serving. ``rejected`` counts calls the rate limit refused.
    The server can be started again after ``stop`` (a kubelet restart).
    """

    def __init__(
        self,
        socket_path: str,
        state: PodResourcesState,
        *,
        get_enabled: bool = True,
        api: str = "v1",
        dynamic_resources: bool = True,
        rate: float = DEFAULT_RATE,
        burst: int = DEFAULT_BURST,
    ):
        if api not in APIS:
            raise ValueError(f"unknown pod-resources API {api!r}; expected one of {', '.join(APIS)}")
        if len(os.fsencode(os.path.abspath(socket_path))) > MAX_SOCKET_PATH:
            raise ValueError(f"{socket_path}: socket path longer than {MAX_SOCKET_PATH} bytes")
        self.socket_path = os.path.abspath(socket_path)
        self.state = state
        self.get_enabled = get_enabled
        self.api = api
        self.dynamic_resources = dynamic_resources
        self.bucket = TokenBucket(rate, burst)
        self.rejected = 0
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Listen on the socket, replacing a stale socket file as the kubelet does."""
        if self._server is not None:
            return
        os.makedirs(os.path.dirname(self.socket_path), exist_ok=True)
        _remove_socket(self.socket_path)
        server = grpc.aio.server(
            interceptors=[_RateLimit(self)],
            # The kubelet sends replies of any size; clients must raise their receive limit.
            options=[("grpc.max_send_message_length", -1)],
        )
        if self.api == "v1":
            v1_grpc.add_PodResourcesListerServicer_to_server(_V1Lister(self), server)
        v1alpha1_grpc.add_PodResourcesListerServicer_to_server(_V1alpha1Lister(self), server)
        try:
            server.add_insecure_port(f"unix:{self.socket_path}")
        except RuntimeError:
            # grpc core gives no reason; the directory's permissions are the usual one.
            raise OSError(f"{self.socket_path}: cannot listen on this socket") from None
        await server.start()
        self._server = server
        log.info("pod-resources (%s) serving on %s", self.api, self.socket_path)

    async def stop(self) -> None:
        """Stop serving and remove the socket file."""
        if self._server is None:
            return
        server, self._server = self._server, None
        await server.stop(STOP_GRACE)
        _remove_socket(self.socket_path)

    async def __aenter__(self) -> PodResourcesServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _remove_socket(path: str) -> None:
    """Unlink a socket file left behind (pkg/kubelet/util/util_unix.go CreateListener does too).

    Anything that is not a socket is left alone: it is not ours to delete.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(f"{path}: exists and is not a socket")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
