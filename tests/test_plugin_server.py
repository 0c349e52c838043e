"""The in-process device plugin over real sockets, against a kubelet-like Registration server."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from test_plugin_fakes import FakeKubelet

from devctl.lab.plugin.server import WATCH_INTERVAL, DevicePluginServer, ServeError
from devctl.lab.plugin.spec import DeviceError, PluginSpec
from devctl.model import HEALTHY, UNHEALTHY, Allocation, Device, DeviceNode, Mount, PluginOptions
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.rpc import RpcFailure

SPEC = PluginSpec(
    resource="example.com/gpu",
    devices=(Device("gpu-0", numa_nodes=(0,)), Device("gpu-1", numa_nodes=(0,)), Device("gpu-2", numa_nodes=(1,))),
    socket="gpu.sock",
    preferred_allocation=True,
    pre_start=True,
    allocate=Allocation(
        envs={"VISIBLE": "{ids}"},
        mounts=(Mount("/dev/shm/{id}", "/host/{id}", True),),
        devices=(DeviceNode("/dev/gpu-{id}", "/dev/gpu-{id}", "rw"),),
        annotations={"example.com/ids": "{ids}"},
        cdi_devices=("example.com/gpu={id}",),
    ),
)


def exists(path: str) -> bool:
    return os.path.exists(path)


@pytest.fixture
async def kubelet(short_root: Path) -> AsyncIterator[FakeKubelet]:
    k = FakeKubelet(short_root / "plugins")
    await k.start()
    yield k
    await k.stop()


@pytest.fixture
async def plugin(kubelet: FakeKubelet) -> AsyncIterator[DevicePluginServer]:
    async with DevicePluginServer(SPEC, str(kubelet.plugins_dir)) as server:
        await server.wait_registered(timeout=5)
        yield server


async def test_serves_before_registering(kubelet: FakeKubelet, plugin: DevicePluginServer) -> None:
    # GIVEN a plugin started against a kubelet that dials back inside Register
    # THEN Register succeeded, and the options it got back inside Register are the spec's
    [reg] = kubelet.registrations
    assert (reg.resource, reg.endpoint, reg.version, reg.error) == ("example.com/gpu", "gpu.sock", "v1beta1", None)
    assert reg.options == PluginOptions(pre_start_required=True, get_preferred_allocation_available=True)
    assert plugin.registered
    assert [r.rpc for r in plugin.rpc_log][:1] == ["GetDevicePluginOptions"]


async def test_health_reaches_every_stream(kubelet: FakeKubelet, plugin: DevicePluginServer) -> None:
    # GIVEN the kubelet's stream and two more ListAndWatch clients
    await kubelet.wait_for(lambda: kubelet.lists.get(SPEC.resource))
    clients = [DevicePluginClient(plugin.socket_path, timeout=2) for _ in range(2)]
    streams = [c.list_and_watch() for c in clients]
    try:
        firsts = await asyncio.wait_for(asyncio.gather(*(anext(s) for s in streams)), 2)
        assert [[d.id for d in f] for f in firsts] == [["gpu-0", "gpu-1", "gpu-2"]] * 2
        assert kubelet.lists[SPEC.resource][0] == SPEC.devices
        # WHEN one device turns unhealthy
        plugin.set_health("gpu-1", UNHEALTHY)
        # THEN every stream gets the full list with the change within a second
        seconds = await asyncio.wait_for(asyncio.gather(*(anext(s) for s in streams)), 1)
        for devices in seconds:
            assert [(d.id, d.health) for d in devices] == [
                ("gpu-0", HEALTHY),
                ("gpu-1", UNHEALTHY),
                ("gpu-2", HEALTHY),
            ]
        await kubelet.wait_for(lambda: len(kubelet.lists[SPEC.resource]) == 2, timeout=1)
        assert not kubelet.lists[SPEC.resource][-1][1].healthy
    finally:
        for s in streams:
            await s.aclose()
        for c in clients:
            await c.close()


async def test_add_and_remove_are_streamed(plugin: DevicePluginServer) -> None:
    async with DevicePluginClient(plugin.socket_path, timeout=2) as client:
        stream = client.list_and_watch()
        try:
            await asyncio.wait_for(anext(stream), 2)
            plugin.add(Device("gpu-3", numa_nodes=(1,)))
            assert [d.id for d in await asyncio.wait_for(anext(stream), 5)] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
            plugin.remove("gpu-0")
            assert [d.id for d in await asyncio.wait_for(anext(stream), 5)] == ["gpu-1", "gpu-2", "gpu-3"]
        finally:
            await stream.aclose()
    with pytest.raises(DeviceError, match="no device 'nope'"):
        plugin.set_health("nope", UNHEALTHY)
    with pytest.raises(DeviceError, match="already has"):
        plugin.add(Device("gpu-1"))


async def test_allocate_fills_the_templates(plugin: DevicePluginServer) -> None:
    async with DevicePluginClient(plugin.socket_path, timeout=2) as client:
        got = await asyncio.wait_for(client.allocate(["gpu-2", "gpu-0"]), 3)
    assert got == Allocation(
        envs={"VISIBLE": "gpu-2,gpu-0"},
        mounts=(Mount("/dev/shm/gpu-2", "/host/gpu-2", True),),
        devices=(DeviceNode("/dev/gpu-gpu-2", "/dev/gpu-gpu-2", "rw"),),
        annotations={"example.com/ids": "gpu-2,gpu-0"},
        cdi_devices=("example.com/gpu=gpu-2",),
    )
    # (the kubelet's ListAndWatch may be logged before or after: it opens on its own time)
    assert [r.device_ids for r in plugin.rpc_log if r.rpc == "Allocate"] == [("gpu-2", "gpu-0")]


async def test_allocate_unknown_device_is_invalid_argument(plugin: DevicePluginServer) -> None:
    async with DevicePluginClient(plugin.socket_path, timeout=2) as client:
        with pytest.raises(RpcFailure) as err:
            await asyncio.wait_for(client.allocate(["gpu-0", "gpu-9"]), 3)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown device(s) gpu-9" in err.value.message


async def test_preferred_allocation_over_the_wire(plugin: DevicePluginServer) -> None:
    async with DevicePluginClient(plugin.socket_path, timeout=2) as client:
        # gpu-2 is alone on NUMA 1; two devices fit on NUMA 0
        assert await asyncio.wait_for(client.preferred(["gpu-2", "gpu-1", "gpu-0"], [], 2), 3) == ("gpu-0", "gpu-1")
        # a must-include on NUMA 1 pulls the rest there if it can; here it cannot, so it spans both
        assert await asyncio.wait_for(client.preferred(["gpu-0", "gpu-1", "gpu-2"], ["gpu-2"], 2), 3) == (
            "gpu-2",
            "gpu-0",
        )
        await client.prestart(["gpu-0"])
    assert [r.device_ids for r in plugin.rpc_log if r.rpc == "PreStartContainer"] == [("gpu-0",)]


async def test_options_follow_the_spec(short_root: Path) -> None:
    spec = PluginSpec(resource="example.com/nic", devices=(Device("vf-0"),), preferred_allocation=False)
    async with (
        DevicePluginServer(spec, str(short_root), register=False) as server,
        DevicePluginClient(server.socket_path, timeout=2) as client,
    ):
        assert await asyncio.wait_for(client.options(), 3) == PluginOptions(False, False)
        with pytest.raises(RpcFailure, match="not offered"):
            await asyncio.wait_for(client.preferred(["vf-0"], [], 1), 3)
        with pytest.raises(RpcFailure, match="not required"):
            await asyncio.wait_for(client.prestart(["vf-0"]), 3)


async def test_registers_again_after_kubelet_restart(kubelet: FakeKubelet, plugin: DevicePluginServer) -> None:
    # WHEN the kubelet restarts: every socket deleted, kubelet.sock created again
    await kubelet.restart()
    # THEN the plugin serves again and registers again within 5 s
    await plugin.wait_registered(timeout=5, count=2)
    assert len(kubelet.registrations) == 2 and kubelet.registrations[-1].options is not None
    async with DevicePluginClient(plugin.socket_path, timeout=2) as client:
        assert [d.id for d in await asyncio.wait_for(client.first_list(), 3)] == ["gpu-0", "gpu-1", "gpu-2"]


class Heard(logging.Handler):
    """Sets ``event`` when a record containing ``text`` is logged: a wait on a log line, not on the clock."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


