"""The simulated kubelet's pod-resources socket: PodResourcesLister v1 and v1alpha1.

It answers the way the kubelet's server does (pkg/kubelet/apis/podresources/
server_v1.go, server_v1alpha1.go and grpc/ratelimit.go), so that devctl's client
meets here the rate limit, the disabled ``Get``, the per-device-per-NUMA entries
and the unlimited reply size it meets on a real node. What the node holds comes
from a ``PodResourcesState`` (the simulated device manager); this module only
turns it into the wire.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Protocol

import grpc

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1
from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from devctl.lab import serving
from devctl.lab.sim.ratelimit import DEFAULT_BURST, DEFAULT_RATE, TokenBucket
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    DynamicResource,
    PodResources,
)

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
#
# Messages are filled in place (``repeated.add()``) rather than built and passed to
# constructors, which copy every submessage: a List of 5,000 pods takes half the time.


def per_device_per_numa(devices: Iterable[ContainerDevices]) -> Iterator[tuple[str, str, int | None]]:
    """(resource, device ID, NUMA node or None): one entry per device per NUMA node.

    That is how the kubelet sends devices: pkg/kubelet/cm/devicemanager/pod_devices.go
    (containerDevicesFromResourceDeviceInstances) walks every device and every NUMA
    node of it, and a device without topology gets one entry without topology. The
    state may group IDs; the wire never does.
    """
    for d in devices:
        for device_id in d.ids:
            if not d.numa_nodes:
                yield d.resource, device_id, None
            for node in d.numa_nodes:
                yield d.resource, device_id, node


def _fill_devices(field: Any, devices: Iterable[ContainerDevices]) -> None:
    for resource, device_id, node in per_device_per_numa(devices):
        entry = field.add(resource_name=resource, device_ids=[device_id])
        if node is not None:
            entry.topology.nodes.add(ID=node)


def _fill_memory(field: Any, memory: Iterable[ContainerMemory]) -> None:
    for m in memory:
        entry = field.add(memory_type=m.type, size=m.size)
        for node in m.numa_nodes:
            entry.topology.nodes.add(ID=node)


def _fill_dynamic_resources(field: Any, resources: Iterable[DynamicResource]) -> None:
    """Claims as the v1.32 kubelet sends them (observed): one list of CDI names per driver of a claim, each
    device's names appended to it, so a ClaimResource repeats its driver's earlier devices' names before its
    own (``gpu-0 [c0]``, ``gpu-1 [c0 c1]``); ``devctl.node.convert.claim_devices`` undoes it. ``share_id``
    only when the device has one (an optional field: absent is not "")."""
    for r in resources:
        entry = field.add(claim_name=r.claim_name, claim_namespace=r.claim_namespace)
        sent: dict[str, list[str]] = {}  # driver -> the names sent so far in this claim
        for c in r.devices:
            names = sent.setdefault(c.driver, [])
            names.extend(c.cdi_devices)
            claimed = entry.claim_resources.add(driver_name=c.driver, pool_name=c.pool, device_name=c.device)
            if c.share_id is not None:
                claimed.share_id = c.share_id
            for name in names:
                claimed.cdi_devices.add(name=name)


def _fill_pod(msg: v1.PodResources, p: PodResources, dynamic_resources: bool) -> None:
    msg.name = p.name
    msg.namespace = p.namespace
    for c in p.containers:
        container = msg.containers.add(name=c.name, cpu_ids=c.cpu_ids)
        _fill_devices(container.devices, c.devices)
        _fill_memory(container.memory, c.memory)
        if dynamic_resources:
            _fill_dynamic_resources(container.dynamic_resources, c.dynamic_resources)


def list_to_pb(pods: Iterable[PodResources], dynamic_resources: bool = True) -> v1.ListPodResourcesResponse:
    """A v1 List reply; ``dynamic_resources=False`` is the kubelet with that feature gate off."""
    reply = v1.ListPodResourcesResponse()
    for p in pods:
        _fill_pod(reply.pod_resources.add(), p, dynamic_resources)
    return reply


def get_to_pb(p: PodResources, dynamic_resources: bool = True) -> v1.GetPodResourcesResponse:
    reply = v1.GetPodResourcesResponse()
    _fill_pod(reply.pod_resources, p, dynamic_resources)
    return reply


def list_to_v1alpha1(pods: Iterable[PodResources]) -> v1alpha1.ListPodResourcesResponse:
    """A v1alpha1 List reply: containers with their devices, nothing else (no topology either)."""
    reply = v1alpha1.ListPodResourcesResponse()
    for p in pods:
        pod = reply.pod_resources.add(name=p.name, namespace=p.namespace)
        for c in p.containers:
            container = pod.containers.add(name=c.name)
            for resource, device_id, _ in per_device_per_numa(c.devices):
                container.devices.add(resource_name=resource, device_ids=[device_id])
    return reply


def allocatable_to_pb(a: AllocatableResources) -> v1.AllocatableResourcesResponse:
    reply = v1.AllocatableResourcesResponse(cpu_ids=a.cpu_ids)
    _fill_devices(reply.devices, a.devices)
    _fill_memory(reply.memory, a.memory)
    return reply


# --- the servicers ---------------------------------------------------------------------


class _V1Lister(v1_grpc.PodResourcesListerServicer):
    def __init__(self, server: PodResourcesServer):
        self._server = server

    async def List(self, request: v1.ListPodResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        return list_to_pb(self._server.state.pods(), self._server.dynamic_resources)

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
                return get_to_pb(p, self._server.dynamic_resources)
        await context.abort(
            grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
        )


class _V1alpha1Lister(v1alpha1_grpc.PodResourcesListerServicer):
    def __init__(self, server: PodResourcesServer):
        self._server = server

    async def List(self, request: v1alpha1.ListPodResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        return list_to_v1alpha1(self._server.state.pods())


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


class PodResourcesServer(serving.StartStop):
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
        self._serving = serving.UnixGrpcServer(
            self.socket_path,
            self._add,
            grace=STOP_GRACE,
            interceptors=[_RateLimit(self)],
            # The kubelet sends replies of any size; clients must raise their receive limit.
            options=[("grpc.max_send_message_length", -1)],
            dir_mode=0o777,
        )

    def _add(self, server: grpc.aio.Server) -> None:
        if self.api == "v1":
            v1_grpc.add_PodResourcesListerServicer_to_server(_V1Lister(self), server)
        v1alpha1_grpc.add_PodResourcesListerServicer_to_server(_V1alpha1Lister(self), server)

    async def start(self) -> None:
        """Listen on the socket, replacing a stale socket file as the kubelet's CreateListener does."""
        if self._serving.running:
            return
        await self._serving.start()
        log.info("pod-resources (%s) serving on %s", self.api, self.socket_path)

    async def stop(self) -> None:
        """Stop serving and remove the socket file."""
        await self._serving.stop()
