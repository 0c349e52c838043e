"""The guard finds a live plugin already serving a resource, from what the kubelet knows of its devices."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from test_plugin_fakes import FakePodResources

from devctl.model import Device, NodePaths
from devctl.node.checkpoint import write_checkpoint
from devctl.node.paths import resolve_paths
from devctl.plugin.guard import live_server_for
from devctl.plugin.server import DevicePluginServer
from devctl.plugin.spec import PluginSpec

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
            assert found == real.socket_path
            # and nothing is found for a resource the kubelet knows no devices of, or when ours is excluded
            assert await asyncio.wait_for(live_server_for(OTHER.resource, paths, 2), 5) is None
            excluded = await asyncio.wait_for(live_server_for(REAL.resource, paths, 2, exclude=[real.socket_path]), 5)
            assert excluded is None
    finally:
        await kubelet.stop()


async def test_found_through_the_checkpoint(paths: NodePaths) -> None:
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-b2"]})
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False) as real:
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 2), 5) == real.socket_path


async def test_a_dead_plugin_is_not_serving(paths: NodePaths) -> None:
    # GIVEN the checkpoint names the devices, but the plugin's socket is stale (it crashed)
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-a1", "GPU-b2"]})
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(Path(paths.plugins_dir) / REAL.socket))
    stale.close()
    assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 1), 5) is None


async def test_found_through_a_devctl_control_socket(paths: NodePaths) -> None:
    # No kubelet at all: a running devctl plugin still says what it serves.
    ctl = str(Path(paths.root) / "ctl")
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False, control_dir=ctl) as real:
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 2, control_dir=ctl), 5) == real.socket_path
        assert await asyncio.wait_for(live_server_for(OTHER.resource, paths, 2, control_dir=ctl), 5) is None


async def test_nothing_known_nothing_found(paths: NodePaths) -> None:
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False):
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 1), 5) is None
