"""The TUI reads true at 80x24 (and at 120x40) on the default simulated node: Pilot, real sockets.

Each test asserts what a person at the terminal reads: the lines of the screen,
the counts, not the widgets' state.
"""

from __future__ import annotations

from test_tui_support import demo_app, screen_text, sim, until, until_view  # noqa: F401  (sim: a fixture)

from devctl.lab.sim.node import SimNode
from devctl.tui.app import DevctlApp
from devctl.tui.widgets.table import RowTable

GPU = "nvidia.com/gpu"


def lines(app: DevctlApp) -> list[str]:
    return screen_text(app).splitlines()


def table(app: DevctlApp, name: str) -> RowTable:
    return app.screen.query_one(f"#{name}-table", RowTable)


async def test_two_bad_gpus_make_two_different_finding_rows_at_every_width(sim: SimNode) -> None:  # noqa: F811
    # GIVEN two held GPUs that go unhealthy (doctor: unhealthy-allocated, subject nvidia.com/gpu/GPU-2 and /GPU-3)
    sim.plugins[GPU].set_health("GPU-2", "Unhealthy")
    sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
    for size in ((80, 24), (120, 40)):
        app = demo_app(sim)
        async with app.run_test(size=size) as pilot:
            await until_view(pilot)

            def rows(app: DevctlApp = app) -> list[str]:
                return [line for line in lines(app) if "unhealthy-allocated" in line]

            await until(pilot, lambda: len(rows()) == 2, f"two unhealthy-allocated rows at {size}")
            # THEN each row names its own GPU: the rows differ, the subject's end is on screen
            shown = rows()
            assert any("GPU-2" in r for r in shown) and any("GPU-3" in r for r in shown), (size, shown)
            assert shown[0] != shown[1]


async def test_the_findings_box_shows_every_finding_it_has_room_for(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        # GIVEN the first screen with doctor's findings (6 on the default node)
        await until(pilot, lambda: "Findings (devctl doctor): 6" in screen_text(app), "six findings")
        # WHEN a held GPU goes unhealthy, a seventh finding comes
        sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
        await until(pilot, lambda: "Findings (devctl doctor): 7" in screen_text(app), "seven findings")
        # THEN the box grows to show all seven (the last events give way), not six and a "1/7"
        await until(
            pilot,
            lambda: sum(1 for line in lines(app) if line.startswith((" error ", " warning ", " info "))) == 7,
            "seven finding rows on screen",
        )
        assert not any(line.rstrip().endswith("1/7") for line in lines(app)), screen_text(app)


async def test_the_numa_map_counts_a_held_unhealthy_gpu_and_scrolls_from_the_keyboard(sim: SimNode) -> None:  # noqa: F811
    # GIVEN GPU-3 (NUMA 0, held by ml/train-0) unhealthy
    sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: "3 unhealthy" in lines(app)[0], "the flip in the counts")
        # WHEN the NUMA view is shown
        await pilot.press("4")
        # THEN NUMA 0's GPU line counts it unhealthy, and says it is held, beside a ✗ among the held marks
        await until(pilot, lambda: "NUMA 0" in screen_text(app), "the NUMA map")
        gpu = next(line for line in lines(app) if "nvidia.com/gpu" in line)
        assert "■■■✗  4 held, 0 free, 1 unhealthy (held)" in gpu, gpu
        # AND the keyboard scrolls the map: End shows its last line, the legend, Home its first again
        assert "devices: ■ held" not in screen_text(app)
        await pilot.press("end")
        await until(pilot, lambda: "devices: ■ held" in screen_text(app), "the legend after End")
        await pilot.press("home")
        await until(pilot, lambda: "no NUMA node" in screen_text(app), "the top after Home")
        await pilot.press("pagedown")
        await until(pilot, lambda: "no NUMA node" not in screen_text(app), "a page down")


