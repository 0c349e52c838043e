"""devctl's node clients against servers that misbehave, over real unix sockets.

Every case here is something a person meets at a node: a kubelet or plugin that
hangs, a process frozen mid-flight, a plugin that dies while streaming, a socket
left behind, a socket only root may open, thousands of pods, the rate limit, a
disabled ``Get`` and an old kubelet. Each must end in an answer or in one clear
``RpcFailure``, within its deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable
from pathlib import Path

import grpc
import pytest
from badservers import (
    DEFAULT_RECEIVE_LIMIT,
    dying_stream_plugin,
    frozen_socket,
    growing_lists,
    huge_pod_resources,
    hung_server,
    malformed_plugin,
    stale_socket,
)

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.lab.sim.podresources import RATE_LIMITED, PodResourcesServer
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerResources,
    Device,
    PluginOptions,
    PluginStatus,
    PodResources,
)
from devctl.node.deviceplugin import DevicePluginClient, register, registry_info
from devctl.node.podresources import PodNotFound, PodResourcesClient
from devctl.node.rpc import RpcFailure, check_socket

TIMEOUT = 0.3  # the clients' deadline where the deadline itself is tested
ANSWER = 5.0  # the clients' deadline where an answer or a prompt failure is expected: far above a loaded CI's delays
BOUND = 10.0  # no test below may wait longer than this for anything


@pytest.fixture
def sock(short_root: Path) -> str:
    return str(short_root / "s.sock")


async def outcome(call: Awaitable[object]) -> tuple[str, float]:
    """How a call ended ("ok", or the RpcFailure status) and how long it took."""
    start = time.monotonic()
    try:
        await asyncio.wait_for(call, BOUND)
        result = "ok"
    except RpcFailure as e:
        result = e.status.value
    return result, time.monotonic() - start


# --- nobody answers ----------------------------------------------------------------------------


def every_unary_call(path: str, pr: PodResourcesClient, dp: DevicePluginClient) -> dict[str, Awaitable[object]]:
    return {
        "List": pr.list(),
        "GetAllocatableResources": pr.allocatable(),
        "Get": pr.get("train-0", "ml"),
        "GetDevicePluginOptions": dp.options(),
        "ListAndWatch (first list)": dp.first_list(),
        "GetPreferredAllocation": dp.preferred(["a", "b"], [], 1),
        "Allocate": dp.allocate(["a"]),
        "Allocate (raw)": dp.allocate_raw(["a"]),
        "PreStartContainer": dp.prestart(["a"]),
        "probe": dp.probe(),
        "Register": register(path, "x.sock", "example.com/x", PluginOptions(), timeout=TIMEOUT),
        "GetInfo": registry_info(path, timeout=TIMEOUT),
    }


@pytest.mark.parametrize("server", [hung_server, frozen_socket], ids=["hung", "frozen"])
async def test_every_unary_call_times_out_against_a_server_that_never_answers(sock: str, server):
    async with server(sock), PodResourcesClient(sock, TIMEOUT) as pr, DevicePluginClient(sock, TIMEOUT) as dp:
        calls = every_unary_call(sock, pr, dp)
        results = dict(zip(calls, await asyncio.gather(*map(outcome, calls.values())), strict=True))

    assert {name: status for name, (status, _) in results.items()} == {name: "timeout" for name in calls}
    slow = {name: round(took, 2) for name, (_, took) in results.items() if took > TIMEOUT + 1}
    assert slow == {}


async def test_a_frozen_process_passes_the_socket_check_but_not_the_rpc(sock: str):
    # The kernel accepts into the backlog for a stopped process: only a deadline tells.
    async with frozen_socket(sock), DevicePluginClient(sock, TIMEOUT) as dp:
        await check_socket(sock, TIMEOUT)
        with pytest.raises(RpcFailure) as info:
            await dp.options()
    assert info.value.status == PluginStatus.TIMEOUT
    assert info.value.message == f"{sock} GetDevicePluginOptions: no answer after 0.3s (deadline exceeded)"


# --- a stream that dies --------------------------------------------------------------------------


async def read_stream(client: DevicePluginClient) -> tuple[list[tuple[Device, ...]], RpcFailure | None]:
    got: list[tuple[Device, ...]] = []

    async def consume() -> None:
        async for devices in client.list_and_watch():
            got.append(devices)

    try:
        await asyncio.wait_for(consume(), BOUND)
    except RpcFailure as e:
        return got, e
    return got, None


async def test_a_dying_stream_yields_what_it_got_then_fails(sock: str):
    async with dying_stream_plugin(sock, after=3), DevicePluginClient(sock, ANSWER) as dp:
        got, error = await read_stream(dp)
    assert got == growing_lists(3)
    assert error is not None
    assert error.status == PluginStatus.UNREACHABLE
    assert error.message == f"{sock} ListAndWatch: unavailable: device plugin exited"


async def test_a_stream_ended_cleanly_yields_what_it_got_and_stops(sock: str):
    async with dying_stream_plugin(sock, after=2, clean=True), DevicePluginClient(sock, ANSWER) as dp:
        got, error = await read_stream(dp)
    assert (got, error) == (growing_lists(2), None)


@pytest.mark.parametrize("clean", [False, True], ids=["abort", "clean"])
async def test_first_list_of_a_stream_that_dies_before_its_first_list(sock: str, clean: bool):
    async with dying_stream_plugin(sock, after=0, clean=clean), DevicePluginClient(sock, ANSWER) as dp:
        with pytest.raises(RpcFailure) as info:
            await asyncio.wait_for(dp.first_list(), BOUND)
        # The socket itself still answers: the options call is fine.
        assert await asyncio.wait_for(dp.options(), BOUND) == PluginOptions()
    assert info.value.status == PluginStatus.UNREACHABLE
    assert "ListAndWatch" in info.value.message


async def test_first_list_of_a_stream_that_dies_later_is_its_first_list(sock: str):
    async with dying_stream_plugin(sock, after=2), DevicePluginClient(sock, ANSWER) as dp:
        assert await asyncio.wait_for(dp.first_list(), BOUND) == growing_lists(1)[0]


# --- bytes that are not protobuf ------------------------------------------------------------------


# grpc.aio hands back None for a reply it cannot parse (grpc/_common.py); the clients
# must turn that into a one-line RpcFailure instead of crashing.
async def test_a_malformed_plugin_gives_a_clean_error_from_every_read(sock: str):
    async with malformed_plugin(sock), DevicePluginClient(sock, ANSWER) as dp:
        with pytest.raises(RpcFailure) as options:
            await asyncio.wait_for(dp.options(), BOUND)
        with pytest.raises(RpcFailure) as first:
            await asyncio.wait_for(dp.first_list(), BOUND)
        got, streamed = await read_stream(dp)
    assert (options.value.status, first.value.status) == (PluginStatus.UNREACHABLE, PluginStatus.UNREACHABLE)
    assert got == []
    assert streamed is not None and streamed.status == PluginStatus.UNREACHABLE


async def test_a_malformed_pod_resources_reply_gives_a_clean_error(sock: str):
    async with malformed_plugin(sock), PodResourcesClient(sock, ANSWER) as pr:
        with pytest.raises(RpcFailure):
            await asyncio.wait_for(pr.list(), BOUND)


# --- sockets that are not there, or not ours --------------------------------------------------------


async def test_a_stale_socket_is_named_stale(sock: str):
    stale_socket(sock)
    with pytest.raises(RpcFailure) as checked:
        await check_socket(sock, TIMEOUT)
    async with PodResourcesClient(sock, ANSWER) as pr, DevicePluginClient(sock, ANSWER) as dp:
        listed, _ = await outcome(pr.list())
        options, _ = await outcome(dp.options())
    assert (checked.value.status, listed, options) == (PluginStatus.STALE, "stale", "stale")
    assert checked.value.message == f"{sock}: stale socket (nothing listens on it)"


async def test_a_missing_socket_is_named_missing(sock: str):
    with pytest.raises(RpcFailure) as info:
        await check_socket(sock, TIMEOUT)
    assert info.value.status == PluginStatus.UNREACHABLE
    assert info.value.message == f"{sock}: no such socket"


@pytest.mark.parametrize("make, kind", [(lambda p: open(p, "w").close(), "a regular file"), (os.mkdir, "a directory")])
async def test_a_path_that_is_not_a_socket_says_so(sock: str, make, kind: str):
    # e.g. --pod-resources /tmp, or --socket /etc/passwd: not "stale", which would send a person hunting a dead plugin
    make(sock)
    with pytest.raises(RpcFailure) as info:
        await check_socket(sock, TIMEOUT)
    assert info.value.status == PluginStatus.UNREACHABLE
    assert info.value.message == f"{sock}: not a socket ({kind})"


# Runs as root, then drops to nobody before it touches the socket.
AS_NOBODY = """
import asyncio, json, os, sys
from devctl.node.podresources import PodResourcesClient
from devctl.node.rpc import RpcFailure, check_socket

