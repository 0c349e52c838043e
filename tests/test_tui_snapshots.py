"""SVG snapshots of each screen on the default scenario, with time, paths and live events pinned.

The node is collected once from the simulated default scenario (real sockets),
then replayed through a scripted feed so that every run draws the same
screen. Update after an intended change with ``pytest --snapshot-update``
and look at the report before committing.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from test_tui_support import FIXED_PATHS, PINNED, ScriptedFeed, pin_snapshot, pinned_clock, until, until_view
from textual.pilot import Pilot

from devctl.core.watch import WatchEvent
from devctl.model import NodeSnapshot
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.widgets.table import RowTable

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def node() -> Iterator[NodeSnapshot]:
    from devctl.core.collect import collect
    from devctl.lab.sim.scenario import default_scenario
    from devctl.lab.sim.thread import running_sim

    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, default_scenario()) as sim:
            snapshot = asyncio.run(collect(sim.paths, 5.0))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    yield pin_snapshot(snapshot)


def live_events() -> list[WatchEvent]:
    """What the event log shows: three first lists, then GPU-7 going bad and the plugin restarting."""
    dp = FIXED_PATHS.plugins_dir
    at = [PINNED + timedelta(milliseconds=ms) for ms in (0, 2, 3, 1500, 4000, 5200)]
    return [
        WatchEvent(at[0], "hardware-vendor.example/foo", f"{dp}/foo.sock", "snapshot", devices=2, healthy=2),
        WatchEvent(at[1], "intel.com/sriov_netdevice", f"{dp}/sriov-netdevice.sock", "snapshot", devices=8, healthy=8),
        WatchEvent(at[2], GPU, f"{dp}/nvidia-gpu.sock", "snapshot", devices=8, healthy=7),
        WatchEvent(at[3], GPU, f"{dp}/nvidia-gpu.sock", "health", "GPU-7", "Healthy", "Unhealthy", 8, 6),
        WatchEvent(at[4], GPU, f"{dp}/nvidia-gpu.sock", "disconnected", devices=8, healthy=6),
        WatchEvent(at[5], GPU, f"{dp}/nvidia-gpu.sock", "reconnected", devices=8, healthy=6),
    ]


def app_on(snapshot: NodeSnapshot) -> DevctlApp:
    return make_app(ScriptedFeed(snapshot, live_events()), label="demo", clock=pinned_clock)


async def settled(pilot: Pilot) -> None:
    """The view is built and every scripted event is in it."""
    await until_view(pilot)
    await until(pilot, lambda: pilot.app.screen.query_one("EventsPane").lines >= 6, "the scripted events")
    # the first screen's last events take them in batches of their own (at most 4 a second)
    recent = pilot.app.screen.query_one("#recent-table", RowTable)
    await until(pilot, lambda: len(recent.rows) >= 6, "the scripted events on the first screen")
    await until(pilot, lambda: pilot.app.screen.view.devices[GPU][7].health == "Unhealthy", "GPU-7 unhealthy")
    screen = pilot.app.screen
    await until(pilot, lambda: screen.findings_for is screen.view, "doctor's findings on the newest view")


def test_resources(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), terminal_size=(80, 24), run_before=settled)


def test_devices_of_the_gpus(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["down", "down", "enter"], terminal_size=(80, 24), run_before=settled)


def test_pods(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["3"], terminal_size=(80, 24), run_before=settled)


def test_numa_map(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["4"], terminal_size=(80, 24), run_before=settled)


def test_event_log(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["5"], terminal_size=(80, 24), run_before=settled)


def test_claims(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["6"], terminal_size=(80, 24), run_before=settled)


def test_a_finding_with_its_hint(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    # down past the five resources onto the first finding (an error), then Enter
    press = ["down", "down", "down", "down", "down", "enter"]
    assert snap_compare(app_on(node), press=press, terminal_size=(80, 24), run_before=settled)


def test_an_event_in_full(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    press = ["5", "end", "enter"]
    assert snap_compare(app_on(node), press=press, terminal_size=(80, 24), run_before=settled)


def test_help(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    assert snap_compare(app_on(node), press=["question_mark"], terminal_size=(80, 24), run_before=settled)


def test_container_detail_at_80_by_24(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    press = ["3", "down", "down", "down", "down", "down", "enter"]  # ml/train-0 trainer (after chat/bot-0, bot-1)
    assert snap_compare(app_on(node), press=press, terminal_size=(80, 24), run_before=settled)


def test_container_detail(snap_compare: Callable[..., bool], node: NodeSnapshot) -> None:
    press = ["3", "down", "down", "down", "down", "down", "enter"]  # ml/train-0 trainer (after chat/bot-0, bot-1)
    assert snap_compare(app_on(node), press=press, terminal_size=(100, 34), run_before=settled)


def test_no_color_draws_in_greys_only(monkeypatch: pytest.MonkeyPatch, node: NodeSnapshot) -> None:
    # GIVEN NO_COLOR WHEN the app draws THEN every colour in the picture is a grey (r, g and b within a hair).
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_on(node)
    svgs: list[str] = []

    async def draw() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            svgs.append(app.export_screenshot())
            await pilot.press("4")
            svgs.append(app.export_screenshot())

    asyncio.run(draw())
    assert app.no_color
    window_buttons = {"ff5f57", "febc2e", "28c840"}  # the picture's frame, drawn by the SVG exporter
    for svg in svgs:
        colours = set(re.findall(r"#([0-9a-f]{6})\b", svg)) - window_buttons
        assert colours, "no colours found in the SVG"
        channels = [[int(c[i : i + 2], 16) for i in (0, 2, 4)] for c in colours]
        assert all(max(rgb) - min(rgb) <= 8 for rgb in channels), sorted(colours)