async def test_claims_and_events_show_health_and_device_ids_at_80x24(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        # GIVEN the claim ml/train-1-gpus (gpu-2 Healthy, gpu-3 Unhealthy) WHEN the Claims view is shown
        await pilot.press("6")
        await until(pilot, lambda: "ml/train-1-gpus" in screen_text(app), "the claims")
        # THEN its row names both devices and both healths, whole; the driver's name is what gives way
        row = next(line for line in lines(app) if "ml/train-1-gpus" in line)
        assert "gpu-2,gpu-3" in row and "Healthy,Unhealthy" in row, row
        embed = next(line for line in lines(app) if "inference/emb" in line)
        assert " gpu-0 " in embed and " Healthy " in embed, embed
        # GIVEN a DRA device and a GPU that change health WHEN the event log is shown
        sim.dra_drivers["gpu.example.com"].set_health("gpu-0", "Unhealthy", "XID 79")
        sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
        await pilot.press("5")

        def health_lines() -> list[str]:
            return [line for line in lines(app) if " health " in line]

        await until(pilot, lambda: len(health_lines()) == 2, "two health events")
        # THEN each line shows the whole device ID and the change of health
        dra = next(line for line in health_lines() if "gpu.example" in line)
        assert "sim-node/gpu-0" in dra and "Healthy → Unhealthy" in dra, dra
        gpu = next(line for line in health_lines() if "nvidia.com/gpu" in line)
        assert " GPU-3 " in gpu and "Healthy → Unhealthy" in gpu, gpu


async def test_the_container_detail_shows_each_device_plugin_devices_health(sim: SimNode) -> None:  # noqa: F811
    from devctl.tui.screens.detail import ContainerScreen

    # GIVEN GPU-3, held by ml/train-0's trainer with GPU-0..2, unhealthy
    sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
    app = demo_app(sim)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: "3 unhealthy" in lines(app)[0], "the flip in the counts")
        # WHEN the container is opened from the pods view
        await pilot.press("3")
        await until(pilot, lambda: table(app, "pods").move_to_key("ml/train-0/trainer"), "the trainer row")
        await pilot.press("enter")
        assert isinstance(app.screen, ContainerScreen)
        # THEN under what it holds, each GPU's health, GPU-3's as the plugin says it
        want = "health: GPU-0 Healthy, GPU-1 Healthy, GPU-2 Healthy, GPU-3 Unhealthy"
        await until(pilot, lambda: want in screen_text(app), "each GPU's health")


async def test_a_health_flip_the_kubelet_already_has_is_no_disagreement(sim: SimNode) -> None:  # noqa: F811
    import asyncio
    from collections.abc import AsyncIterator
    from datetime import datetime, timezone

    from devctl.core.collect import collect
    from devctl.core.events import WatchEvent
    from devctl.model import ALL_SOURCES, HOLDER_SOURCES
    from devctl.tui.app import make_app
    from devctl.tui.feeds import NodeFeed

    # GIVEN a poll taken before GPU-3 went unhealthy (the kubelet then still offered it) ...
    before = await collect(sim.paths, 2.0, want=ALL_SOURCES | HOLDER_SOURCES)
    gpu_socket = next(p.socket for p in before.plugins if p.resource == GPU)
    # ... and GPU-3 unhealthy now, on the plugin and at the kubelet alike (devctl doctor finds no disagreement)
    sim.plugins[GPU].set_health("GPU-3", "Unhealthy")
    await asyncio.sleep(0.5)

    class PolledBefore(NodeFeed):
        """The TUI between the live health event and its next poll: the event is laid over the older poll."""

        async def snapshot(self, progress: object = None) -> object:  # type: ignore[override]
            return before

        async def events(self, resolve: object) -> AsyncIterator[object]:  # type: ignore[override]
            now = datetime.now(timezone.utc)
            yield WatchEvent(now, GPU, gpu_socket, "health", "GPU-3", "Healthy", "Unhealthy")
            await asyncio.Event().wait()

    app = make_app(PolledBefore(sim.paths, 2.0), label="demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await until_view(pilot)
        # WHEN the findings of the view with the flip are made
        await until(pilot, lambda: "nvidia.com/gpu/GPU-3" in screen_text(app), "GPU-3's finding", timeout=15)
        # THEN they are devctl doctor's: the kubelet and the plugin read again agree, no kubelet-plugin-disagree
        assert "kubelet-plugin-disagree" not in screen_text(app), screen_text(app)


async def test_the_top_line_keeps_the_clock_on_a_sick_node(sim: SimNode) -> None:  # noqa: F811
    import dataclasses

    from test_tui_support import ScriptedFeed, pinned_clock

    from devctl.core.collect import collect
    from devctl.model import PluginStatus, SourceError
    from devctl.tui.app import make_app

    # GIVEN a sick node: two plugins that do not answer, one that stopped, three sources failing
    snapshot = await collect(sim.paths, 2.0)
    words = {GPU: PluginStatus.TIMEOUT, "intel.com/sriov_netdevice": PluginStatus.PERMISSION_DENIED}
    plugins = tuple(
        dataclasses.replace(p, status=words[p.resource], devices=()) if p.resource in words else p
        for p in snapshot.plugins
    )
    errors = tuple(SourceError(f"source-{i}", "failed") for i in range(3))
    sick = dataclasses.replace(snapshot, plugins=plugins, errors=(*snapshot.errors, *errors))
    app = make_app(ScriptedFeed(sick), label="node /var/lib/a-long-kubelet-root", clock=pinned_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await until_view(pilot)
        # THEN the top line, too long for 80 columns, still ends with the clock; its counts give way
        await until(pilot, lambda: "err" in lines(app)[0] or "…" in lines(app)[0], "the sick counts")
        top = lines(app)[0].rstrip()
        assert top.endswith(" · 03:04:05") and " 5 res · 8 pods · 1 permission-denied" in top, top