async def test_registration_is_retried_until_a_kubelet_appears(short_root: Path) -> None:
    kubelet = FakeKubelet(short_root)
    log = logging.getLogger("tests.plugin.no-kubelet")
    heard = Heard("no kubelet at")
    log.addHandler(heard)
    try:
        async with DevicePluginServer(SPEC, str(short_root), log=log) as server:
            # GIVEN no kubelet yet: the plugin says so, and serves on
            await asyncio.wait_for(heard.event.wait(), 5)
            assert server.registrations == 0
            # WHEN a kubelet appears THEN the plugin registers with it
            await kubelet.start()
            try:
                await server.wait_registered(timeout=5)
            finally:
                await kubelet.stop()
    finally:
        log.removeHandler(heard)


async def test_stop_ends_streams_and_removes_socket(short_root: Path) -> None:
    server = DevicePluginServer(SPEC, str(short_root), register=False)
    await server.start()
    client = DevicePluginClient(server.socket_path, timeout=2)
    stream = client.list_and_watch()
    await asyncio.wait_for(anext(stream), 2)
    await asyncio.wait_for(server.stop(), 3)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 2)
    await client.close()
    assert not exists(server.socket_path)


async def test_refuses_a_socket_that_is_live(short_root: Path) -> None:
    async with DevicePluginServer(SPEC, str(short_root), register=False):
        with pytest.raises(ServeError, match="already served by a live process"):
            await DevicePluginServer(SPEC, str(short_root), register=False).start()


