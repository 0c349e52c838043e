"""The simulated device manager against real plugins, read back through the real pod-resources server and checkpoint."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.podresources.v1 import api_pb2 as pr
from devctl.api.podresources.v1 import api_pb2_grpc as pr_grpc
from devctl.lab.sim.devicemanager import DeviceManager
from devctl.lab.sim.node import SimNode
from devctl.lab.sim.registration import RegistrationServer
from devctl.lab.sim.scenario import Scenario, parse_scenario
from devctl.model import UNHEALTHY, ContainerDevices, ContainerMemory, PluginOptions
from devctl.node.checkpoint import read_checkpoint
from devctl.node.deviceplugin import register
from devctl.node.podresources import PodResourcesClient
from devctl.node.rpc import channel

WAIT = 5.0

GPU = "example.com/gpu"
NIC = "example.com/nic"


def scenario(pods: list[dict[str, Any]], **extra: Any) -> Scenario:
    """Two NUMA nodes; four GPUs (g3 on both nodes; preferred allocation, PreStart) and two NICs without topology."""
    return parse_scenario(
        {
            "numa_nodes": [
                {"id": 0, "cpus": "0-3", "memory": "4Gi", "hugepages": [{"size": "2Mi", "total": 16}]},
                {"id": 1, "cpus": "4-7", "memory": "2Gi"},
            ],
            "reserved_cpus": "0",
            "resources": [
                {
                    "name": GPU,
                    "socket": "gpu.sock",
                    "devices": [
                        {"id": "g0", "numa": 0},
                        {"id": "g1", "numa": 0},
                        {"id": "g2", "numa": 1},
                        {"id": "g3", "numa": [0, 1]},
                    ],
                    "preferred_allocation": True,
                    "pre_start": True,
                    "allocate": {"envs": {"GPUS": "{ids}"}},
                },
                {"name": NIC, "socket": "nic.sock", "count": 2, "preferred_allocation": False},
            ],
            "pods": pods,
            **extra,
        }
    )


def pod(name: str, requests: dict[str, int], **container: Any) -> dict[str, Any]:
    return {"namespace": "t", "name": name, "containers": [{"name": "c", "requests": requests, **container}]}


@pytest.fixture
async def node_factory(short_root: Path) -> AsyncIterator[Any]:
    nodes: list[SimNode] = []

    async def make(s: Scenario, **kw: Any) -> SimNode:
        node = SimNode(short_root, s, **kw)
        nodes.append(node)
        await node.start()
        await node.ready(WAIT)
        return node

    try:
        yield make
    finally:
        for node in nodes:
            await asyncio.wait_for(node.stop(), WAIT)


def corrupt(checkpoint: str) -> None:
    """Change one device ID in Data, so that the checksum no longer matches."""
    text = Path(checkpoint).read_text()
    Path(checkpoint).write_text(text.replace('"g', '"x', 1))


async def listed(node: SimNode) -> dict[str, Any]:
    async with PodResourcesClient(node.paths.pod_resources, timeout=WAIT) as client:
        return {p.name: p for p in await client.list()}


async def allocatable(node: SimNode):
    async with PodResourcesClient(node.paths.pod_resources, timeout=WAIT) as client:
        return await client.allocatable()


async def test_admission_runs_preferred_allocate_prestart_and_the_checkpoint_verifies(node_factory) -> None:
    node = await node_factory(scenario([pod("a", {GPU: 2})]))
    rpcs = [r.rpc for r in node.plugins[GPU].rpc_log]
    chain = [r for r in rpcs if r in ("GetPreferredAllocation", "Allocate", "PreStartContainer")]
    assert chain == ["GetPreferredAllocation", "Allocate", "PreStartContainer"]
    allocated = next(r for r in node.plugins[GPU].rpc_log if r.rpc == "Allocate").device_ids
    assert set(allocated) == {"g0", "g1"}  # the plugin's choice: one NUMA node, tightest fit

    checkpoint = read_checkpoint(node.paths.checkpoint)
    assert checkpoint.checksum_ok
    (entry,) = checkpoint.entries
    assert (entry.pod_uid, entry.container, entry.resource) == (node.scenario.pods[0].uid, "c", GPU)
    assert entry.device_ids == {"0": allocated}
    assert entry.allocation is not None and entry.allocation.envs == {"GPUS": ",".join(allocated)}
    assert set(checkpoint.registered_devices[GPU]) == {"g0", "g1", "g2", "g3"}


async def test_entries_per_device_per_numa_node(node_factory) -> None:
    """pod-resources: one ContainerDevices per device per NUMA node; the checkpoint: "-1" without topology."""
    node = await node_factory(scenario([pod("a", {GPU: 4, NIC: 1}, cpus="1-2")]))
    (container,) = (await listed(node))["a"].containers
    # devctl's client groups the messages by NUMA node; each device is listed under each of its nodes.
    gpu_entries = sorted(((i,), d.numa_nodes) for d in container.devices if d.resource == GPU for i in d.ids)
    assert gpu_entries == [
        (("g0",), (0,)),
        (("g1",), (0,)),
        (("g2",), (1,)),
        (("g3",), (0,)),
        (("g3",), (1,)),
    ]
    assert [d for d in container.devices if d.resource == NIC] == [ContainerDevices(NIC, ("nic-0",), ())]
    assert container.cpu_ids == (1, 2)
    entries = {e.resource: e.device_ids for e in read_checkpoint(node.paths.checkpoint).entries}
    assert entries[NIC] == {"-1": ("nic-0",)}
    assert sorted(entries[GPU]) == ["0", "1"]
    assert set(entries[GPU]["0"]) == {"g0", "g1", "g3"} and set(entries[GPU]["1"]) == {"g2", "g3"}


async def test_allocatable_is_healthy_devices_cpus_and_memory(node_factory) -> None:
    node = await node_factory(scenario([]))
    a = await allocatable(node)
    assert a.cpu_ids == (1, 2, 3, 4, 5, 6, 7)
    assert sorted((d.resource, (i,), d.numa_nodes) for d in a.devices if d.resource == GPU for i in d.ids) == [
        (GPU, ("g0",), (0,)),
        (GPU, ("g1",), (0,)),
        (GPU, ("g2",), (1,)),
        (GPU, ("g3",), (0,)),
        (GPU, ("g3",), (1,)),
    ]
    assert set(a.memory) == {
        ContainerMemory("memory", 4 * 2**30, (0,)),
        ContainerMemory("hugepages-2Mi", 16 * 2**21, (0,)),
        ContainerMemory("memory", 2 * 2**30, (1,)),
    }


async def test_a_pod_that_cannot_be_admitted_is_recorded_not_run(node_factory) -> None:
    node = await node_factory(scenario([pod("big", {GPU: 3}), pod("late", {GPU: 2}), pod("small", {NIC: 1})]))
    dm = node.device_manager
    assert dm.failed == {
        ("t", "late"): f"requested number of devices unavailable for {GPU}. Requested: 2, Available: 1"
    }
    assert sorted(await listed(node)) == ["big", "small"]
    late_uid = node.scenario.pods[1].uid
    assert all(e.pod_uid != late_uid for e in read_checkpoint(node.paths.checkpoint).entries)
    assert not any(late_uid in name for name in os.listdir(node.paths.pod_logs))


async def test_health_flip_reaches_the_device_manager_within_a_second(node_factory) -> None:
    node = await node_factory(scenario([]))
    dm = node.device_manager
    node.plugins[GPU].set_health("g1", UNHEALTHY)
    await dm.wait_until(lambda: dm.resource(GPU).allocatable == 3, 1.0)  # type: ignore[union-attr]
    assert dm.resource(GPU).capacity == 4  # type: ignore[union-attr]
    assert "g1" not in read_checkpoint(node.paths.checkpoint).registered_devices[GPU]
    assert ("g1",) not in {d.ids for d in (await allocatable(node)).devices}


async def test_stream_end_keeps_capacity_drops_allocatable_then_the_resource(node_factory) -> None:
    node = await node_factory(scenario([pod("a", {NIC: 1})]), grace_period=0.5)
    dm = node.device_manager
    await node.plugins[NIC].stop()  # the plugin exits
    await dm.wait_until(lambda: not dm.connected(NIC), WAIT)
    state = dm.resource(NIC)
    assert state is not None and (state.capacity, state.allocatable) == (2, 0)
    assert not [d for d in (await allocatable(node)).devices if d.resource == NIC]
    # Running containers keep what they hold.
    assert [d.ids for d in (await listed(node))["a"].containers[0].devices] == [("nic-0",)]
    await dm.wait_until(lambda: dm.resource(NIC) is None, WAIT)
    assert NIC not in read_checkpoint(node.paths.checkpoint).registered_devices


async def test_restore_starts_with_capacity_zero_and_the_allocations(node_factory) -> None:
    node = await node_factory(scenario([pod("a", {GPU: 1, NIC: 1})]))
    fresh = DeviceManager(node.paths.plugins_dir, node.scenario, grace_period=0.2)
    try:
        fresh.restore(node.device_manager.running_pods())
        assert {h.resource for h in fresh.held()} == {GPU, NIC}
        for name in (GPU, NIC):
            state = fresh.resource(name)
            assert state is not None and (state.capacity, state.allocatable, state.connected) == (0, 0, False)
        (listed_pod,) = fresh.pods()
        assert {d.resource for d in listed_pod.containers[0].devices} == {GPU, NIC}
        # No plugin registers with this manager: after the grace period both resources are gone.
        await fresh.wait_until(lambda: fresh.resource_names() == (), WAIT)
    finally:
        await fresh.close()


async def test_a_corrupt_checkpoint_is_not_restored(node_factory) -> None:
    node = await node_factory(scenario([pod("a", {GPU: 1})]))
    corrupt(node.paths.checkpoint)
    fresh = DeviceManager(node.paths.plugins_dir, node.scenario)
    try:
        fresh.restore(node.device_manager.running_pods())
        assert fresh.held() == () and fresh.resource_names() == ()
    finally:
        await fresh.close()


async def test_kubelet_switches_reach_pod_resources(node_factory) -> None:
    claim = {"claim_name": "cl", "devices": [{"driver": "d.example.com", "pool": "p", "device": "x"}]}
    node = await node_factory(
        scenario([pod("a", {}, dynamic_resources=[claim])], kubelet={"get_enabled": False, "dynamic_resources": False})
    )
    async with channel(node.paths.pod_resources) as ch:
        stub = pr_grpc.PodResourcesListerStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Get(pr.GetPodResourcesRequest(pod_name="a", pod_namespace="t"), timeout=WAIT)
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        assert err.value.details() == "PodResources API Get method disabled"
        reply = await stub.List(pr.ListPodResourcesRequest(), timeout=WAIT)
    assert [p.name for p in reply.pod_resources] == ["a"]
    assert not reply.pod_resources[0].containers[0].dynamic_resources


# --- a plugin whose preferred allocation is partly wrong --------------------------------


class _Wayward(dp_grpc.DevicePluginServicer):
    """Offers GetPreferredAllocation and answers with one unknown ID and one real candidate."""

    def __init__(self) -> None:
        self.allocated: list[list[str]] = []

    async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions(get_preferred_allocation_available=True)

    async def ListAndWatch(self, request: dp.Empty, context: Any) -> AsyncIterator[dp.ListAndWatchResponse]:
        yield dp.ListAndWatchResponse(devices=[dp.Device(ID=f"w{i}", health="Healthy") for i in range(4)])
        await asyncio.Event().wait()  # then silence, as a quiet plugin is

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Any
    ) -> dp.PreferredAllocationResponse:
        return dp.PreferredAllocationResponse(
            container_responses=[dp.ContainerPreferredAllocationResponse(deviceIDs=["bogus", "w3"])]
        )

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        self.allocated.append(list(request.container_requests[0].devices_ids))
        return dp.AllocateResponse(container_responses=[dp.ContainerAllocateResponse()])


async def test_preferred_answer_is_intersected_with_the_candidates_and_filled(short_root: Path) -> None:
    plugins_dir = str(short_root)
    wayward = _Wayward()
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(wayward, server)
    server.add_insecure_port(f"unix:{plugins_dir}/wayward.sock")
    await server.start()
    s = parse_scenario({"resources": [{"name": "example.com/w", "count": 0}], "pods": [pod("a", {"example.com/w": 3})]})
    dm = DeviceManager(plugins_dir, s)
    kubelet = RegistrationServer(f"{plugins_dir}/kubelet.sock", dm)
    await kubelet.start()
    try:
        await asyncio.wait_for(register(kubelet.socket_path, "wayward.sock", "example.com/w", PluginOptions()), WAIT)
        await dm.wait_until(lambda: dm.connected("example.com/w"), WAIT)
        assert await asyncio.wait_for(dm.admit(s.pods[0]), WAIT)
        assert wayward.allocated == [["w3", "w0", "w1"]]  # "bogus" dropped, then filled in the kubelet's order
        (entry,) = read_checkpoint(dm.checkpoint_path).entries
        assert entry.device_ids == {"-1": ("w3", "w0", "w1")}
        assert entry.allocation is not None and entry.allocation.envs == {}  # an empty reply is stored as ""
    finally:
        await kubelet.stop()
        await dm.close()
        await server.stop(0)
