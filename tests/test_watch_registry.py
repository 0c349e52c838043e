"""``devctl watch`` finds what ``devctl plugins`` finds: device plugins registered through ``plugins_registry/``.

The upstream device-plugin stub can register with the kubelet's plugin
watcher: a socket in ``plugins_registry/`` whose GetInfo says type
``DevicePlugin``, the resource as its name and the DevicePlugin socket as its
endpoint, which need not be in the plugins dir. Real gRPC servers on real
unix sockets (``tests/registry.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest
from registry import plugin_info, registry_server
from test_watch import timeline

from devctl.core.watch import WatchEvent, watch
from devctl.model import Device, NodePaths
from devctl.node.paths import resolve_paths

STUB = "example.com/stub"
DEVICES = (Device("s0"), Device("s1"), Device("s2", health="Unhealthy"))


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    os.makedirs(p.plugins_dir)
    os.makedirs(p.plugins_registry)
    return p


def registration(paths: NodePaths) -> str:
    return f"{paths.plugins_registry}/stub-reg.sock"


@pytest.mark.parametrize("endpoint", ["", "elsewhere"])
async def test_a_named_resource_registered_in_the_registry_is_followed(paths: NodePaths, endpoint: str) -> None:
    """The registration serves DevicePlugin itself (empty endpoint), or names a socket outside the plugins dir."""
    dp_socket = str(Path(paths.root) / "var/lib/kubelet/plugins/stub/dp.sock")
    node_endpoint = "/var/lib/kubelet/plugins/stub/dp.sock" if endpoint else ""
    async with contextlib.AsyncExitStack() as stack:
        if endpoint:
            await stack.enter_async_context(registry_server(dp_socket, plugin_info(STUB, ""), DEVICES))
        devices = None if endpoint else DEVICES
        await stack.enter_async_context(registry_server(registration(paths), plugin_info(STUB, node_endpoint), devices))
        t = await stack.enter_async_context(timeline(paths, resources=[STUB]))
        snap = await t.next(timeout=10)
        assert (snap.event, snap.resource, snap.devices, snap.healthy) == ("snapshot", STUB, 3, 2)
        assert snap.socket == (dp_socket if endpoint else registration(paths))


async def test_a_whole_node_watch_shows_a_registry_plugin_and_names_it(paths: NodePaths) -> None:
    async with (
        registry_server(registration(paths), plugin_info(STUB, ""), DEVICES),
        timeline(paths) as t,
    ):
        snap = await t.next(timeout=10)
        assert (snap.event, snap.resource, snap.socket, snap.devices) == ("snapshot", STUB, registration(paths), 3)
        assert not [n for n in t.notices if "no device plugin sockets" in n]


async def test_a_whole_node_once_shows_a_registry_plugin_and_ends(paths: NodePaths) -> None:
    async with registry_server(registration(paths), plugin_info(STUB, ""), DEVICES):
        items = []

        async def run() -> None:
            async with contextlib.aclosing(watch(paths, once=True, timeout=2.0)) as stream:
                async for item in stream:
                    items.append(item)

        await asyncio.wait_for(run(), 20)  # ends: it does not wait for ever
    events = [i for i in items if isinstance(i, WatchEvent)]
    assert [(e.event, e.resource, e.devices) for e in events] == [("snapshot", STUB, 3)]


async def test_a_registration_whose_endpoint_leaves_the_root_is_said_once_naming_it_once(paths: NodePaths) -> None:
    """One notice for the one registration, its path in it once, not repeated as the registry is looked at again."""
    async with (
        registry_server(registration(paths), plugin_info(STUB, "../../../../../../../etc/evil.sock"), DEVICES),
        registry_server(f"{paths.plugins_dir}/good.sock", plugin_info("x", ""), (Device("g0"),)),
        timeline(paths) as t,
    ):
        await t.next(timeout=10)  # the good plugin's snapshot: the watch goes on
        said = await t.said("not dialled", timeout=10)
        await asyncio.sleep(1.5)  # several looks at the registry later
    assert said.count(registration(paths)) == 1, said
    assert len([n for n in t.notices if "not dialled" in n]) == 1, t.notices


async def test_a_followed_socket_that_goes_away_is_named_once_in_its_notice(paths: NodePaths) -> None:
    """An unnamed socket (no kubelet here) is its own name: the notice of its end says its path once."""
    socket = f"{paths.plugins_dir}/lone.sock"
    async with timeline(paths) as t:
        async with registry_server(socket, plugin_info("x", ""), (Device("l0"),)):
            snap = await t.next(timeout=10)
            assert (snap.event, snap.socket, snap.resource) == ("snapshot", socket, None)
        await t.until("disconnected", timeout=10)
        said = await t.said("reconnecting", timeout=10)
    assert said.count(socket) == 1, said
