"""The app as a person drives it: Pilot key presses against the simulated node on real sockets.

Every test runs the default scenario (8 GPUs with GPU-5 unhealthy, 8 SR-IOV VFs,
2 foo devices without topology, GPU-8 time-sliced into 4 replicas, 8 pods, inference/serve-0 misaligned) in the
test's own event loop, with the app wired as ``devctl demo`` wires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import itertools
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path

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

from devctl.core.collect import collect
from devctl.core.watch import WatchEvent
from devctl.fast.interpreter import FULL_EVERY, SWITCH_INTERVAL, FullCollections, full_collections
from devctl.lab.sim.node import SimNode
from devctl.model import NodeSnapshot
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.feeds import NodeFeed, PluginControls, captured_logs
from devctl.tui.screens.detail import ContainerScreen
from devctl.tui.screens.help import HelpScreen
from devctl.tui.screens.node import TITLES
from devctl.tui.source import NodeSource
from devctl.tui.widgets.table import RowTable
from devctl.tui.widgets.viewbar import ViewBar, spans

GPU = "nvidia.com/gpu"
NIC = "intel.com/sriov_netdevice"


def table(app: DevctlApp, name: str) -> RowTable:
    return app.screen.query_one(f"#{name}-table", RowTable)


def cells(app: DevctlApp, name: str, key: str) -> tuple[str, ...]:
    row = next((r for r in table(app, name).rows if r.key == key), None)
    assert row is not None, f"no row {key!r} in {name}: {[r.key for r in table(app, name).rows]}"
    return row.cells


async def open_devices(pilot, app: DevctlApp, resource: str = GPU) -> None:
    """From the resources view, arrow down to ``resource`` and press Enter, as a person does.

    The cursor's row is checked before each arrow: on a busy machine a fixed
    "down, down" could start before every row is on screen and land elsewhere.
    """
    resources = table(app, "resources")
    await until(pilot, lambda: resource in [r.key for r in resources.rows], f"the {resource} row")
    for _ in range(20):
        if resources.cursor_key == resource:
            break
        before = resources.cursor_key
        await pilot.press("down")
        with contextlib.suppress(AssertionError):  # a key that did not arrive is pressed again
            await until(pilot, lambda before=before: resources.cursor_key != before, "the cursor to move", 1.0)
    assert resources.cursor_key == resource
    await pilot.press("enter")
    await until(pilot, lambda: app.screen.active == "devices", "the devices view")


async def test_overview_shows_each_resource_with_its_counts(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the default scenario WHEN the app opens THEN the first view has one row per resource.
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        assert [r.key for r in table(app, "resources").rows] == [
            "hardware-vendor.example/foo",
            "intel.com/sriov_netdevice",
            GPU,
            "nvidia.com/gpu.shared",  # the time-sliced GPU-8
            "gpu.example.com",  # the default node's DRA driver
        ]
        # RESOURCE STATUS CAP ALLOC USED FREE BAD NUMA SOCKET (once every source answered: the first
        # view may show what answered first, with "?" for what depends on the rest)
        full = (GPU, "serving", "8", "7", "6", "1", "1", "0,1", "nvidia-gpu.sock")
        await until(pilot, lambda: cells(app, "resources", GPU) == full, "the complete first poll")
        assert cells(app, "resources", "hardware-vendor.example/foo")[7] == "<none>"  # as in the CLI: not "-"
        text = screen_text(app)
        # DRA counts too: gpu-3 unhealthy, and embed-0 whose DRA GPU is across from its CPUs.
        assert "8 pods · 2 unhealthy · 2 misaligned · 03:04:05" in text  # the pinned clock
        assert "checkpoint v2 7 entries checksum ok" in text


async def test_at_80_columns_the_first_screen_names_each_resource_in_full(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the default node WHEN the app opens in an 80x24 terminal (an SSH window)
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: cells(app, "resources", GPU)[7] == "0,1", "the complete first poll")
        text = screen_text(app)
        # THEN every resource is named whole (its longest, 27 characters, too), NUMA unknown is <none>
        for name in ("hardware-vendor.example/foo", "intel.com/sriov_netdevice", GPU, "gpu.example.com"):
            assert f" {name} " in text, name
        assert " <none> " in text


async def test_number_keys_and_tab_switch_views(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        keys = (
            ("2", "devices"),
            ("tab", "pods"),
            ("tab", "numa"),
            ("shift+tab", "pods"),
            ("5", "events"),
            ("6", "claims"),
        )
        for key, view in keys:
            await pilot.press(key)
            assert app.screen.active == view, f"after {key}"
        await pilot.press("tab")
        assert app.screen.active == "resources"  # wraps around
        # The mouse works too: a click on a view's title, on the line of views under the status line, shows it.
        assert screen_text(app).splitlines()[1].startswith(" 1 Resources   2 Devices   3 Pods   4 NUMA ")
        start = next(x for x, _, view in spans(TITLES) if view == "pods")
        await pilot.click(ViewBar, offset=(start + 2, 0))
        assert app.screen.active == "pods"


async def test_enter_on_a_resource_lists_its_devices_and_brackets_step_through(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app)
        assert app.screen.active == "devices"
        assert [r.key for r in table(app, "devices").rows] == [f"GPU-{i}" for i in range(8)]
        # DEVICE HEALTH NUMA STATE HELD BY
        assert cells(app, "devices", "GPU-0") == ("GPU-0", "Healthy", "0", "allocated", "ml/train-0/trainer")
        assert cells(app, "devices", "GPU-5") == ("GPU-5", "Unhealthy", "1", "unhealthy", "-")
        assert cells(app, "devices", "GPU-7")[3] == "free"
        assert "nvidia.com/gpu · serving · 8 devices, 7 healthy, 6 held" in screen_text(app)
        await pilot.press("right_square_bracket")  # the next resource: the time-sliced GPU's replicas
        assert [r.key for r in table(app, "devices").rows] == [f"GPU-8::{i}" for i in range(4)]
        await pilot.press("right_square_bracket")  # then the DRA driver, its devices <pool>/<device>
        assert [r.key for r in table(app, "devices").rows] == [f"sim-node/gpu-{i}" for i in range(4)]
        await pilot.press("left_square_bracket")
        await pilot.press("left_square_bracket")
        assert table(app, "devices").rows[0].key == "GPU-0"


async def test_container_detail_shows_the_decoded_allocation(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("3")
        assert table(app, "pods").move_to_key("ml/train-0/trainer")
        row = cells(app, "pods", "ml/train-0/trainer")
        assert row[2] == "aligned 0" and row[3] == "2-9" and row[4] == "32Gi+hp"
        assert cells(app, "pods", "inference/serve-0/server")[2] == "MISALIGNED"
        await pilot.press("enter")
        assert isinstance(app.screen, ContainerScreen)
        text = screen_text(app)
        for expected in (
            "ml/train-0  container trainer",
            "nvidia.com/gpu: GPU-0, GPU-1, GPU-2, GPU-3  (NUMA 0)",
            "exclusive CPUs: 2-9",
            "hugepages-1Gi: 2Gi  (NUMA 0)",
            "env     NVIDIA_VISIBLE_DEVICES=GPU-0,GPU-1,GPU-2,GPU-3",
            "device  /dev/nvidiactl -> /dev/nvidiactl (rw)",
            "cdi     nvidia.com/gpu=GPU-0",
        ):
            assert expected in text, expected
        await pilot.press("escape")
        assert not isinstance(app.screen, ContainerScreen)
        # A device's holder opens the same view.
        await pilot.press("1")
        table(app, "resources").move_to_key(GPU)
        await pilot.press("enter")
        assert table(app, "devices").move_to_key("GPU-4")
        await pilot.press("enter")
        assert isinstance(app.screen, ContainerScreen) and app.screen.key == "ml/train-1/trainer"


async def test_dra_claim_and_a_device_without_topology_in_detail(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("3")
        assert cells(app, "pods", "inference/embed-0/embedder")[6] == "embed-gpu"
        table(app, "pods").move_to_key("inference/embed-0/embedder")
        await pilot.press("enter")
        # the DRA manager prepared it: the driver's device and the CDI name it returned
        assert "gpu.example.com pool sim-node device gpu-0  CDI" in screen_text(app)
        assert "k8s.gpu.example.com/claim=" in screen_text(app)
        await pilot.press("escape", "2")
        assert table(app, "devices").move_to_key("foo-0")
        await pilot.press("enter")
        text = screen_text(app)
        assert "foo-0 (NUMA -1)" in text
        assert "mount   /var/lib/foo -> /var/lib/foo (ro)" in text


async def test_numa_map_marks_the_misaligned_container(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("4")
        text = screen_text(app)
        assert "NUMA 0  CPUs 0-15  memory 64Gi" in text
        assert "··████████▒▒▒▒▒▒  8 exclusive, 6 shared, 2 reserved" in text
        assert "nvidia.com/gpu          ■■□✗  2 held, 1 free, 1 unhealthy" in text
        assert "✗ inference/serve-0/server  devices on 0, CPUs on 1, memory on 1" in text


async def test_filter_narrows_the_rows_and_escape_clears_it(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app)
        await pilot.press("slash")
        await pilot.press(*"unhealthy")
        assert [r.key for r in table(app, "devices").rows] == ["GPU-5"]
        await pilot.press("enter")
        assert table(app, "devices").has_focus
        assert [r.key for r in table(app, "devices").rows] == ["GPU-5"]  # kept
        await pilot.press("escape")
        assert len(table(app, "devices").rows) == 8
        # Typing q in the filter types; it does not quit.
        await pilot.press("5", "slash", "q")
        assert app.is_running and table(app, "events").filter_text == "q"


async def test_help_opens_and_q_quits(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "h flip health" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to quit")


async def test_flipping_health_reaches_the_kubelet_and_comes_back_live(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the devices of nvidia.com/gpu, cursor on the free GPU-7
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app)
        table(app, "devices").move_to_key("GPU-7")
        # WHEN h is pressed
        await pilot.press("h")
        # THEN the plugin changed, the device shows unhealthy, and the kubelet's count follows
        assert next(d for d in sim.plugins[GPU].devices if d.id == "GPU-7").health == "Unhealthy"
        await until(pilot, lambda: cells(app, "devices", "GPU-7")[1:4] == ("Unhealthy", "1", "unhealthy"), "GPU-7")
        await until(pilot, lambda: "6 healthy" in screen_text(app), "allocatable 6")
        # AND the event log has the change, highlighted
        await pilot.press("5")
        await until(pilot, lambda: "Healthy → Unhealthy" in screen_text(app), "the health line in the log")
        line = next(r for r in table(app, "events").rows if r.cells[1:3] == ("health", GPU))
        assert line.cells[3:] == ("GPU-7", "Healthy → Unhealthy") and line.tone == "bad"
        # AND pressing h again makes it healthy again
        await pilot.press("2", "h")
        await until(pilot, lambda: cells(app, "devices", "GPU-7")[1] == "Healthy", "GPU-7 healthy again")
        await until(pilot, lambda: "7 healthy" in screen_text(app), "allocatable 7")


async def test_add_and_remove_a_device_from_the_keyboard(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app)
        table(app, "devices").move_to_key("GPU-7")
        await pilot.press("a")
        await until(pilot, lambda: "GPU-8" in [r.key for r in table(app, "devices").rows], "GPU-8 added")
        await until(pilot, lambda: "9 devices, 8 healthy" in screen_text(app), "capacity 9")
        await until(pilot, lambda: cells(app, "devices", "GPU-8")[2] == "1", "the NUMA node of GPU-8 after a poll")
        table(app, "devices").move_to_key("GPU-8")
        await pilot.press("x")
        await until(pilot, lambda: "GPU-8" not in [r.key for r in table(app, "devices").rows], "GPU-8 removed")
        await pilot.press("5")
        events = [r.cells[1:4] for r in table(app, "events").rows]
        assert ("added", GPU, "GPU-8") in events and ("removed", GPU, "GPU-8") in events


async def test_control_keys_only_where_a_plugin_runs_in_this_process(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim, controls=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await open_devices(pilot, app)
        table(app, "devices").move_to_key("GPU-7")
        assert "h health" not in screen_text(app).splitlines()[-1]
        await pilot.press("h", "x")
        await pilot.pause(0.3)
        assert [d.health for d in sim.plugins[GPU].devices if d.id == "GPU-7"] == ["Healthy"]
        assert len(sim.plugins[GPU].devices) == 8


async def test_a_stopped_plugin_shows_disconnected_and_recovers(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        plugin = sim.plugins[GPU]
        # WHEN the plugin dies under the running app
        await asyncio.wait_for(plugin.stop(), 5)
        # THEN its status is the word `devctl ls` uses, and the kubelet's view takes over: nothing allocatable
        await until(pilot, lambda: cells(app, "resources", GPU)[1] == "no-plugin", "no-plugin")
        await until(pilot, lambda: cells(app, "resources", GPU)[3] == "0", "allocatable 0")
        assert "1 no-plugin" in screen_text(app)
        assert "disconnected" not in screen_text(app).split("Last events")[0]  # an event, not a status
        # WHEN it is started again THEN it comes back by itself
        await asyncio.wait_for(plugin.start(), 5)
        await until(pilot, lambda: cells(app, "resources", GPU)[1:4] == ("serving", "8", "7"), "serving again")

        def events() -> list[tuple[str, ...]]:
            return [r.cells[1:3] for r in table(app, "events").rows]

        await pilot.press("5")
        await until(pilot, lambda: ("reconnected", GPU) in events(), "the live stream to reconnect")
        assert ("disconnected", GPU) in events(), events()
        assert events().index(("disconnected", GPU)) < events().index(("reconnected", GPU))


async def test_a_burst_of_updates_renders_once_and_loses_no_event(sim: SimNode) -> None:  # noqa: F811
    # GIVEN a feed whose plugin sends 40 health changes back to back (GPU-7 flapping, ending Healthy)
    snapshot = await collect(sim.paths, 2.0)
    socket = next(p.socket for p in snapshot.plugins if p.resource == GPU)
    flaps = [
        WatchEvent(PINNED, GPU, socket, "health", "GPU-7", *(("Healthy", "Unhealthy")[:: 1 if i % 2 == 0 else -1]))
        for i in range(40)
    ]
    app = make_app(ScriptedFeed(snapshot, flaps), clock=pinned_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        node_source = await until_view(pilot)
        await pilot.press("5")
        # THEN every change is in the log
        await until(pilot, lambda: len(table(app, "events").rows) == 40, "40 health lines")
        await pilot.pause(0.3)
        # AND the view was built once for the snapshot and once for the burst (or once for both)
        assert node_source.rebuilds <= 2, node_source.rebuilds
        assert node_source.view.devices[GPU][7].health == "Healthy"


async def test_polls_stay_far_inside_the_rate_limit(sim: SimNode) -> None:  # noqa: F811
    # GIVEN a plugin that changes ten times a second (the checkpoint changes with it)
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        node_source = await until_view(pilot)
        calls: list[float] = []
        feed_snapshot = node_source.feed.snapshot

        async def counted() -> NodeSnapshot:
            calls.append(time.monotonic())
            return await feed_snapshot()

        node_source.feed.snapshot = counted
        started = time.monotonic()
        for i in range(25):
            sim.plugins[GPU].set_health("GPU-7", "Unhealthy" if i % 2 == 0 else "Healthy")
            await asyncio.sleep(0.1)
        elapsed = time.monotonic() - started
        # THEN pod-resources is polled again (the checkpoint changed), at most once a second
        # (two calls each, List and GetAllocatableResources: far below the kubelet's 100/s)
        assert 1 <= len(calls) <= elapsed + 1, (len(calls), elapsed)
        assert all(b - a >= 0.95 for a, b in itertools.pairwise(calls))


async def test_usable_at_80_by_24(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        for key in ("1", "2", "3", "4", "5"):
            await pilot.press(key)
            text = screen_text(app)
            lines = text.splitlines()
            assert len(lines) == 24 and all(len(line) == 80 for line in lines)
            assert lines[-1].rstrip().endswith("? help  q quit"), key
        await pilot.press("3")
        assert "ml/train-0" in screen_text(app) and "MISALIGNED" in screen_text(app)


async def test_live_events_from_a_devctl_watch_child(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the app following the plugins through a `devctl watch -o json` child, as `devctl tui` does
    feed = NodeFeed(sim.paths, 2.0, controls=PluginControls(sim.plugins), watch_subprocess=True)
    app = make_app(feed, clock=pinned_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("5")
        await until(pilot, lambda: ("snapshot", GPU) in [r.cells[1:3] for r in table(app, "events").rows], "snapshot")
        # WHEN a device goes bad THEN the child's line reaches the log
        sim.plugins[GPU].set_health("GPU-7", "Unhealthy")
        await until(pilot, lambda: "Healthy → Unhealthy" in screen_text(app), "the health line")
    # AND the child is gone with the app
    assert not [p for p in child_processes() if "watch" in p]


def child_processes() -> list[str]:
    """Command lines of this process's children (from /proc: no extra dependency)."""
    me = str(os.getpid())
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me:
                out.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return out


