"""The TUI answers as the CLI does: `:fit REQUEST`, `:why POD`, the journal's history in the Events view
and a device's own timeline in its detail (issues 31 item 3, 32 item 4).

Pilot key presses against the default simulated node on real sockets; the journal is written through
the core (``core.history.open_journal``) under the node's root, where ``devctl record`` writes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_tui_support import (  # noqa: F401  (sim: a fixture)
    FIXED_PATHS,
    ScriptedFeed,
    demo_app,
    pin_snapshot,
    pinned_clock,
    screen_text,
    sim,
    until,
    until_view,
)
from textual.pilot import Pilot
from textual.widgets import Input

from devctl.core.admission import FitAnswer
from devctl.core.history import default_journal, open_journal
from devctl.lab.sim.node import SimNode
from devctl.model import NodeSnapshot
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.tui import answers
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.screens.detail import ContainerScreen
from devctl.tui.screens.text import TextScreen
from devctl.tui.widgets.table import RowTable

GPU = "nvidia.com/gpu"
PCI5 = "0000:cb:00.0"


def table(app: DevctlApp, name: str) -> RowTable:
    return app.screen.query_one(f"#{name}-table", RowTable)


async def command(pilot: Pilot, text: str) -> None:
    """`:` then the words, then Enter, as a person types them."""
    await pilot.press("colon")
    field = pilot.app.screen.query_one("#command", Input)
    await until(pilot, lambda: field.has_focus, "the command line")
    field.value = text
    await pilot.press("enter")


def modal_text(app: DevctlApp) -> str:
    return str(app.screen.query_one("#text").render())


def notices(app: DevctlApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_fit_shows_the_cli_answer(sim: SimNode) -> None:  # noqa: F811
    from devctl.core.admission import predict_fit, read_pod
    from devctl.render.admission import fit_table

    # GIVEN the default node and the CLI's answer to `devctl fit nvidia.com/gpu=1`
    cli = fit_table(await predict_fit(sim.paths, 2.0, read_pod([f"{GPU}=1"], None)))
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        # WHEN `:fit nvidia.com/gpu=1` is typed
        await command(pilot, f"fit {GPU}=1")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the fit answer", 15)
        # THEN a text screen shows the same verdict and containers as the CLI's table
        text = modal_text(app)
        assert text.splitlines()[0] == cli.splitlines()[0] == "ADMIT"
        assert "container main: affinity" in text and "devices  nvidia.com/gpu: GPU-" in text
        assert " ".join(text.split()).startswith(" ".join(cli.split()))
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)
        # AND a what-if that cannot hold on one NUMA node is refused as the kubelet would
        await command(pilot, f"fit {GPU}=4 cpu=16 --policy single-numa-node")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the what-if answer", 15)
        assert modal_text(app).startswith("REJECT: TopologyAffinityError")


async def test_fit_with_bad_words_is_one_toast_and_no_screen(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await until_view(pilot)
        await command(pilot, "fit nvidia.com/gpu=lots")
        await until(pilot, lambda: any(m.startswith("fit: ") for m in notices(app)), "the toast")
        await command(pilot, "fit --policy sideways gpu=1")
        await until(pilot, lambda: any("--policy sideways" in m for m in notices(app)), "the --policy toast")
        await command(pilot, "why")
        await until(pilot, lambda: any(m.startswith("why: name one pod") for m in notices(app)), "the why toast")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, TextScreen)
        assert all("\n" not in m for m in notices(app))


async def test_why_shows_the_verdict_of_devctl_why(sim: SimNode) -> None:  # noqa: F811
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        # WHEN `:why ml/train-0` (its CDI spec for GPU-0 is gone on the default node)
        await command(pilot, "why ml/train-0")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the why answer", 15)
        # THEN the verdict devctl why gives, its evidence and the hint
        text = modal_text(app)
        assert text.startswith("cdi-unresolvable: the runtime cannot resolve nvidia.com/gpu=GPU-0"), text
        assert " cri " in text and "hint: devctl cdi" in text


def write_journal(node: SimNode, now: datetime) -> None:
    """A few events: GPU-5 falls off the bus and goes bad; GPU-4 (held by ml/train-1) flaps."""
    held = (Holder("ml", "train-1", "trainer"),)
    events = [
        NodeEvent(now - timedelta(minutes=20), EventSource.PLUGIN, "snapshot", GPU, what="snapshot, 8 devices"),
        NodeEvent(now - timedelta(minutes=10), EventSource.KERNEL, "xid", GPU, "GPU-5", PCI5, what="Xid 79"),
        NodeEvent(
            now - timedelta(minutes=10) + timedelta(seconds=0.4),
            EventSource.PLUGIN,
            "health",
            GPU,
            "GPU-5",
            PCI5,
            what="Healthy -> Unhealthy",
        ),
        NodeEvent(
            now - timedelta(minutes=5), EventSource.PLUGIN, "health", GPU, "GPU-4", None, held, "Healthy -> Unhealthy"
        ),
        NodeEvent(
            now - timedelta(minutes=4), EventSource.PLUGIN, "health", GPU, "GPU-4", None, held, "Unhealthy -> Healthy"
        ),
        NodeEvent(now - timedelta(hours=30), EventSource.PLUGIN, "health", GPU, "GPU-6", what="too old for the view"),
    ]
    path = Path(default_journal(node.paths))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_journal(str(path)) as writer:
        for e in events:
            writer.append(e)


async def test_events_view_shows_the_journal_above_the_live_events_and_filters_by_subject(
    sim: SimNode,  # noqa: F811
) -> None:
    write_journal(sim, datetime.now(timezone.utc))
    app = demo_app(sim)
    async with app.run_test(size=(120, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("5")
        log = table(app, "events")

        def rows() -> list[tuple[str, ...]]:
            return [r.cells[1:4] for r in log.rows]

        # THEN the journal's events of the last 24 h are there, oldest first, above the live lists
        await until(pilot, lambda: ("xid", GPU, PCI5) in rows(), "the journal's history")  # a kernel line: its PCI
        await until(pilot, lambda: ("snapshot", GPU, "-") in rows(), "the live snapshot")
        history = [r for r in rows() if r[0] in ("xid", "health") and r[2] in ("GPU-4", "GPU-5", PCI5)]
        assert [r[2] for r in history] == [PCI5, "GPU-5", "GPU-4", "GPU-4"], rows()
        assert rows().index(("xid", GPU, PCI5)) < len(rows()) - 1  # live lines came after it
        assert not any(r[2] == "GPU-6" for r in rows())  # 30 h old: not in the last 24 h
        xid = next(r for r in log.rows if r.cells[1] == "xid")
        assert "kernel: Xid 79" in xid.cells[4] and "GPU-5" in xid.cells[4]
        # WHEN `/` filters by a pod that held a device THEN only its devices' events stay: GPU-4's flips and the
        # kernel's lines on its DRA GPU gpu-3 (0000:e0:01.0), which it held when they were written
        await pilot.press("slash")
        await pilot.press(*"train-1")
        await until(pilot, lambda: {r[2] for r in rows()} == {"GPU-4", "0000:e0:01.0"}, "train-1's devices only")
        # AND by a PCI address in another spelling, no cell's text (as devctl events SUBJECT matches it)
        log.filter_text = "cb:00.0"
        await until(pilot, lambda: {r[2] for r in rows()} == {"GPU-5", PCI5}, "GPU-5's events only")
        log.filter_text = "00000000:CB:00.0"
        await until(pilot, lambda: {r[2] for r in rows()} == {"GPU-5", PCI5}, "GPU-5's events by its PCI address")


async def test_a_device_detail_shows_its_own_timeline(sim: SimNode) -> None:  # noqa: F811
    write_journal(sim, datetime.now(timezone.utc))
    app = demo_app(sim)
    async with app.run_test(size=(100, 30)) as pilot:
        await until_view(pilot)
        await until(pilot, lambda: app.screen.history is not None, "the journal read")
        await command(pilot, f"devices {GPU}")
        devices = table(app, "devices")
        await until(pilot, lambda: devices.move_to_key("GPU-5"), "the GPU-5 row")
        # WHEN Enter on GPU-5 (unhealthy, held by no one)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the device's timeline")
        text = modal_text(app)
        # THEN its own events, newest last, under the story of its flip
        assert text.startswith(f"Timeline of GPU-5 ({GPU}) from the journal, newest last")
        assert "unhealthy since" in text and f"0.4 s after Xid 79 on {PCI5}" in text
        assert text.index("kernel  Xid 79") < text.index("plugin  Healthy -> Unhealthy")
        assert "GPU-4" not in text
        await pilot.press("escape")
        # WHEN Enter on GPU-4 (held by ml/train-1): its holder's detail, its timeline first
        await until(pilot, lambda: devices.move_to_key("GPU-4"), "the GPU-4 row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContainerScreen), "the container detail")
        shown = screen_text(app)
        assert "Timeline of GPU-4" in shown and "held by ml/train-1" in shown
        assert "unhealthy since" not in shown  # healthy again: no story line
        assert "container trainer" in shown


def test_device_timeline_without_journal_events_is_none() -> None:
    now = datetime.now(timezone.utc)
    other = NodeEvent(now, EventSource.PLUGIN, "health", GPU, "GPU-1", what="Healthy -> Unhealthy")
    assert answers.device_timeline([other], GPU, "GPU-2", now, unhealthy=True) is None


# --- an SVG snapshot of `:fit` at 80x24 -----------------------------------------------------------


@pytest.fixture(scope="module")
def fit_node() -> Iterator[tuple[NodeSnapshot, FitAnswer]]:
    """The default node collected once, and devctl fit's table for nvidia.com/gpu=2 cpu=8, its root pinned."""
    from devctl.core.admission import predict_fit, read_pod
    from devctl.core.collect import collect
    from devctl.lab.sim.scenario import default_scenario
    from devctl.lab.sim.thread import running_sim

    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, default_scenario()) as node:
            snapshot = asyncio.run(collect(node.paths, 5.0))
            answer = asyncio.run(predict_fit(node.paths, 5.0, read_pod([f"{GPU}=2", "cpu=8"], None)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    source = answer.policy.source.replace(str(root), "")
    pinned = dataclasses.replace(answer, policy=dataclasses.replace(answer.policy, source=source))
    yield pin_snapshot(snapshot), pinned


def test_fit_screen_at_80_by_24(
    snap_compare: Callable[..., bool], fit_node: tuple[NodeSnapshot, FitAnswer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from devctl.render.admission import fit_table

    snapshot, answer = fit_node
    feed = ScriptedFeed(snapshot)
    feed.paths = dataclasses.replace(FIXED_PATHS, root="/nonexistent-devctl-root")  # type: ignore[attr-defined]
    feed.timeout = 2.0  # type: ignore[attr-defined]
    # devctl fit's answer on the default node, its temporary root pinned (the policy line names the config file)
    monkeypatch.setattr(answers, "fit_job", lambda words: lambda paths, timeout, width: fit_table(answer, width))
    app = make_app(feed, label="demo", clock=pinned_clock)

    async def asked(pilot: Pilot) -> None:
        await until_view(pilot)
        screen = pilot.app.screen
        await until(pilot, lambda: screen.findings_for is screen.view, "doctor's findings on the newest view")
        await command(pilot, f"fit {GPU}=2 cpu=8")
        await until(pilot, lambda: isinstance(pilot.app.screen, TextScreen), "the fit answer")
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=asked)