os.setgroups([]); os.setgid(65534); os.setuid(65534)

async def main(path):
    out = {}
    try:
        await check_socket(path, 2.0)
        out["check"] = "ok"
    except RpcFailure as e:
        out["check"] = [e.status.value, e.message]
    async with PodResourcesClient(path, 2.0) as client:
        try:
            await client.list()
            out["list"] = "ok"
        except RpcFailure as e:
            out["list"] = [e.status.value, e.message]
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


async def as_nobody(path: str) -> dict:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", AS_NOBODY, path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(child.communicate(), 30)
    assert child.returncode == 0, err.decode()
    return json.loads(out)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the socket and drop to uid 65534")
async def test_a_socket_only_root_may_open_is_named_permission_denied(short_root: Path):
    os.chmod(short_root, 0o755)  # the directory lets anyone through; only the socket's mode decides
    path = str(short_root / "kubelet.sock")
    async with PodResourcesServer(path, Empty()):
        os.chmod(path, 0o666)
        allowed = await as_nobody(path)
        os.chmod(path, 0o600)
        denied = await as_nobody(path)
    assert allowed == {"check": "ok", "list": "ok"}
    assert denied == {
        "check": ["permission-denied", f"{path}: permission denied"],
        "list": ["permission-denied", f"pod-resources {path}: permission denied"],
    }