async def test_log_records_go_to_the_event_log_not_over_the_screen(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the app owning the terminal, with log records captured as devctl tui does
    with captured_logs() as logs:
        app = make_app(NodeFeed(sim.paths, 2.0), clock=pinned_clock, logs=logs)
        async with app.run_test(size=(100, 30)) as pilot:
            await until_view(pilot)
            await pilot.press("5")
            # WHEN something in this process logs a warning THEN it is a line of the event log
            logging.getLogger("devctl.lab.plugin").warning("register example.com/x: refused (retrying in 0.1s)")
            # (its DETAIL cell may be cut to the column: the kernel's lines on the default node widen EVENT)
            await until(pilot, lambda: "register example.com/x: ref" in screen_text(app), "the log line")
    assert logging.getLogger().handlers != [logs]  # and the handlers are back afterwards


async def test_r_polls_again_now(sim: SimNode) -> None:  # noqa: F811
    feed = ScriptedFeed(await collect(sim.paths, 2.0))
    app = make_app(feed, clock=pinned_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        polls = feed.polls
        await pilot.press("r")
        await until(pilot, lambda: feed.polls == polls + 1, "a poll right after r (well before the 5 s period)", 3.0)


async def test_the_collector_and_other_threads_keep_out_of_the_running_apps_way_and_are_restored_after(
    sim: SimNode,  # noqa: F811
) -> None:
    # GIVEN Python's collector settings and switch interval before the app
    before, interval = gc.get_threshold(), sys.getswitchinterval()
    app = make_app(ScriptedFeed(await collect(sim.paths, 2.0)), clock=pinned_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        # WHILE it runs, what lived when the first view came is out of every collection, and full ones are rarer
        assert gc.get_freeze_count() > 10_000
        assert gc.get_threshold() == (before[0], before[1], FULL_EVERY) and before[2] < FULL_EVERY
        # and the event loop gets the interpreter back from the rebuild thread sooner
        assert sys.getswitchinterval() == SWITCH_INTERVAL < interval
    # AFTER it, Python's own settings again, nothing frozen
    assert gc.get_threshold() == before and sys.getswitchinterval() == interval
    assert gc.get_freeze_count() == 0


class _CountingFeed(NodeFeed):
    """The simulated node through collect, each poll counted."""

    polls = 0

    async def snapshot(self, progress=None):  # type: ignore[no-untyped-def]
        self.polls += 1
        return await super().snapshot(progress)


def _tui_threads() -> dict[str, int]:
    """The TUI's own threads (its pools' names, devctl.fast.pools), by name: their idents."""
    return {t.name: t.ident or 0 for t in threading.enumerate() if t.name.startswith("devctl-tui")}


async def test_the_tuis_threads_are_all_started_with_it_and_no_poll_or_rebuild_adds_one(
    sim: SimNode,  # noqa: F811
) -> None:
    # GIVEN the app on the simulated node, its first view on screen
    feed = _CountingFeed(sim.paths, 2.0)
    app = make_app(feed, clock=pinned_clock)
    async with app.run_test(size=(100, 30)) as pilot:
        src = await until_view(pilot)
        warm, count = _tui_threads(), threading.active_count()
        # THEN every thread its loops will use is running: one per thread worker, one per read collect makes at once
        assert sorted(warm) == sorted(
            [f"devctl-tui_{i}" for i in range(DevctlApp.THREAD_WORKERS)]
            + [f"devctl-tui-poll_{i}" for i in range(NodeSource.POLL_THREADS)]
        )
        # WHEN it polls forty times, as fast as it will, and rebuilds the view after each while a plugin flips a device
        src.POLL_MIN = 0.0
        start = feed.polls
        for i in range(40):
            polls = feed.polls
            sim.plugins[GPU].set_health("GPU-7", "Unhealthy" if i % 2 == 0 else "Healthy")
            src.request_poll()
            await until(pilot, lambda polls=polls: feed.polls > polls, "another poll")
        assert feed.polls >= start + 40
        # THEN the same threads, and not one more in the process
        assert _tui_threads() == warm
        assert threading.active_count() == count


def test_a_full_collection_comes_at_its_pace_when_none_came_by_itself() -> None:
    pace = FullCollections()
    before = full_collections()
    pace.due()  # none since the last look: one now
    assert full_collections() == before + 1
    gc.collect()  # one came by itself: no second one
    pace.due()
    assert full_collections() == before + 2


class _FailingFeed(ScriptedFeed):
    """A feed whose change check breaks after the first poll: the poll worker dies of it."""

    def __init__(self, snapshot: NodeSnapshot):
        super().__init__(snapshot)
        self.checks = 0

    def change_token(self) -> object:
        self.checks += 1
        if self.checks > 2:
            raise RuntimeError("checkpoint went away under us")
        return None


async def test_a_failing_worker_is_shown_in_the_event_log_and_the_status_bar(sim: SimNode) -> None:  # noqa: F811
    # GIVEN the app on a feed that breaks its poll worker after the first view
    app = make_app(_FailingFeed(await collect(sim.paths, 2.0)), clock=pinned_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until_view(pilot)
        # WHEN the worker dies, THEN the status bar says a task failed ...
        await until(pilot, lambda: "1 task(s) failed" in screen_text(app), "the status bar to mark the failure")
        # ... and the event log says which and why
        await pilot.press("5")
        await until(
            pilot,
            lambda: any(
                "poll the feed stopped: RuntimeError: checkpoint" in r.cells[-1] for r in table(app, "events").rows
            ),
            "the failure in the event log",
        )


class _SlowFeed(ScriptedFeed):
    """A node whose first read waits on a hung socket: the other sources have answered, that one not yet."""

    def __init__(self, snapshot: NodeSnapshot, partial: NodeSnapshot, pending: str):
        super().__init__(snapshot)
        self.partial = partial
        self.pending = pending
        self.release = threading.Event()  # set from the test's loop; the feed runs on the poll thread's

    async def snapshot(self, progress=None) -> NodeSnapshot:
        from devctl.core.collect import Progress

        if progress is not None and not self.release.is_set():
            progress(Progress(frozenset({self.pending, "plugins"}), lambda: self.partial))
            while not self.release.is_set():  # noqa: ASYNC110 a thread's event
                await asyncio.sleep(0.02)
            progress(Progress(frozenset(), lambda: self._snapshot))
        return await super().snapshot()


async def test_the_first_read_shows_what_answered_and_says_what_it_waits_for(sim: SimNode) -> None:  # noqa: F811
    # GIVEN a node where every source answered but a hung plugin socket, on which the first read still waits
    full = await collect(sim.paths, 2.0)
    partial = dataclasses.replace(full, plugins=tuple(p for p in full.plugins if p.resource != NIC))
    feed = _SlowFeed(full, partial, f"{sim.paths.plugins_dir}/hung.sock")
    app = make_app(feed, clock=pinned_clock)
    async with app.run_test(size=(140, 30)) as pilot:
        # THEN what answered is on screen at once, and the status bar says what it waits for
        await until(pilot, lambda: GPU in [r.key for r in table(app, "resources").rows], "the answered resources")
        await until(pilot, lambda: "waiting for hung.sock…" in screen_text(app), "the waiting mark")
        # WHEN the read completes, THEN the mark goes
        feed.release.set()
        await until(pilot, lambda: "waiting for" not in screen_text(app), "the mark to go")


async def test_a_long_waiting_mark_gives_way_in_its_names_and_keeps_its_seconds(sim: SimNode) -> None:  # noqa: F811
    # GIVEN a first read that waits on a source with a long name, in a terminal too narrow for the whole mark
    full = await collect(sim.paths, 2.0)
    partial = dataclasses.replace(full, plugins=tuple(p for p in full.plugins if p.resource != NIC))
    feed = _SlowFeed(full, partial, f"{sim.paths.plugins_dir}/a-plugin-with-a-long-socket-name.sock")
    app = make_app(feed, clock=pinned_clock)
    async with app.run_test(size=(100, 24)) as pilot:
        # THEN the top line keeps the counts and clock, and the mark how long it has waited (its names give way)
        def top() -> str:
            return screen_text(app).splitlines()[0].rstrip()

        await until(pilot, lambda: GPU in [r.key for r in table(app, "resources").rows], "the answered resources")
        await until(pilot, lambda: "waiting for" in top(), "the waiting mark")
        line = top()
        assert "8 pods" in line and "03:04:05" in line, line
        mark = line.split(" · ")[-1]
        assert mark.startswith("waiting for a-plugin") and re.search(r"… \d+ s$", mark), line
        feed.release.set()


async def test_k9s_keys_colon_jumps_j_k_move_esc_goes_back_ctrl_c_quits(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)

        async def command(*keys: str) -> None:
            await pilot.press("colon")
            await until(pilot, lambda: app.focused is app.screen.query_one("#command"), "the command line")
            await pilot.press(*keys, "enter")

        # `:pods` Enter shows the pods view; `:devices gpu` the GPU's devices (a resource by its last part)
        await command(*"pods")
        await until(pilot, lambda: app.screen.active == "pods", "the pods view")
        await command(*"devices", "space", *"gpu")
        await until(pilot, lambda: app.screen.active == "devices", "the devices view")
        await until(pilot, lambda: [r.key for r in table(app, "devices").rows][:1] == ["GPU-0"], "the GPUs")
        # j and k move the cursor as the arrows do
        devices = table(app, "devices")
        await until(pilot, lambda: devices.has_focus, "the devices table")
        for key, wanted in (("j", "GPU-1"), ("k", "GPU-0")):
            for _ in range(10):  # a key a redraw swallowed is pressed again, as a person would
                if devices.cursor_key == wanted:
                    break
                await pilot.press(key)
                await pilot.pause()
            assert devices.cursor_key == wanted, key
        # Esc goes back to the view shown before
        await pilot.press("escape")
        await until(pilot, lambda: app.screen.active == "pods", "Esc back to pods")
        # an unknown view is said, and nothing moves
        await command(*"nope")
        await pilot.pause()
        assert app.screen.active == "pods" and app.is_running
        # every key is in the help, which fits 80x24
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = screen_text(app)
        for key in (":  a view by name", "j k", "Esc: back", "Ctrl-C: quit"):
            assert key in text, key
        await pilot.press("escape")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, "the app to quit")


async def test_a_snapshot_file_says_when_it_was_taken_and_offers_no_refresh(sim: SimNode) -> None:  # noqa: F811
    from devctl.tui.feeds import SnapshotFeed

    snapshot = await collect(sim.paths, 2.0)
    app = make_app(SnapshotFeed(snapshot), label="snapshot node.json", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        text = screen_text(app)
        taken = snapshot.taken_at.replace("T", " ")[:19]
        header = text.splitlines()[0]
        # At 80 columns the file name gives way (its start stays), never when it was taken nor the counts.
        assert header.startswith(" snapshot node") and f" taken at {taken}Z · 5 res · 8 pods" in header, header
        assert "r refresh" not in text
        assert app.screen.check_action("refresh", ()) is False


async def test_a_view_that_comes_while_the_detail_is_being_built_does_not_crash_it(sim: SimNode) -> None:  # noqa: F811
    # A poll can answer between Enter and the detail screen's compose: the TUI must not die of it.
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        view = app.screen.view
        detail = ContainerScreen("ml/train-0/trainer", view)
        detail.show(view)  # not composed yet
        await app.push_screen(detail)
        await pilot.pause()
        assert "ml/train-0  container trainer" in screen_text(app)
