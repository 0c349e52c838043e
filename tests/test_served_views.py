"""Every view answers "which socket serves R" as the guard does: all-unhealthy and symlinked plugins are served.

The commands run as a user runs them, as processes against a node under a
temporary root, while real plugin servers answer in this test's event loop.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import run_devctl_async
from registry import plugin_info, registry_server

from devctl.lab.plugin.control import default_control_dir
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import Device, NodePaths
from devctl.node.checkpoint import write_checkpoint
from devctl.node.paths import resolve_paths

GPU = "vendor.example/gpu"
SICK = PluginSpec(GPU, (Device("GPU-a1", "Unhealthy", (0,)), Device("GPU-b2", "Unhealthy", (1,))), "vendor.sock")


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    Path(p.plugins_dir).mkdir(parents=True)
    return p


async def devctl_json(paths: NodePaths, *args: str) -> dict:
    code, out, err = await run_devctl_async("--root", paths.root, "--timeout", "3", *args, "-o", "json")
    assert code in (0, 1), err
    return json.loads(out)


@contextlib.asynccontextmanager
async def every_device_unhealthy(paths: NodePaths) -> AsyncIterator[str]:
    # The kubelet knows the resource but, its lists holding healthy devices only, none of its IDs;
    # the plugin is a running devctl plugin, whose control socket says what it serves.
    write_checkpoint(paths.checkpoint, [], {GPU: []})
    async with DevicePluginServer(
        SICK, paths.plugins_dir, register=False, control_dir=default_control_dir(paths.root)
    ) as p:
        yield p.socket_path


async def test_an_all_unhealthy_resource_is_served_in_ls_devices_and_watch(paths: NodePaths) -> None:
    async with every_device_unhealthy(paths) as live:
        ls = await devctl_json(paths, "ls")
        devices = await devctl_json(paths, "devices")
        code, out, err = await run_devctl_async("--root", paths.root, "watch", GPU, "--once", "-o", "json")
    (row,) = ls["resources"]
    assert (row["name"], row["socket"], row["status"]) == (GPU, live, "serving")
    assert (row["capacity"], row["allocatable"], row["unhealthy"]) == (2, 0, 2)
    # No pod-resources on this node: whether a container still holds them is unknown (null), not "free".
    assert [(d["id"], d["health"], d["state"]) for d in devices["devices"]] == [
        ("GPU-a1", "Unhealthy", None),
        ("GPU-b2", "Unhealthy", None),
    ]
    assert code == 0, err
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert (event["event"], event["resource"], event["socket"]) == ("snapshot", GPU, live)
    assert (event["devices"], event["healthy"]) == (2, 0)


async def test_a_symlinked_plugin_socket_shows_in_plugins_once(paths: NodePaths) -> None:
    # GIVEN a plugin serving under /run, linked into the plugins dir twice (a node path and a relative one)
    write_checkpoint(paths.checkpoint, [], {GPU: ["GPU-a1", "GPU-b2"]})
    run_dir = Path(paths.root) / "run/vendor"
    run_dir.mkdir(parents=True)
    healthy = PluginSpec(GPU, tuple(Device(d.id, "Healthy", d.numa_nodes) for d in SICK.devices), SICK.socket)
    async with DevicePluginServer(healthy, str(run_dir), register=False):
        (Path(paths.plugins_dir) / "gpu.sock").symlink_to(f"/run/vendor/{SICK.socket}")
        (Path(paths.plugins_dir) / "gpu-again.sock").symlink_to("gpu.sock")
        plugins = await devctl_json(paths, "plugins")
        ls = await devctl_json(paths, "ls")
        code, out, err = await run_devctl_async("--root", paths.root, "watch", "--once", "-o", "json")
    # THEN `plugins` shows it, once, with its resource, `ls` counts it as served, and a whole-node watch follows it
    assert code == 0, err
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert (event["event"], event["resource"], event["socket"]) == ("snapshot", GPU, str(run_dir / SICK.socket))
    (row,) = plugins["plugins"]
    assert os.path.basename(row["socket"]) in ("gpu.sock", "gpu-again.sock")
    assert (row["resource"], row["status"], row["devices"], row["healthy"]) == (GPU, "serving", 2, 2)
    (res,) = ls["resources"]
    assert (res["status"], res["capacity"], res["allocatable"]) == ("serving", 2, 2)


async def test_call_reaches_a_registry_served_plugin_at_its_endpoint(paths: NodePaths) -> None:
    # GIVEN a plugin registered through plugins_registry, its endpoint a node path outside the plugins dir
    dp_dir = Path(paths.kubelet_dir) / "plugins/vendor"
    dp_dir.mkdir(parents=True)
    info = plugin_info(GPU, f"/var/lib/kubelet/plugins/vendor/{SICK.socket}")
    async with (
        DevicePluginServer(SICK, str(dp_dir), register=False),
        registry_server(f"{paths.plugins_registry}/vendor-reg.sock", info),
    ):
        # WHEN a person asks the resource's plugin for its list THEN the endpoint answers, not the registry socket
        called = await devctl_json(paths, "call", GPU, "list")
        ls = await devctl_json(paths, "ls")
    assert called["socket"] == str(dp_dir / SICK.socket)
    assert [d["id"] for d in called["reply"]["devices"]] == ["GPU-a1", "GPU-b2"]
    (row,) = ls["resources"]
    assert (row["status"], row["capacity"], row["allocatable"], row["unhealthy"]) == ("serving", 2, 0, 2)
