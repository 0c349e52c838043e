"""`devctl plugin serve` against the simulated kubelet: the guard, live health, and a kubelet restart.

The plugin runs as its own process, the simulated node in this one; they meet
only through the sockets under the node's root, as on a real node.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_plugin_fakes import Serving, devctl

from devctl.core.guard import live_server_for
from devctl.lab.sim.node import SimNode
from devctl.lab.sim.scenario import default_scenario

GPU = "nvidia.com/gpu"
NEW = "example.com/widget"


@pytest.fixture
async def node(short_root: Path) -> AsyncIterator[SimNode]:
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(10)
        yield n


async def test_guard_knows_a_scenario_plugin_from_the_kubelet(node: SimNode) -> None:
    # Without the control sockets: only pod-resources and the checkpoint say which socket serves the GPUs.
    found = await asyncio.wait_for(live_server_for(GPU, node.paths, 2), 10)
    assert found is not None and found.certain and found.where == node.plugins[GPU].socket_path
    assert await asyncio.wait_for(live_server_for(NEW, node.paths, 2), 10) is None


async def test_serve_over_a_scenario_resource_is_refused(node: SimNode) -> None:
    code, _, err = await devctl(node.root, "plugin", "serve", "--resource", GPU, "--count", "1", "--socket", "x.sock")
    assert code == 2
    assert f"{GPU} is already served by the live plugin at {node.plugins[GPU].socket_path}" in err
    assert "x.sock" not in os.listdir(node.paths.plugins_dir)


async def test_external_plugin_health_and_kubelet_restart(node: SimNode) -> None:
    # GIVEN an external `devctl plugin serve` registered with the simulated kubelet
    serving = Serving(node.root, "--resource", NEW, "--device", "w-0@0", "--device", "w-1@1")
    await serving.start(ready="devctl-example.com-widget.sock.ctl")
    try:
        await node.device_manager.wait_until(lambda: node.device_manager.connected(NEW), 10)
        state = node.device_manager.resource(NEW)
        assert state is not None and (state.capacity, state.allocatable) == (2, 2)
        # WHEN another shell marks a device unhealthy THEN the device manager sees it within a second
        code, _, err = await devctl(node.root, "plugin", "set-health", NEW, "w-1", "unhealthy")
        assert code == 0, err
        dm = node.device_manager
        await dm.wait_until(lambda: (s := dm.resource(NEW)) is not None and s.allocatable == 1, 1)
        # WHEN the kubelet restarts THEN the plugin serves and registers again within 5 s of kubelet.sock
        # coming back (restart_kubelet returns once it has: its own stop and start are not the plugin's time)
        await node.restart_kubelet()
        dm = node.device_manager
        await dm.wait_until(lambda: dm.connected(NEW), 5)
        state = dm.resource(NEW)
        assert state is not None and (state.capacity, state.allocatable) == (2, 1)
    finally:
        code, err = await serving.stop(signal.SIGTERM)
    assert code == 0, err
    assert "devctl-example.com-widget.sock" not in os.listdir(node.paths.plugins_dir)
