"""The TUI's DRA views and its first screen, as a person at the node uses them: Pilot on the simulated node.

The default scenario has a DRA driver (gpu.example.com, four devices, gpu-3
unhealthy) with two prepared claims beside the device plugins; doctor finds an
unhealthy DRA device in use (an error) and misaligned containers (warnings).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

from test_tui_support import (  # noqa: F401  (sim: a fixture)
    PINNED,
    ScriptedFeed,
    demo_app,
    pinned_clock,
    screen_text,
    sim,
    until,
    until_view,
)

from devctl.analyze.claims import claims_view
from devctl.core.collect import collect
from devctl.core.events import Notice
from devctl.core.watch import WatchEvent
from devctl.lab.sim.node import SimNode
from devctl.model import ALL_SOURCES, HOLDER_SOURCES, NodeSnapshot
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.feeds import NodeFeed
from devctl.tui.screens.detail import ContainerScreen
from devctl.tui.screens.help import HELP, HelpScreen
from devctl.tui.screens.text import TextScreen
from devctl.tui.widgets.table import RowTable

DRIVER = "gpu.example.com"


def table(app: DevctlApp, name: str) -> RowTable:
    return app.screen.query_one(f"#{name}-table", RowTable)


def keys(app: DevctlApp, name: str) -> list[str]:
    return [r.key for r in table(app, name).rows]


def modal_text(app: DevctlApp) -> str:
    return str(app.screen.query_one("#text").render())


async def test_claims_view_has_the_rows_and_states_of_devctl_claims(sim: SimNode) -> None:  # noqa: F811
    expected = claims_view(await collect(sim.paths, 2.0, want=ALL_SOURCES | HOLDER_SOURCES))
    assert expected, "the default scenario has DRA claims"
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        # GIVEN the TUI WHEN 6 is pressed THEN one row per claim, each with the state devctl claims gives it
        await pilot.press("6")
        assert app.screen.active == "claims"
        await until(pilot, lambda: len(keys(app, "claims")) == len(expected), "a row per claim")
        for claim in expected:
            row = next(r for r in table(app, "claims").rows if r.key == f"{claim.namespace}/{claim.name}")
            assert row.cells[1] == claim.state, (row.cells, claim.state)
        train = next(r for r in table(app, "claims").rows if r.key == "ml/train-1-gpus")
        assert train.cells[4] == "Healthy,Unhealthy" and train.cells[6] == "ml/train-1"
        # WHEN Enter on a claim THEN its devices in full: health, and each CDI name resolved to device nodes
        table(app, "claims").move_to_key("ml/train-1-gpus")
        await pilot.press("enter")
        assert isinstance(app.screen, TextScreen)
        text = modal_text(app)
        assert "state prepared" in text and "gpu.example.com sim-node/gpu-3  Unhealthy" in text
        assert "cdi k8s.gpu.example.com/claim=" in text and "device /dev/dra/gpu.example.com/gpu-3" in text
        await pilot.press("escape")
        # AND :claims gets there too, from any view
        await pilot.press("1", "colon", *"claims", "enter")
        await until(pilot, lambda: app.screen.active == "claims", ":claims")


async def test_dra_devices_in_the_devices_view(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await pilot.press("colon", *f"devices {DRIVER}", "enter")
        await until(pilot, lambda: app.screen.active == "devices", "the devices view")
        await until(pilot, lambda: "sim-node/gpu-3" in keys(app, "devices"), "the driver's devices")
        row = next(r for r in table(app, "devices").rows if r.key == "sim-node/gpu-3")
        assert row.cells[1:4] == ("Unhealthy", "1", "unhealthy-allocated")
        assert f"{DRIVER} · serving · 4 devices, 3 healthy" in screen_text(app)


async def test_dra_health_reaches_the_event_log_the_views_and_the_container_detail(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 34)) as pilot:
        await until_view(pilot)

        def events() -> list[tuple[str, ...]]:
            return [r.cells[1:] for r in table(app, "recent").rows]

        await until(pilot, lambda: ("snapshot", DRIVER, "-", "4 devices, 3 healthy") in events(), "the DRA snapshot")
        # WHEN the driver reports gpu-0 unhealthy with a message on its health stream
        sim.dra_drivers[DRIVER].set_health("gpu-0", "Unhealthy", "XID 79: fell off the bus")
        # THEN the event log has it, with the driver's message, as `devctl watch gpu.example.com` words it
        line = ("health", DRIVER, "sim-node/gpu-0", "Healthy → Unhealthy · XID 79: fell off the bus")
        await until(pilot, lambda: line in events(), "the DRA health event")
        await pilot.press("5")
        await until(pilot, lambda: line in [r.cells[1:] for r in table(app, "events").rows], "in the event log")
        # AND the views follow the stream at once (no poll needed): the claim's health, the device's state
        await pilot.press("6")
        await until(
            pilot,
            lambda: any(
                r.key == "inference/embed-gpu" and r.cells[4] == "Unhealthy" for r in table(app, "claims").rows
            ),
            "the claim's device unhealthy",
        )
        # AND the container detail says why, beside the claim's CDI resolution
        await pilot.press("3")
        await until(pilot, lambda: table(app, "pods").move_to_key("inference/embed-0/embedder"), "the embedder row")
        await pilot.press("enter")
        assert isinstance(app.screen, ContainerScreen)
        await until(pilot, lambda: "health: XID 79: fell off the bus" in screen_text(app), "the health message")
        text = screen_text(app)
        assert "DRA claims: device health and CDI as the runtime resolves it" in text
        assert "device /dev/dra/gpu.example.com/gpu-0 (PCI 0000:d0:00.0, NUMA 0)" in text


async def test_the_header_keeps_counts_and_clock_at_80_columns(sim: SimNode) -> None:  # noqa: F811
    app = make_app(NodeFeed(sim.paths, 2.0), label="demo (simulated node)", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: "misal" in screen_text(app).splitlines()[0], "the counts")
        header = screen_text(app).splitlines()[0].rstrip()
        assert header == " demo (simulated node) · 5 res · 8 pods · 2 bad · 2 misal · 03:04:05", header
    wide = make_app(NodeFeed(sim.paths, 2.0), label="demo (simulated node)", clock=pinned_clock)
    async with wide.run_test(size=(140, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: "misaligned" in screen_text(wide).splitlines()[0], "the long form")
        assert "5 resources · 8 pods · 2 unhealthy · 2 misaligned · 03:04:05" in screen_text(wide).splitlines()[0]


async def test_the_first_screen_shows_findings_errors_first_and_the_last_events(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 35)) as pilot:
        await until_view(pilot)
        findings = table(app, "findings")
        # (the first view may be partial, the first poll still reading: wait for the findings of the whole node)
        first = "dra-device-unhealthy-in-use"
        await until(pilot, lambda: findings.rows and findings.rows[0].cells[1] == first, "doctor's findings")
        severities = [r.cells[0] for r in findings.rows]
        assert severities[0] == "error" and severities == sorted(severities, key=["error", "warning", "info"].index)
        text = screen_text(app)
        assert "Findings (devctl doctor)" in text and "Last events" in text
        await until(pilot, lambda: table(app, "recent").rows, "the last events")
        # WHEN ↓ walks off the resources onto the first finding and Enter is pressed THEN its hint, in full
        resources = table(app, "resources")
        for _ in range(len(resources.rows)):
            await pilot.press("down")
        await until(pilot, lambda: app.focused is findings, "the findings to take the focus")
        await pilot.press("enter")
        assert isinstance(app.screen, TextScreen)
        assert "hint: the kubelet does not take a device from a running pod" in modal_text(app)
        await pilot.press("escape")
        # AND ↓ goes on into the last events, ↑ back
        for _ in range(len(findings.rows)):
            await pilot.press("down")
        await until(pilot, lambda: app.focused is table(app, "recent"), "the last events to take the focus")
        await pilot.press("home", "up")
        assert app.focused is findings


async def test_event_log_in_time_order_full_text_on_enter_and_notices(sim: SimNode) -> None:  # noqa: F811
    snapshot = await collect(sim.paths, 2.0)
    gpu_sock = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
    late = WatchEvent(PINNED + timedelta(seconds=2), "nvidia.com/gpu", gpu_sock, "snapshot", devices=8, healthy=7)
    # A long status line, and an event older than the one before it (they arrive by different paths).
    long = "plugin " + "x" * 150 + " said goodbye"
    early = WatchEvent(
        PINNED + timedelta(seconds=1), "nvidia.com/gpu", gpu_sock, "health", "GPU-1", "Healthy", "Unhealthy"
    )
    release = threading.Event()

    class TwoBatches(ScriptedFeed):
        """The late event and the notice first; the older event only once they are on screen."""

        async def events(self, resolve: object) -> AsyncIterator[object]:
            yield late
            yield Notice(PINNED + timedelta(seconds=3), long)
            while not release.is_set():  # noqa: ASYNC110  (set from the test's thread)
                await asyncio.sleep(0.02)
            yield early
            await asyncio.Event().wait()

    app = make_app(TwoBatches(snapshot), label="demo", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await pilot.press("5")
        log = table(app, "events")
        await until(pilot, lambda: len(log.rows) >= 2, "the first two lines")
        release.set()
        await until(pilot, lambda: len(log.rows) >= 3, "the older line")
        # THEN the rows are in time order whatever order they arrived in
        stamps = [r.cells[0] for r in log.rows]
        assert stamps == sorted(stamps), stamps
        assert [r.cells[1] for r in log.rows if r.cells[0].startswith("03:04:0")][:3] == [
            "health",
            "snapshot",
            "notice",
        ]
        # AND the notice, cut in its row, is whole on Enter
        notice = next(r for r in log.rows if r.cells[1] == "notice")
        assert log.move_to_key(notice.key)
        await pilot.press("enter")
        assert isinstance(app.screen, TextScreen)
        assert long in modal_text(app).replace("\n", "")
        assert "2026-01-02 03:04:08.678Z" in modal_text(app)


async def test_help_fits_80_by_24_and_names_every_view(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        text = screen_text(app)
        # every line of the help is on screen, whole (no scrolling, no wrapping)
        for line in HELP.strip("\n").splitlines():
            assert line.rstrip() in text, line
        for word in ("6 DRA claims", "notice", ":claims", "finding's hint", "no-plugin"):
            assert word in text, word


async def test_demo_keys_flip_a_dra_device_through_its_health_stream(sim: SimNode) -> None:  # noqa: F811
    """As `devctl demo` wires it: the DRA driver of the simulated node is under h, a and x too."""
    from devctl.tui.dra import DraHandle
    from devctl.tui.feeds import PluginControls, PluginHandle

    handles: dict[str, PluginHandle] = {**sim.plugins, DRIVER: DraHandle(sim.dra_drivers[DRIVER])}
    app = make_app(NodeFeed(sim.paths, 2.0, controls=PluginControls(handles)), label="demo", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await pilot.press("colon", *f"devices {DRIVER}", "enter")
        await until(pilot, lambda: "sim-node/gpu-1" in keys(app, "devices"), "the driver's devices")
        await until(pilot, lambda: table(app, "recent").rows, "the streams to start")
        assert table(app, "devices").move_to_key("sim-node/gpu-1")
        await pilot.press("h")
        # THEN the driver sends it on its health stream, and the view and the log follow
        await until(
            pilot,
            lambda: ("sim-node/gpu-1", "Unhealthy") in [(r.key, r.cells[1]) for r in table(app, "devices").rows],
            "gpu-1 unhealthy",
        )
        assert sim.dra_drivers[DRIVER].devices[1].health == "Unhealthy"
        line = ("health", DRIVER, "sim-node/gpu-1", "Healthy → Unhealthy · set from the devctl TUI")
        await pilot.press("1")  # the first screen's last events
        await until(pilot, lambda: line in [r.cells[1:] for r in table(app, "recent").rows], "the health event")
        # once: the TUI's one watch follows the drivers too, nothing else follows them again
        await pilot.pause(1.0)
        assert [r.cells[1:] for r in table(app, "recent").rows].count(line) == 1


async def test_a_dra_health_event_is_laid_over_the_polled_snapshot(sim: SimNode) -> None:  # noqa: F811
    """The views follow a driver's stream between polls: the event changes the device's health and message."""
    from devctl.tui.dra import is_dra_event, with_dra_health

    base = await collect(sim.paths, 2.0, want=ALL_SOURCES | HOLDER_SOURCES)
    now = datetime.now(timezone.utc)  # the device's health goes Unknown once older than its timeout
    event = WatchEvent(now, DRIVER, "/x/dra.sock", "health", "sim-node/gpu-0", "Healthy", "Unhealthy", message="ECC")
    plugin_event = WatchEvent(PINNED, "nvidia.com/gpu", "/x/gpu.sock", "health", "GPU-0", "Healthy", "Unhealthy")
    assert is_dra_event(event) and not is_dra_event(plugin_event)
    before = {c.name: c for c in claims_view(base)}["embed-gpu"].devices[0]
    after = {c.name: c for c in claims_view(with_dra_health(base, [event, plugin_event]))}["embed-gpu"].devices[0]
    assert (before.health, before.health_message) == ("Healthy", None)
    assert (after.health, after.health_message) == ("Unhealthy", "ECC")


async def test_an_event_of_a_plugin_not_named_yet_waits_for_its_name(sim: SimNode) -> None:  # noqa: F811
    """The first lists may arrive before any poll has named the plugins: the log names the resource, not the file."""
    named = await collect(sim.paths, 2.0)
    unnamed = dataclasses.replace(named, plugins=tuple(dataclasses.replace(p, resource=None) for p in named.plugins))
    gpu_sock = next(p.socket for p in named.plugins if p.resource == "nvidia.com/gpu")

    class NamedLater(ScriptedFeed):
        async def snapshot(self, progress: object = None) -> NodeSnapshot:
            self.polls += 1
            return unnamed if self.polls == 1 else named

        def change_token(self) -> object:
            return self.polls  # poll again as soon as the rate limit allows

    first = WatchEvent(PINNED, None, gpu_sock, "snapshot", devices=8, healthy=7)
    app = make_app(NamedLater(named, [first]), label="demo", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: table(app, "recent").rows, "the first event")
        assert [r.cells[1:3] for r in table(app, "recent").rows] == [("snapshot", "nvidia.com/gpu")]
