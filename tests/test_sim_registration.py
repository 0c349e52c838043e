"""The simulated kubelet's Registration server, driven by real plugins and a raw client over real sockets."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec, counted_devices
from devctl.lab.sim.devicemanager import DeviceManager
from devctl.lab.sim.registration import RegistrationServer
from devctl.lab.sim.scenario import Scenario
from devctl.node.deviceplugin import register
from devctl.node.rpc import RpcFailure, channel

WAIT = 5.0


@pytest.fixture
async def kubelet(short_root: Path) -> AsyncIterator[tuple[str, DeviceManager, RegistrationServer]]:
    """A Registration server on <root>/device-plugins/kubelet.sock feeding a real device manager."""
    plugins_dir = str(short_root / "dp")
    os.makedirs(plugins_dir)
    manager = DeviceManager(plugins_dir, Scenario())
    server = RegistrationServer(os.path.join(plugins_dir, "kubelet.sock"), manager, dial_timeout=0.5)
    await server.start()
    try:
        yield plugins_dir, manager, server
    finally:
        await server.stop()
        await manager.close()


def spec(name: str = "example.com/widget", count: int = 2) -> PluginSpec:
    return PluginSpec(resource=name, devices=counted_devices(name, count), socket="widget.sock")


def capacity(manager: DeviceManager, name: str) -> int:
    state = manager.resource(name)
    return -1 if state is None else state.capacity


async def raw_register(kubelet_socket: str, **fields: str) -> grpc.aio.AioRpcError | None:
    """Register with exactly these fields, as any plugin could; the error the plugin gets, or None."""
    async with channel(kubelet_socket) as ch:
        try:
            await dp_grpc.RegistrationStub(ch).Register(dp.RegisterRequest(**fields), timeout=WAIT)
        except grpc.aio.AioRpcError as e:
            return e
    return None


async def test_register_is_accepted_and_the_plugin_is_followed(kubelet) -> None:
    plugins_dir, manager, _ = kubelet
    async with DevicePluginServer(spec(), plugins_dir) as plugin:
        await plugin.wait_registered(WAIT)
        await manager.wait_until(lambda: manager.connected("example.com/widget"), WAIT)
        state = manager.resource("example.com/widget")
        assert state is not None
        assert (state.capacity, state.allocatable) == (2, 2)
        assert state.socket == os.path.join(plugins_dir, "widget.sock")
        assert state.options is not None and state.options.get_preferred_allocation_available


async def test_options_are_asked_inside_register(kubelet) -> None:
    """The kubelet dials the plugin and calls GetDevicePluginOptions before Register answers."""
    plugins_dir, _, _ = kubelet
    async with DevicePluginServer(spec(), plugins_dir, register=False) as plugin:
        assert not [r for r in plugin.rpc_log if r.rpc == "GetDevicePluginOptions"]
        await asyncio.wait_for(
            register(os.path.join(plugins_dir, "kubelet.sock"), "widget.sock", "example.com/widget", plugin.options),
            WAIT,
        )
        # Register has returned, so the options call has already been served.
        assert [r.rpc for r in plugin.rpc_log][:1] == ["GetDevicePluginOptions"]


async def test_bad_version_is_refused_with_the_kubelet_text(kubelet) -> None:
    plugins_dir, manager, _ = kubelet
    error = await raw_register(
        os.path.join(plugins_dir, "kubelet.sock"), version="v1beta2", endpoint="x.sock", resource_name="a.example/x"
    )
    assert error is not None and error.code() == grpc.StatusCode.UNKNOWN
    assert (
        error.details()
        == 'requested API version "v1beta2" is not supported by kubelet. Supported version is ["v1beta1"]'
    )
    assert manager.resource_names() == ()


@pytest.mark.parametrize("name", ["a.example/bad name", "a.example/", "A_b.example/x", "a.example/x/y", "widget"])
async def test_bad_resource_name_is_refused_and_the_plugin_sees_why(kubelet, name: str) -> None:
    plugins_dir, manager, _ = kubelet
    kubelet_socket = os.path.join(plugins_dir, "kubelet.sock")
    async with DevicePluginServer(spec(), plugins_dir, register=False) as plugin:
        with pytest.raises(RpcFailure) as err:
            await asyncio.wait_for(register(kubelet_socket, "widget.sock", name, plugin.options), WAIT)
    assert err.value.code == grpc.StatusCode.UNKNOWN
    assert f'the ResourceName "{name}" is invalid' in err.value.message
    assert manager.resource_names() == ()


async def test_unreachable_endpoint_waits_out_the_dial_timeout(kubelet) -> None:
    _, manager, server = kubelet
    start = time.monotonic()
    error = await raw_register(
        server.socket_path, version="v1beta1", endpoint="nobody.sock", resource_name="example.com/widget"
    )
    elapsed = time.monotonic() - start
    assert error is not None and error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == "failed to dial device plugin: context deadline exceeded"
    assert server.dial_timeout <= elapsed < server.dial_timeout + 2
    assert manager.resource_names() == ()


async def test_a_plugin_that_starts_late_within_the_dial_timeout_is_accepted(kubelet) -> None:
    """grpc.WithBlock: Register waits for the endpoint to appear, up to the dial timeout."""
    plugins_dir, manager, server = kubelet
    pending = asyncio.create_task(
        raw_register(server.socket_path, version="v1beta1", endpoint="widget.sock", resource_name="example.com/widget")
    )
    await asyncio.sleep(0.1)
    async with DevicePluginServer(spec(), plugins_dir, register=False):
        assert await asyncio.wait_for(pending, WAIT) is None
        await manager.wait_until(lambda: manager.connected("example.com/widget"), WAIT)


async def test_registering_again_replaces_the_endpoint(kubelet) -> None:
    plugins_dir, manager, _ = kubelet
    first = DevicePluginServer(spec(count=2), plugins_dir)
    second = DevicePluginServer(
        PluginSpec("example.com/widget", counted_devices("example.com/widget", 3), socket="widget-2.sock"), plugins_dir
    )
    async with first:
        await first.wait_registered(WAIT)
        await manager.wait_until(lambda: manager.connected("example.com/widget"), WAIT)
        async with second:
            await second.wait_registered(WAIT)
            await manager.wait_until(lambda: capacity(manager, "example.com/widget") == 3, WAIT)
            assert manager.resource("example.com/widget").socket.endswith("widget-2.sock")  # type: ignore[union-attr]
            # v1.32, "Two instances of one resource": the replaced plugin stops, and the kubelet marks the
            # resource unhealthy and closes the newer plugin's stream too, although it is alive.
            await first.stop()
            await manager.wait_until(lambda: not manager.connected("example.com/widget"), WAIT)
            state = manager.resource("example.com/widget")
            assert state is not None and (state.capacity, state.allocatable) == (3, 0)
            assert second.registered  # it never learns; only registering again would bring it back