# --- the pod-resources server's own limits ----------------------------------------------------------


class Empty:
    def pods(self) -> tuple[PodResources, ...]:
        return ()

    def allocatable(self) -> AllocatableResources:
        return AllocatableResources()


class OnePod:
    POD = PodResources(
        namespace="ml",
        name="train-0",
        containers=(
            ContainerResources(
                name="main", devices=(ContainerDevices("nvidia.com/gpu", ("GPU-0",), (0,)),), cpu_ids=(2, 3)
            ),
        ),
    )

    def pods(self) -> tuple[PodResources, ...]:
        return (self.POD,)

    def allocatable(self) -> AllocatableResources:
        return AllocatableResources()


async def test_a_reply_above_4_mib_arrives_whole(sock: str):
    async with huge_pod_resources(sock, pods=5000):
        # A client with gRPC's defaults cannot take it: the reply really is over the limit.
        async with grpc.aio.insecure_channel(f"unix:{sock}") as ch:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await v1_grpc.PodResourcesListerStub(ch).List(v1.ListPodResourcesRequest(), timeout=BOUND)
        async with PodResourcesClient(sock, BOUND) as pr:
            pods = await pr.list()
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in info.value.details()
    assert info.value.details().endswith(f" vs. {DEFAULT_RECEIVE_LIMIT}))")
    assert len(pods) == 5000
    assert pods[-1].name == "a-pod-name-as-long-as-a-statefulset-would-make-it-0004999"
    # Two devices, each on NUMA nodes 0 and 1: one entry per NUMA node holding both.
    assert [(d.numa_nodes, len(d.ids)) for d in pods[-1].containers[1].devices] == [((0,), 2), ((1,), 2)]


