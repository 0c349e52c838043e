"""The TUI on a node whose plugin and pods carry hostile strings: shown literally, escaped, nothing crashes or fires.

The default scenario with the foo plugin listing the hostile-input probe's
device IDs (a newline, ``ESC[2J``, OSC title and clipboard sequences, a bidi
override, NEL, Textual markup ``[/`` and ``[@click=app.quit]``) and a pod
and container whose names hold more of them, served on real sockets by the
simulated kubelet on the test's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from test_escape import EVIL_HEALTH, HOSTILE, raw_controls
from test_tui_app import cells, open_devices, table
from test_tui_support import pinned_clock, screen_text, until, until_view
from textual.widgets._toast import Toast

from devctl.base.escape import escape
from devctl.lab.sim.node import SimNode
from devctl.lab.sim.scenario import Scenario, default_scenario, pod_uid
from devctl.model import Device
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.feeds import NodeFeed, PluginControls
from devctl.tui.screens.detail import ContainerScreen

FOO = "hardware-vendor.example/foo"
POD, CONTAINER = "serve-1\x1b]0;pwned\x07[bold]", "server[@click=app.quit]x"
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"


def hostile_scenario() -> Scenario:
    base = default_scenario()
    resources = []
    for spec in base.resources:
        if spec.resource == FOO:
            devices = (*(Device(i) for i in HOSTILE), Device("sick", EVIL_HEALTH))
            allocate = replace(spec.allocate, annotations={"note\u202e": CLIPBOARD})
            spec = replace(spec, devices=devices, allocate=allocate)
        resources.append(spec)
    pods = []
    for pod in base.pods:
        if pod.name == "serve-1":
            containers = tuple(replace(c, name=CONTAINER) for c in pod.containers)
            pod = replace(pod, name=POD, uid=pod_uid(pod.namespace, POD), containers=containers)
        pods.append(pod)
    return replace(base, resources=tuple(resources), pods=tuple(pods))


@pytest.fixture
async def hostile(short_root: Path) -> AsyncIterator[SimNode]:
    async with SimNode(short_root, hostile_scenario()) as node:
        await asyncio.wait_for(node.ready(), 15)
        yield node


def app_on(node: SimNode) -> DevctlApp:
    return make_app(NodeFeed(node.paths, 2.0, controls=PluginControls(node.plugins)), label="demo", clock=pinned_clock)


def toasts(app: DevctlApp) -> list[str]:
    return [str(t.render()) for t in app.screen.query(Toast)]


def assert_safe_screen(app: DevctlApp) -> str:
    text = screen_text(app)
    assert not raw_controls(text), text
    return text


async def test_hostile_device_ids_show_literally_in_the_devices_view(hostile: SimNode) -> None:
    app = app_on(hostile)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app, FOO)
        await until(pilot, lambda: len(table(app, "devices").rows) == len(HOSTILE) + 1, "every foo device")
        rows = table(app, "devices").rows
        assert {r.key for r in rows} == {*HOSTILE, "sick"}  # keys stay raw: they name the device to act on
        for device_id in HOSTILE:
            assert cells(app, "devices", device_id)[0] == escape(device_id)
        assert cells(app, "devices", "sick")[1] == "\\x1b[31mHealthy\\x1b]0;pwned\\x07"
        text = assert_safe_screen(app)
        for shown in ("markup[/", "[@click=app.quit]x", "cls\\x1b[2J", "nl\\nforged-row", "bidi\\u202eabc"):
            assert shown in text


async def test_a_toast_naming_a_hostile_device_is_plain_text_and_fires_nothing(hostile: SimNode) -> None:
    app = app_on(hostile)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app, FOO)
        devices = table(app, "devices")
        await until(pilot, lambda: "markup[/" in [r.key for r in devices.rows], "the markup[/ device")
        # GIVEN a device no container holds WHEN Enter THEN a toast says so, as plain text.
        assert cells(app, "devices", "[@click=app.quit]x")[3] == "free"
        assert devices.move_to_key("[@click=app.quit]x")
        await pilot.press("enter")
        await until(pilot, lambda: any("is not held" in t for t in toasts(app)), "the toast")
        assert any("[@click=app.quit]x is not held" in t for t in toasts(app)), toasts(app)
        # Clicking all over the toast (which dismisses it) fires no action: the app is still running.
        for toast in app.screen.query(Toast):
            region = toast.region
            for y in range(region.y, region.bottom):
                for x in range(region.x, region.right, 4):
                    await pilot.click(offset=(x, y))
        await pilot.pause(0.2)
        assert app.is_running and app.return_code is None
        # "[/" in a toast was a MarkupError that ended the app.
        assert cells(app, "devices", "markup[/")[3] == "free"
        assert devices.move_to_key("markup[/")
        await pilot.press("enter")
        await until(pilot, lambda: any("markup[/ is not held" in t for t in toasts(app)), "the [/ toast")
        # h flips the health of a device of the in-process plugin: its toast names the hostile ID escaped.
        assert devices.move_to_key("cls\x1b[2J")
        await pilot.press("h")
        await until(pilot, lambda: any("cls\\x1b[2J: Unhealthy" in t for t in toasts(app)), "the health toast")
        assert not any(raw_controls(t) for t in toasts(app))
        assert_safe_screen(app)


async def test_pods_numa_and_detail_show_hostile_names_escaped(hostile: SimNode) -> None:
    app = app_on(hostile)
    async with app.run_test(size=(140, 50)) as pilot:
        await until_view(pilot)
        await pilot.press("3")
        pods = table(app, "pods")
        key = next(r.key for r in pods.rows if POD in r.key)
        assert cells(app, "pods", key)[0] == f"inference/{escape(POD)}"
        assert cells(app, "pods", key)[1] == CONTAINER  # markup characters are plain text
        assert_safe_screen(app)
        assert pods.move_to_key(key)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContainerScreen), "the container detail")
        text = assert_safe_screen(app)
        assert escape(POD) in text and CONTAINER in text
        assert escape(CLIPBOARD) in text and "note\\u202e" in text
        assert any(f"FOO_DEVICES={escape(i)}" in text for i in HOSTILE)  # the env the plugin's Allocate gave
        await pilot.press("escape")
        await pilot.press("4")
        assert_safe_screen(app)
        assert app.is_running
