"""The guard finds a live plugin already serving a resource, from what the kubelet knows of its devices."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from registry import plugin_info, registry_server
from test_plugin_fakes import FakePodResources, Serving, devctl

from devctl.core.guard import LiveServer, live_server_for
from devctl.lab.plugin.control import default_control_dir
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import AllocatableResources, ContainerDevices, ContainerResources, Device, NodePaths, PodResources
from devctl.node.checkpoint import RawEntry, write_checkpoint
from devctl.node.paths import resolve_paths

REAL = PluginSpec(resource="vendor.example/gpu", devices=(Device("GPU-a1"), Device("GPU-b2")), socket="vendor.sock")
OTHER = PluginSpec(resource="vendor.example/nic", devices=(Device("0000:3b:00.1"),), socket="nic.sock")


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    Path(p.plugins_dir).mkdir(parents=True)
    return p


async def test_found_through_pod_resources(paths: NodePaths) -> None:
    # GIVEN two live plugins, and a kubelet that reports the GPU IDs as allocatable
    kubelet = FakePodResources(paths.pod_resources, {REAL.resource: ["GPU-a1", "GPU-b2"], OTHER.resource: []})
    await kubelet.start()
    try:
        async with (
            DevicePluginServer(REAL, paths.plugins_dir, register=False) as real,
            DevicePluginServer(OTHER, paths.plugins_dir, register=False),
        ):
            # THEN the GPU resource is found on the socket that lists those IDs
            found = await asyncio.wait_for(live_server_for(REAL.resource, paths, 2), 5)
            assert found == LiveServer(real.socket_path)
            # and nothing is found for a resource the kubelet knows no devices of, or when ours is excluded
            assert await asyncio.wait_for(live_server_for(OTHER.resource, paths, 2), 5) is None
            excluded = await asyncio.wait_for(live_server_for(REAL.resource, paths, 2, exclude=[real.socket_path]), 5)
            assert excluded is None
    finally:
        await kubelet.stop()


async def test_found_through_the_checkpoint(paths: NodePaths) -> None:
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-b2"]})
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False) as real:
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 2), 5) == LiveServer(real.socket_path)


async def test_a_dead_plugin_is_not_serving(paths: NodePaths) -> None:
    # GIVEN the checkpoint names the devices, but the plugin's socket is stale (it crashed)
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-a1", "GPU-b2"]})
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(Path(paths.plugins_dir) / REAL.socket))
    stale.close()
    assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 1), 5) is None


async def test_found_through_a_devctl_control_socket(paths: NodePaths) -> None:
    # No kubelet at all: a running devctl plugin still says what it serves, with no device at all too.
    ctl = default_control_dir(paths.root)
    empty = replace(REAL, devices=())
    async with DevicePluginServer(empty, paths.plugins_dir, register=False, control_dir=ctl) as real:
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 2), 5) == LiveServer(real.socket_path)
        assert await asyncio.wait_for(live_server_for(OTHER.resource, paths, 2), 5) is None


async def test_nothing_known_nothing_found(paths: NodePaths) -> None:
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False):
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 1), 5) is None


# --- no takeover: `devctl plugin serve --resource R` beside a live plugin of R that the old guard missed ---------
#
# Each live plugin here is a plain server with no devctl control socket, as a vendor's plugin is.


class Held:
    """pod-resources as the kubelet answers it while every device of GPU is unhealthy and one is held."""

    def pods(self) -> tuple[PodResources, ...]:
        held = ContainerResources("main", (ContainerDevices(REAL.resource, ("GPU-a1",)),))
        return (PodResources("ml", "train-0", (held,)),)

    def allocatable(self) -> AllocatableResources:
        return AllocatableResources()  # GetAllocatableResources lists healthy devices only: none


@contextlib.asynccontextmanager
async def all_unhealthy(paths: NodePaths) -> AsyncIterator[str]:
    from devctl.lab.sim.podresources import PodResourcesServer

    # The checkpoint as the kubelet writes it then: RegisteredDevices empty (healthy only), the allocation kept.
    write_checkpoint(paths.checkpoint, [RawEntry("uid-1", "main", REAL.resource, {"-1": ["GPU-a1"]}, b"")], {})
    sick = replace(REAL, devices=tuple(replace(d, health="Unhealthy") for d in REAL.devices))
    Path(paths.pod_resources).parent.mkdir(parents=True, exist_ok=True)
    async with (
        PodResourcesServer(paths.pod_resources, Held()),
        DevicePluginServer(sick, paths.plugins_dir, register=False) as live,
    ):
        yield live.socket_path


@contextlib.asynccontextmanager
async def zero_devices(paths: NodePaths) -> AsyncIterator[str]:
    # Registered through plugins_registry with an endpoint relative to the device-plugins dir; it lists nothing.
    empty = replace(REAL, devices=())
    async with (
        DevicePluginServer(empty, paths.plugins_dir, register=False) as live,
        registry_server(f"{paths.plugins_registry}/vendor-reg.sock", plugin_info(REAL.resource, REAL.socket)),
    ):
        yield live.socket_path


@contextlib.asynccontextmanager
async def registry_served(paths: NodePaths) -> AsyncIterator[str]:
    # The registration socket serves DevicePlugin itself (an empty endpoint); the kubelet knows the devices.
    kubelet = FakePodResources(paths.pod_resources, {REAL.resource: ["GPU-a1", "GPU-b2"]})
    await kubelet.start()
    try:
        sock = f"{paths.plugins_registry}/vendor/gpu.sock"
        async with registry_server(sock, plugin_info(REAL.resource, ""), REAL.devices) as live:
            yield live
    finally:
        await kubelet.stop()


@contextlib.asynccontextmanager
async def symlinked(paths: NodePaths) -> AsyncIterator[str]:
    # The plugin serves under /run; the plugins dir holds a symlink to it (a node path, read under the root).
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-a1", "GPU-b2"]})
    run_dir = Path(paths.root) / "run/vendor"
    run_dir.mkdir(parents=True)
    async with DevicePluginServer(REAL, str(run_dir), register=False) as live:
        (Path(paths.plugins_dir) / REAL.socket).symlink_to(f"/run/vendor/{REAL.socket}")
        yield live.socket_path


TAKEOVERS = {"all-unhealthy": all_unhealthy, "zero-devices": zero_devices, "registry": registry_served}
TAKEOVERS["symlinked"] = symlinked


@pytest.mark.parametrize("case", sorted(TAKEOVERS))
async def test_serve_refuses_to_take_over_a_live_plugin(paths: NodePaths, case: str) -> None:
    root = Path(paths.root)
    async with TAKEOVERS[case](paths) as live:
        # WHEN a person starts a debugging plugin of the same resource
        argv = ("plugin", "serve", "--resource", REAL.resource, "--count", "1", "--socket", "debug.sock")
        code, _, err = await devctl(root, *argv)
        # THEN it refuses in one line that names the live socket, and serves nothing
        assert code == 2, err
        (line,) = err.strip().splitlines()
        assert f"{REAL.resource} is already served by the live plugin at {live}" in line
        assert "--force" in line
        assert "debug.sock" not in os.listdir(paths.plugins_dir)
        # WHEN they insist THEN it serves
        serving = Serving(root, *argv[2:], "--force")
        await serving.start(ready="debug.sock.ctl")
        assert "debug.sock" in os.listdir(paths.plugins_dir)
        code, err = await serving.stop()
        assert code == 0, err


async def test_an_unnamed_plugin_with_every_device_unhealthy_may_serve_the_resource(paths: NodePaths) -> None:
    # GIVEN a vendor's plugin (no devctl control socket, no registry socket) whose every device is
    # unhealthy and held by nobody: the kubelet lists healthy devices only, so nothing on the node names it
    sick = replace(REAL, devices=tuple(replace(d, health="Unhealthy") for d in REAL.devices))
    root = Path(paths.root)
    async with DevicePluginServer(sick, paths.plugins_dir, register=False) as live:
        argv = ("plugin", "serve", "--resource", OTHER.resource, "--count", "1", "--socket", "debug.sock")
        code, _, err = await devctl(root, *argv)
        # THEN a debugging plugin of any resource is refused, saying it cannot be told, and serves nothing
        assert code == 2, err
        (line,) = err.strip().splitlines()
        assert f"{OTHER.resource} may already be served by the live plugin at {live.socket_path}" in line
        assert "all 2 of its devices are unhealthy" in line and "--force" in line
        assert "debug.sock" not in os.listdir(paths.plugins_dir)
    # and a plugin with a healthy device the kubelet does not know is not registered: nothing to take over
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False):
        assert await asyncio.wait_for(live_server_for(OTHER.resource, paths, 1), 5) is None


async def test_a_plugin_whose_socket_devctl_cannot_see_may_serve(paths: NodePaths) -> None:
    # GIVEN a live plugin registered with an endpoint in a subdirectory of the plugins dir (the kubelet joins
    # it to its dir and dials it; devctl lists the dir itself only), and the kubelet listing its healthy devices
    kubelet = FakePodResources(paths.pod_resources, {REAL.resource: ["GPU-a1", "GPU-b2"]})
    hidden = Path(paths.plugins_dir) / "sub"
    hidden.mkdir()
    await kubelet.start()
    try:
        async with DevicePluginServer(REAL, str(hidden), register=False):
            # THEN the guard cannot prove nobody serves it: may serve, refused without --force
            found = await asyncio.wait_for(live_server_for(REAL.resource, paths, 2), 5)
            assert found is not None and not found.certain and found.where is None
            assert "2 healthy device(s)" in (found.why or "")
    finally:
        await kubelet.stop()
