"""Live control of a running plugin over its control socket, as `devctl plugin set-health` does it."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from devctl.lab.plugin.control import ControlError, NoPlugin, control, control_path, running
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import HEALTHY, UNHEALTHY, Device
from devctl.node.deviceplugin import DevicePluginClient

SPEC = PluginSpec(resource="example.com/fpga", devices=(Device("f0", numa_nodes=(0,)), Device("f1")))


@pytest.fixture
async def served(short_root: Path) -> AsyncIterator[tuple[DevicePluginServer, str]]:
    ctl = str(short_root / "ctl")
    async with DevicePluginServer(SPEC, str(short_root / "dp"), register=False, control_dir=ctl) as server:
        yield server, ctl


async def test_set_health_reaches_a_stream(served: tuple[DevicePluginServer, str]) -> None:
    server, ctl = served
    async with DevicePluginClient(server.socket_path, timeout=2) as client:
        stream = client.list_and_watch()
        try:
            await asyncio.wait_for(anext(stream), 2)
            reply = await control(ctl, SPEC.resource, {"op": "set-health", "id": "f1", "health": "unhealthy"}, 2)
            assert reply == {"ok": True}
            devices = await asyncio.wait_for(anext(stream), 1)
        finally:
            await stream.aclose()
    assert [(d.id, d.health) for d in devices] == [("f0", HEALTHY), ("f1", UNHEALTHY)]


async def test_add_remove_and_info(served: tuple[DevicePluginServer, str]) -> None:
    server, ctl = served
    assert (await control(ctl, SPEC.resource, {"op": "add", "id": "f2", "numa": [1]}, 2))["ok"]
    assert (await control(ctl, SPEC.resource, {"op": "remove", "id": "f0"}, 2))["ok"]
    info = await control(ctl, SPEC.resource, {"op": "info"}, 2)
    assert info["resource"] == SPEC.resource and info["socket"] == server.socket_path
    assert [(d["id"], d["numa_nodes"]) for d in info["devices"]] == [("f1", []), ("f2", [1])]


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"op": "set-health", "id": "nope", "health": "Unhealthy"}, "has no device 'nope'"),
        ({"op": "set-health", "id": "f0", "health": "broken"}, "health must be Healthy or Unhealthy"),
        ({"op": "add", "id": "f0"}, "already has a device 'f0'"),
        ({"op": "remove"}, "missing field 'id'"),
        ({"op": "reboot"}, "unknown op 'reboot'"),
    ],
)
async def test_refusals_are_one_line_errors(served: tuple[DevicePluginServer, str], request_: dict, error: str) -> None:
    _, ctl = served
    reply = await control(ctl, SPEC.resource, request_, 2)
    assert reply["ok"] is False and error in reply["error"]


async def test_garbage_line_gets_an_error_reply(served: tuple[DevicePluginServer, str]) -> None:
    server, ctl = served
    reader, writer = await asyncio.open_unix_connection(control_path(ctl, SPEC.socket))
    writer.write(b"not json\n[1]\n")
    replies = [json.loads(await asyncio.wait_for(reader.readline(), 2)) for _ in range(2)]
    writer.close()
    assert [r["ok"] for r in replies] == [False, False]
    assert server.devices == SPEC.devices


async def test_no_plugin_for_the_resource(served: tuple[DevicePluginServer, str]) -> None:
    _, ctl = served
    with pytest.raises(NoPlugin, match=r"no running devctl plugin serves example\.com/other"):
        await control(ctl, "example.com/other", {"op": "info"}, 2)
    with pytest.raises(NoPlugin):
        await control(ctl + "-missing", SPEC.resource, {"op": "info"}, 2)


async def test_stale_and_silent_control_sockets_are_skipped(served: tuple[DevicePluginServer, str]) -> None:
    _, ctl = served
    # a control socket left by a killed plugin (nothing listens) ...
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(os.path.join(ctl, "a-stale.sock.ctl"))
    stale.close()
    # ... and one that accepts and never answers
    silent = await asyncio.start_unix_server(lambda r, w: None, os.path.join(ctl, "b-silent.sock.ctl"))
    try:
        found = await asyncio.wait_for(running(ctl, 0.5), 3)
        assert [info["resource"] for _, info in found] == [SPEC.resource]
    finally:
        silent.close()


async def test_stop_removes_the_control_socket(short_root: Path) -> None:
    ctl = str(short_root / "ctl")
    server = DevicePluginServer(SPEC, str(short_root / "dp"), register=False, control_dir=ctl)
    await server.start()
    assert os.listdir(ctl) == [SPEC.socket + ".ctl"]
    await server.stop()
    assert os.listdir(ctl) == []


def _control_as_nobody(ctl: str, resource: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    os.setgid(65534)
    os.setuid(65534)
    try:
        reply = asyncio.run(control(ctl, resource, {"op": "info"}, 2))
        results.put(("ok", str(reply)))
    except ControlError as e:
        results.put((type(e).__name__, str(e)))


async def as_nobody(ctl: str, resource: str) -> tuple[str, str]:
    """Ask the plugin from a child process that dropped root, as a user without rights would."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_control_as_nobody, args=(ctl, resource, results))
    child.start()
    try:
        return await asyncio.wait_for(asyncio.to_thread(results.get, True, 20), 25)
    finally:
        await asyncio.to_thread(child.join, 5)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
async def test_permission_denied_is_said_not_hidden(served: tuple[DevicePluginServer, str], short_root: Path) -> None:
    _, ctl = served
    # GIVEN the root's directories are not open to others: the control dir cannot be read
    kind, message = await as_nobody(ctl, SPEC.resource)
    assert (kind, message) == ("ControlError", f"{ctl}: permission denied (plugins run as another user; try as root)")
    # GIVEN the directories are open but the socket is root's (srwxr-xr-x: no write, so no connect)
    for path in (short_root, Path(ctl)):
        path.chmod(0o755)
    os.chmod(control_path(ctl, SPEC.socket), 0o755)
    kind, message = await as_nobody(ctl, SPEC.resource)
    expected = f"{control_path(ctl, SPEC.socket)}: permission denied (plugins run as another user; try as root)"
    assert (kind, message) == ("ControlError", expected)


async def test_the_resolvers_ask_leaves_the_devices_out(served: tuple[DevicePluginServer, str]) -> None:
    # Who serves what is all `ls` and the socket resolver need: a DRA driver's full list is 30 KB for 250 devices.
    server, ctl = served
    ((path, brief),) = await running(ctl, 2)
    assert path == control_path(ctl, SPEC.socket)
    assert brief == {"ok": True, "resource": SPEC.resource, "socket": server.socket_path, "registered": False}
    assert len((await control(ctl, SPEC.resource, {"op": "info"}, 2))["devices"]) == 2


def test_a_dra_drivers_brief_info_names_it_without_its_devices_or_claims(sim_node) -> None:
    from devctl.node.controlsockets import default_control_dir

    replies = dict(asyncio.run(running(default_control_dir(str(sim_node.root)), 5)))
    (dra,) = [r for r in replies.values() if r.get("kind") == "dra"]
    assert dra["resource"] == "gpu.example.com" and dra["socket"].endswith("dra.sock")
    assert "devices" not in dra and "prepared" not in dra
    full = asyncio.run(control(default_control_dir(str(sim_node.root)), "gpu.example.com", {"op": "info"}, 5))
    assert full["devices"] and full["prepared"]