async def test_a_chmod_of_its_socket_is_not_a_kubelet_restart(kubelet: FakeKubelet, plugin: DevicePluginServer) -> None:
    # GIVEN a registered plugin; WHEN an operator opens up its socket's mode
    os.chmod(plugin.socket_path, 0o666)
    await asyncio.sleep(4 * WATCH_INTERVAL)  # several turns of the directory watcher
    # THEN it neither serves anew (which would reset the mode) nor registers again
    assert len(kubelet.registrations) == 1
    assert stat.S_IMODE(os.stat(plugin.socket_path).st_mode) == 0o666


async def test_a_client_that_does_not_read_costs_one_list_and_gets_the_newest(short_root: Path) -> None:
    import tracemalloc

    # GIVEN a plugin and a ListAndWatch client that read the first list, then stops reading
    async with DevicePluginServer(SPEC, str(short_root), register=False) as server:
        client = DevicePluginClient(server.socket_path, timeout=2)
        stream = client.list_and_watch()
        await asyncio.wait_for(anext(stream), 2)

        async def flip(times: int) -> None:
            for i in range(times):
                server.set_health("gpu-1", UNHEALTHY if i % 2 == 0 else HEALTHY)
                if i % 50 == 0:
                    await asyncio.sleep(0)  # let the servicer run, as a real plugin's loop would

        # WHEN health flips thousands of times meanwhile
        tracemalloc.start()
        try:
            await flip(2_000)
            after_few = tracemalloc.get_traced_memory()[0]
            await flip(20_000)
            after_many = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        server.set_health("gpu-2", UNHEALTHY)  # the newest list: gpu-1 healthy again, gpu-2 not
        # THEN the plugin's memory stays flat (a queue per stream grew by a list per flip) ...
        assert after_many - after_few < 256 * 1024
        # ... and the client, reading at last, soon has the newest list, not a backlog of 22,000
        received = 0
        while True:
            devices = await asyncio.wait_for(anext(stream), 2)
            received += 1
            if {d.id: d.health for d in devices} == {"gpu-0": HEALTHY, "gpu-1": HEALTHY, "gpu-2": UNHEALTHY}:
                break
        assert received < 1_000
        await client.close()


async def test_a_reader_that_falls_behind_skips_to_the_newest_list_and_one_that_keeps_up_gets_all(
    short_root: Path,
) -> None:
    async with DevicePluginServer(SPEC, str(short_root), register=False) as server:
        for behind, expect_skips in ((0.05, True), (None, False)):
            client = DevicePluginClient(server.socket_path, timeout=2)
            stream = client.list_and_watch(behind=behind)
            await asyncio.wait_for(anext(stream), 2)
            # GIVEN lists that keep coming while the reader is busy elsewhere
            for i in range(200):
                server.set_health("gpu-1", UNHEALTHY if i % 2 == 0 else HEALTHY)
                server.set_health("gpu-2", UNHEALTHY if i == 199 else HEALTHY)
                await asyncio.sleep(0)
            await asyncio.sleep(0.3)  # busy: the lists wait longer than `behind`
            # WHEN it reads again
            taken = 0
            while True:
                devices = await asyncio.wait_for(anext(stream), 2)
                taken += 1
                if {d.id: d.health for d in devices}.get("gpu-2") == UNHEALTHY:
                    break
            # THEN a reader allowed to skip gets the newest at once and counts what it skipped;
            # one that is not skips nothing that reached it (how many lists reached it is the
            # plugin's to decide: it keeps only the newest unsent list of a slow stream)
            if expect_skips:
                assert taken <= 2 and client.skipped > 0
            else:
                assert client.skipped == 0
            await stream.aclose()
            await client.close()
            server.set_health("gpu-2", HEALTHY)