async def test_sixty_back_to_back_calls_meet_the_rate_limit(sock: str):
    async with PodResourcesServer(sock, OnePod()) as server, grpc.aio.insecure_channel(f"unix:{sock}") as ch:
        await asyncio.wait_for(ch.channel_ready(), BOUND)
        lister = v1_grpc.PodResourcesListerStub(ch)
        refusals: set[tuple[grpc.StatusCode, str]] = set()
        ok = 0
        start = time.monotonic()
        for _ in range(60):
            try:
                await lister.List(v1.ListPodResourcesRequest(), timeout=BOUND)
                ok += 1
            except grpc.aio.AioRpcError as e:
                refusals.add((e.code(), e.details()))
        elapsed = time.monotonic() - start
        # Right after the storm the bucket is empty, yet devctl's client gets its answer.
        async with PodResourcesClient(sock, ANSWER) as pr:
            pods = await pr.list()

    # The burst of 10, plus what the bucket refilled (100/s) while the calls ran.
    assert 10 <= ok <= 10 + int(100 * elapsed) + 1, (ok, elapsed)
    assert refusals == {(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMITED)}
    assert server.rejected >= 60 - ok
    assert pods == (OnePod.POD,)


async def test_the_client_backs_off_until_the_bucket_refills(sock: str):
    # One token every 0.2 s: each call below finds the bucket empty and must wait for it.
    async with PodResourcesServer(sock, OnePod(), rate=5.0, burst=1) as server, PodResourcesClient(sock, ANSWER) as pr:
        assert server.bucket.allow()  # empty the bucket
        start = time.monotonic()
        pods = await asyncio.wait_for(pr.list(), BOUND)
        await asyncio.wait_for(pr.allocatable(), BOUND)
        found = await asyncio.wait_for(pr.get("train-0", "ml"), BOUND)
        took = time.monotonic() - start
    assert (pods, found) == ((OnePod.POD,), OnePod.POD)
    assert server.rejected >= 3  # every call was refused at least once, and retried
    assert took >= 3 * 0.2 - 0.05  # it waited for the tokens rather than hammering


# --- Get, and an old kubelet ---------------------------------------------------------------------------


async def test_get_falls_back_to_list_where_get_is_disabled(sock: str):
    async with PodResourcesServer(sock, OnePod(), get_enabled=False), PodResourcesClient(sock, ANSWER) as pr:
        found = await pr.get("train-0", "ml")
        with pytest.raises(PodNotFound, match="pod train-0 in namespace prod not found"):
            await pr.get("train-0", "prod")
    assert found == OnePod.POD


async def test_get_names_an_unknown_pod(sock: str):
    async with PodResourcesServer(sock, OnePod()), PodResourcesClient(sock, ANSWER) as pr:
        found = await pr.get("train-0", "ml")
        with pytest.raises(PodNotFound, match="pod nope in namespace ml not found"):
            await pr.get("nope", "ml")
    assert found == OnePod.POD


async def test_an_old_kubelet_is_read_through_v1alpha1(sock: str):
    async with PodResourcesServer(sock, OnePod(), api="v1alpha1"), PodResourcesClient(sock, ANSWER) as pr:
        pods = await pr.list()
        version = pr.api_version
        allocatable, _ = await outcome(pr.allocatable())
    assert version == "v1alpha1"
    # v1alpha1 carries devices without topology, and nothing else.
    assert pods == (
        PodResources(
            namespace="ml",
            name="train-0",
            containers=(ContainerResources(name="main", devices=(ContainerDevices("nvidia.com/gpu", ("GPU-0",)),)),),
        ),
    )
    assert allocatable == "unreachable"  # UNIMPLEMENTED: said in one line, not a crash


async def test_the_same_client_reads_v1_from_a_current_kubelet(sock: str):
    async with PodResourcesServer(sock, OnePod()), PodResourcesClient(sock, ANSWER) as pr:
        pods = await pr.list()
    assert (pr.api_version, pods) == ("v1", (OnePod.POD,))
