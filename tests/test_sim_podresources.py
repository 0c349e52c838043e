"""The simulated pod-resources server on the wire, and its token bucket on a fake clock.

Wire tests use raw generated stubs, not devctl's client, so they see exactly what
a kubelet would send: statuses, messages, and the shape of every entry.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1
from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from devctl.lab.sim.podresources import GET_DISABLED, RATE_LIMITED, PodResourcesServer
from devctl.lab.sim.ratelimit import TokenBucket
from devctl.model import (
    AllocatableResources,
    ClaimDevice,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    DynamicResource,
    PodResources,
)

DEADLINE = 2.0  # every raw call below has it, so a broken server fails the test instead of hanging it


# --- the token bucket -------------------------------------------------------------------


class FakeClock:
    """Steps in the tests below are binary fractions, so token counts are exact."""

    def __init__(self) -> None:
        self.now = 1024.0

    def __call__(self) -> float:
        return self.now


def takes(bucket: TokenBucket, n: int) -> int:
    """How many of ``n`` calls at the same instant the bucket lets through."""
    return sum(bucket.allow() for _ in range(n))


def test_bucket_starts_full_and_lets_a_burst_through():
    clock = FakeClock()
    bucket = TokenBucket(100.0, 10, clock)
    assert takes(bucket, 60) == 10


def test_bucket_refills_at_its_rate_and_never_past_its_burst():
    clock = FakeClock()
    bucket = TokenBucket(10.0, 10, clock)
    takes(bucket, 10)
    clock.now += 0.5  # 5 tokens at 10/s
    assert takes(bucket, 10) == 5
    clock.now += 3600  # a quiet hour still leaves only the burst
    assert takes(bucket, 60) == 10


def test_bucket_keeps_fractions_of_a_token():
    clock = FakeClock()
    bucket = TokenBucket(10.0, 1, clock)
    assert bucket.allow()
    clock.now += 0.0625
    assert not bucket.allow()
    clock.now += 0.0625  # 0.625 + 0.625 tokens: one call's worth
    assert bucket.allow()
    assert not bucket.allow()


def test_bucket_gains_nothing_from_a_clock_that_steps_back():
    clock = FakeClock()
    bucket = TokenBucket(10.0, 2, clock)
    takes(bucket, 2)
    clock.now -= 64
    assert not bucket.allow()
    clock.now += 0.125  # time counts from the new reading: 1.25 tokens
    assert takes(bucket, 5) == 1


def test_bucket_with_rate_zero_allows_only_its_burst():
    clock = FakeClock()
    bucket = TokenBucket(0.0, 3, clock)
    clock.now += 1e6
    assert takes(bucket, 10) == 3


def test_bucket_refuses_negative_settings():
    with pytest.raises(ValueError, match="must not be negative"):
        TokenBucket(-1.0, 10)


# --- a tiny node ------------------------------------------------------------------------

TRAIN = PodResources(
    namespace="ml",
    name="train-0",
    containers=(
        ContainerResources(
            name="main",
            devices=(
                # Grouped here; the wire must carry one entry per device per NUMA node.
                ContainerDevices("nvidia.com/gpu", ("GPU-0", "GPU-1"), (0, 1)),
                ContainerDevices("example.com/nic", ("vf-3",)),
            ),
            cpu_ids=(2, 3),
            memory=(ContainerMemory("memory", 1 << 30, (0,)), ContainerMemory("hugepages-2Mi", 4 << 20)),
            dynamic_resources=(
                DynamicResource(
                    claim_name="gpu-claim",
                    claim_namespace="ml",
                    devices=(ClaimDevice("gpu.example.com", "node-a", "gpu-7", ("gpu.example.com/gpu=gpu-7",)),),
                ),
            ),
        ),
    ),
)
SIDECAR = PodResources(namespace="ml", name="idle", containers=(ContainerResources(name="log"),))


class Node:
    """The smallest PodResourcesState: fixed pods and allocatable resources."""

    def __init__(self) -> None:
        self._pods = (TRAIN, SIDECAR)
        self._allocatable = AllocatableResources(
            devices=(ContainerDevices("nvidia.com/gpu", ("GPU-0", "GPU-1", "GPU-2"), (1,)),),
            cpu_ids=(2, 3, 4, 5),
            memory=(ContainerMemory("memory", 64 << 30, (0,)),),
        )

    def pods(self) -> tuple[PodResources, ...]:
        return self._pods

    def allocatable(self) -> AllocatableResources:
        return self._allocatable


def wire(entries) -> list[tuple[str, list[str], list[int] | None]]:
    """ContainerDevices entries as (resource, ids, NUMA nodes or None when there is no topology)."""
    return [
        (
            e.resource_name,
            list(e.device_ids),
            [n.ID for n in e.topology.nodes] if e.HasField("topology") else None,
        )
        for e in entries
    ]


@pytest.fixture
def sock(short_root: Path) -> str:
    return str(short_root / "pod-resources" / "kubelet.sock")


@asynccontextmanager
async def stubs(
    path: str,
) -> AsyncIterator[tuple[v1_grpc.PodResourcesListerStub, v1alpha1_grpc.PodResourcesListerStub]]:
    async with grpc.aio.insecure_channel(f"unix:{path}") as ch:
        yield v1_grpc.PodResourcesListerStub(ch), v1alpha1_grpc.PodResourcesListerStub(ch)


async def status_of(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details()


# --- v1 ----------------------------------------------------------------------------------


async def test_list_sends_one_entry_per_device_per_numa_node(sock: str):
    async with PodResourcesServer(sock, Node()), stubs(sock) as (lister, _):
        reply = await lister.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)

    assert [(p.namespace, p.name) for p in reply.pod_resources] == [("ml", "train-0"), ("ml", "idle")]
    main = reply.pod_resources[0].containers[0]
    assert wire(main.devices) == [
        ("nvidia.com/gpu", ["GPU-0"], [0]),
        ("nvidia.com/gpu", ["GPU-0"], [1]),
        ("nvidia.com/gpu", ["GPU-1"], [0]),
        ("nvidia.com/gpu", ["GPU-1"], [1]),
        ("example.com/nic", ["vf-3"], None),
    ]
    assert list(main.cpu_ids) == [2, 3]
    assert [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in main.memory] == [
        ("memory", 1 << 30, [0]),
        ("hugepages-2Mi", 4 << 20, []),
    ]
    assert not main.memory[1].HasField("topology")
    (claim,) = main.dynamic_resources
    assert (claim.claim_name, claim.claim_namespace) == ("gpu-claim", "ml")
    (res,) = claim.claim_resources
    assert (res.driver_name, res.pool_name, res.device_name, [c.name for c in res.cdi_devices]) == (
        "gpu.example.com",
        "node-a",
        "gpu-7",
        ["gpu.example.com/gpu=gpu-7"],
    )


async def test_dynamic_resources_stay_empty_with_the_gate_off(sock: str):
    async with PodResourcesServer(sock, Node(), dynamic_resources=False), stubs(sock) as (lister, _):
        listed = await lister.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)
        got = await lister.Get(v1.GetPodResourcesRequest(pod_name="train-0", pod_namespace="ml"), timeout=DEADLINE)

    assert list(listed.pod_resources[0].containers[0].dynamic_resources) == []
    assert list(got.pod_resources.containers[0].dynamic_resources) == []
    assert list(got.pod_resources.containers[0].cpu_ids) == [2, 3]  # the rest is still there


async def test_allocatable_resources(sock: str):
    async with PodResourcesServer(sock, Node()), stubs(sock) as (lister, _):
        reply = await lister.GetAllocatableResources(v1.AllocatableResourcesRequest(), timeout=DEADLINE)

    assert wire(reply.devices) == [
        ("nvidia.com/gpu", ["GPU-0"], [1]),
        ("nvidia.com/gpu", ["GPU-1"], [1]),
        ("nvidia.com/gpu", ["GPU-2"], [1]),
    ]
    assert list(reply.cpu_ids) == [2, 3, 4, 5]
    assert [(m.memory_type, m.size) for m in reply.memory] == [("memory", 64 << 30)]


async def test_get_finds_a_pod_and_names_a_missing_one_as_the_kubelet_does(sock: str):
    async with PodResourcesServer(sock, Node()), stubs(sock) as (lister, _):
        got = await lister.Get(v1.GetPodResourcesRequest(pod_name="idle", pod_namespace="ml"), timeout=DEADLINE)
        missing = await status_of(
            lister.Get(v1.GetPodResourcesRequest(pod_name="idle", pod_namespace="prod"), timeout=DEADLINE)
        )

    assert (got.pod_resources.namespace, got.pod_resources.name) == ("ml", "idle")
    assert [c.name for c in got.pod_resources.containers] == ["log"]
    assert missing == (grpc.StatusCode.UNKNOWN, "pod idle in namespace prod not found")


async def test_get_disabled_answers_unknown_and_can_be_switched_on_live(sock: str):
    request = v1.GetPodResourcesRequest(pod_name="train-0", pod_namespace="ml")
    async with PodResourcesServer(sock, Node(), get_enabled=False) as server, stubs(sock) as (lister, _):
        disabled = await status_of(lister.Get(request, timeout=DEADLINE))
        server.get_enabled = True
        got = await lister.Get(request, timeout=DEADLINE)

    assert disabled == (grpc.StatusCode.UNKNOWN, GET_DISABLED)
    assert got.pod_resources.name == "train-0"


# --- v1alpha1 -----------------------------------------------------------------------------


async def test_v1alpha1_list_on_the_same_socket_carries_devices_only(sock: str):
    async with PodResourcesServer(sock, Node()), stubs(sock) as (_, alpha):
        reply = await alpha.List(v1alpha1.ListPodResourcesRequest(), timeout=DEADLINE)

    main = reply.pod_resources[0].containers[0]
    assert [(d.resource_name, list(d.device_ids)) for d in main.devices] == [
        ("nvidia.com/gpu", ["GPU-0"]),
        ("nvidia.com/gpu", ["GPU-0"]),
        ("nvidia.com/gpu", ["GPU-1"]),
        ("nvidia.com/gpu", ["GPU-1"]),
        ("example.com/nic", ["vf-3"]),
    ]
    # Protobuf keeps fields it does not know, so read the same bytes as v1: no CPUs, memory or topology sent.
    as_v1 = v1.ListPodResourcesResponse.FromString(reply.SerializeToString()).pod_resources[0].containers[0]
    assert (list(as_v1.cpu_ids), list(as_v1.memory), list(as_v1.dynamic_resources)) == ([], [], [])
    assert [e[2] for e in wire(as_v1.devices)] == [None] * 5


async def test_an_old_kubelet_answers_unimplemented_for_v1_and_charges_no_token(sock: str):
    # rate 0, burst 1: one served call in all, so a token spent on UNIMPLEMENTED would show.
    async with PodResourcesServer(sock, Node(), api="v1alpha1", rate=0.0, burst=1), stubs(sock) as (lister, alpha):
        calls = [
            lister.List(v1.ListPodResourcesRequest(), timeout=DEADLINE),
            lister.GetAllocatableResources(v1.AllocatableResourcesRequest(), timeout=DEADLINE),
            lister.Get(v1.GetPodResourcesRequest(pod_name="idle", pod_namespace="ml"), timeout=DEADLINE),
        ]
        codes = [(await status_of(c))[0] for c in calls]
        reply = await alpha.List(v1alpha1.ListPodResourcesRequest(), timeout=DEADLINE)

    assert codes == [grpc.StatusCode.UNIMPLEMENTED] * 3
    assert [p.name for p in reply.pod_resources] == ["train-0", "idle"]


# --- the rate limit -------------------------------------------------------------------------


async def test_one_bucket_is_shared_by_every_client_and_every_method(sock: str):
    async with (
        PodResourcesServer(sock, Node(), rate=0.0, burst=3) as server,
        stubs(sock) as (first, _),
        stubs(sock) as (second, alpha),
    ):
        await first.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)
        await second.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)
        await first.GetAllocatableResources(v1.AllocatableResourcesRequest(), timeout=DEADLINE)
        refused = [
            await status_of(first.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)),
            await status_of(second.GetAllocatableResources(v1.AllocatableResourcesRequest(), timeout=DEADLINE)),
            await status_of(
                second.Get(v1.GetPodResourcesRequest(pod_name="idle", pod_namespace="ml"), timeout=DEADLINE)
            ),
            await status_of(alpha.List(v1alpha1.ListPodResourcesRequest(), timeout=DEADLINE)),
        ]

    assert refused == [(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMITED)] * 4
    assert server.rejected == 4


# --- life cycle -----------------------------------------------------------------------------


async def test_stop_removes_the_socket_and_start_serves_again(sock: str):
    server = PodResourcesServer(sock, Node())
    await server.start()
    try:
        await server.stop()
        with pytest.raises(FileNotFoundError):
            await asyncio.open_unix_connection(sock)
        await server.start()  # a kubelet restart
        async with stubs(sock) as (lister, _):
            reply = await lister.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)
        assert len(reply.pod_resources) == 2
    finally:
        await server.stop()


async def test_start_replaces_a_stale_socket_file(sock: str):
    os.makedirs(os.path.dirname(sock))
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(sock)
    leftover.close()
    async with PodResourcesServer(sock, Node()), stubs(sock) as (lister, _):
        reply = await lister.List(v1.ListPodResourcesRequest(), timeout=DEADLINE)
    assert len(reply.pod_resources) == 2


def test_start_refuses_to_delete_a_file_that_is_not_a_socket(sock: str):
    os.makedirs(os.path.dirname(sock))
    Path(sock).write_text("not mine\n")
    with pytest.raises(OSError, match="is taken: a regular file is there"):
        asyncio.run(PodResourcesServer(sock, Node()).start())
    assert Path(sock).read_text() == "not mine\n"


def test_bad_settings_are_refused_at_once(short_root: Path):
    with pytest.raises(ValueError, match="unknown pod-resources API 'v2'"):
        PodResourcesServer(str(short_root / "k.sock"), Node(), api="v2")
    with pytest.raises(ValueError, match="longer than 107 bytes"):
        PodResourcesServer(str(short_root / ("x" * 120) / "k.sock"), Node())
