"""Client of the kubelet's pod-resources socket (PodResourcesLister v1, v1alpha1 fallback)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1
from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from devctl.base.backoff import Backoff
from devctl.base.errors import DevctlError
from devctl.model import AllocatableResources, ErrorKind, PluginStatus, PodResources
from devctl.node import convert
from devctl.node.rpc import RpcFailure, channel, failure, parsed
from devctl.node.rpclog import logged

log = logging.getLogger(__name__)
T = TypeVar("T")

# The kubelet answers with these when the KubeletPodResourcesGet gate is off or the
# pod is unknown (pkg/kubelet/apis/podresources/server_v1.go), both as status UNKNOWN.
GET_DISABLED = "Get method disabled"
GET_ALLOCATABLE = "/v1.PodResourcesLister/GetAllocatableResources"
LIST = "/v1.PodResourcesLister/List"

# Backoff when the kubelet's token bucket (100/s, burst 10, shared by every client
# of the node) says RESOURCE_EXHAUSTED: short, jittered, a few times at most.
BACKOFF_START = 0.05
BACKOFF_TRIES = 5


class PodNotFound(DevctlError):
    """The kubelet has no such pod (or no longer runs it)."""


class PodResourcesClient:
    """List, GetAllocatableResources and Get, each under a deadline.

    Use as ``async with PodResourcesClient(path) as client``. ``api_version``
    tells which API answered List: ``v1``, or ``v1alpha1`` on an old kubelet.
    """

    def __init__(self, socket_path: str, timeout: float = 5.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self.api_version = "v1"
        self._channel = channel(socket_path)
        self._v1 = v1_grpc.PodResourcesListerStub(self._channel)
        self._v1alpha1 = v1alpha1_grpc.PodResourcesListerStub(self._channel)

    async def __aenter__(self) -> PodResourcesClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, what: str, rpc: Callable[[], Awaitable[T]]) -> T:
        # delays of BACKOFF_START, doubling, each drawn from [d/2, 3d/2): the same mean wait as before
        backoff = Backoff(first=BACKOFF_START * 1.5, cap=BACKOFF_START * 1.5 * 2**BACKOFF_TRIES, jitter=1 / 3)
        for attempt in range(BACKOFF_TRIES):
            try:
                with logged(self.socket_path, what):
                    return await rpc()
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                if attempt == BACKOFF_TRIES - 1:
                    # The kubelet's token bucket is spent by someone else's client too:
                    # what devctl would have shown is unknown, not empty.
                    raise RpcFailure(
                        PluginStatus.UNREACHABLE,
                        f"pod-resources {self.socket_path} {what}: rejected by the kubelet's rate limit "
                        f"{BACKOFF_TRIES} times in a row (RESOURCE_EXHAUSTED)",
                        e.code(),
                        ErrorKind.RATE_LIMITED,
                    ) from None
                delay = backoff.next()
                log.debug("pod-resources %s rate limited; retrying in %.2fs", what, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def list(self) -> tuple[PodResources, ...]:
        """Every active pod with its devices, CPUs, memory and DRA claims."""
        # Taken as bytes: 50,000 pods of one device each are read a column at a time (convert.pods_wire).
        rpc = self._channel.unary_unary(
            LIST, request_serializer=v1.ListPodResourcesRequest.SerializeToString, response_deserializer=None
        )
        try:
            reply = await self._call("List", lambda: rpc(v1.ListPodResourcesRequest(), timeout=self.timeout))
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise failure(e, f"pod-resources {self.socket_path}", self.timeout) from None
            return await self._list_v1alpha1()
        self.api_version = "v1"
        return parsed(convert.pods_wire(reply), f"pod-resources {self.socket_path} List", "ListPodResourcesResponse")

    async def _list_v1alpha1(self) -> tuple[PodResources, ...]:
        # Kubelets before 1.20 serve only v1alpha1 (devices, no CPUs, no topology).
        try:
            reply = await self._call(
                "List(v1alpha1)",
                lambda: self._v1alpha1.List(v1alpha1.ListPodResourcesRequest(), timeout=self.timeout),
            )
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"pod-resources {self.socket_path}", self.timeout) from None
        self.api_version = "v1alpha1"
        reply = parsed(reply, f"pod-resources {self.socket_path} List", "ListPodResourcesResponse")
        return tuple(convert.pod(p) for p in reply.pod_resources)

    async def allocatable(self) -> AllocatableResources:
        """Healthy devices, allocatable CPUs and memory of the node."""
        # Taken as bytes: a million devices are read a column at a time (convert.allocatable_wire).
        rpc = self._channel.unary_unary(
            GET_ALLOCATABLE,
            request_serializer=v1.AllocatableResourcesRequest.SerializeToString,
            response_deserializer=None,
        )
        try:
            reply = await self._call(
                "GetAllocatableResources", lambda: rpc(v1.AllocatableResourcesRequest(), timeout=self.timeout)
            )
        except grpc.aio.AioRpcError as e:
            raise failure(e, f"pod-resources {self.socket_path} GetAllocatableResources", self.timeout) from None
        return parsed(
            convert.allocatable_wire(reply),
            f"pod-resources {self.socket_path} GetAllocatableResources",
            "AllocatableResourcesResponse",
        )

    async def get(self, name: str, namespace: str) -> PodResources:
        """One pod by Get; falls back to filtering List where Get is disabled or missing."""
        request = v1.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            reply = await self._call("Get", lambda: self._v1.Get(request, timeout=self.timeout))
        except grpc.aio.AioRpcError as e:
            details = e.details() or ""
            if e.code() == grpc.StatusCode.UNIMPLEMENTED or GET_DISABLED in details:
                log.debug("pod-resources Get unavailable (%s); filtering List", details)
                return self._pick(await self.list(), name, namespace)
            if "not found" in details:
                raise PodNotFound(f"pod {name} in namespace {namespace} not found") from None
            raise failure(e, f"pod-resources {self.socket_path} Get", self.timeout) from None
        return convert.pod(
            parsed(reply, f"pod-resources {self.socket_path} Get", "GetPodResourcesResponse").pod_resources
        )

    @staticmethod
    def _pick(pods: tuple[PodResources, ...], name: str, namespace: str) -> PodResources:
        for p in pods:
            if p.name == name and p.namespace == namespace:
                return p
        raise PodNotFound(f"pod {name} in namespace {namespace} not found")


__all__ = ["PluginStatus", "PodNotFound", "PodResourcesClient", "RpcFailure"]
