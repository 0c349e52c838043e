"""Helpers shared by the TUI tests: a pinned clock, the screen as text, bounded waits, the simulated node.

Imported by the other ``test_tui_*`` files; it holds no tests of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from textual.pilot import Pilot

from devctl.lab.sim.node import SimNode
from devctl.model import NodePaths, NodeSnapshot
from devctl.tui.app import DevctlApp, make_app
from devctl.tui.feeds import NodeFeed, PluginControls
from devctl.tui.source import NodeSource

PINNED = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)

# What the snapshots show instead of a temporary root: the same on every run.
FIXED_PATHS = NodePaths(
    root="/",
    kubelet_dir="/var/lib/kubelet",
    plugins_dir="/var/lib/kubelet/device-plugins",
    pod_resources="/var/lib/kubelet/pod-resources/kubelet.sock",
    sysfs="/sys",
    pod_logs="/var/log/pods",
)


def pinned_clock() -> datetime:
    return PINNED


def screen_text(app: DevctlApp) -> str:
    """What the terminal shows right now, as plain text (one line per row)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def until(pilot: Pilot, predicate: Callable[[], object], what: str, timeout: float = 8.0) -> None:
    """Wait (bounded) for ``predicate`` while the app runs; fail with ``what`` and the screen if it never holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)


async def until_view(pilot: Pilot) -> NodeSource:
    """Wait until the first view of the node is on screen; returns the app's NodeSource."""
    await until(pilot, lambda: getattr(pilot.app.screen, "view", None) is not None, "a view")
    await pilot.pause()
    return source(pilot.app)


def source(app: DevctlApp) -> NodeSource:
    return app.screen.query_one(NodeSource)


@pytest.fixture
async def sim(short_root: Path) -> AsyncIterator[SimNode]:
    """The default scenario's simulated node on the test's own event loop, ready."""
    from devctl.lab.sim.scenario import default_scenario

    async with SimNode(short_root, default_scenario()) as node:
        await asyncio.wait_for(node.ready(), 15)
        yield node


def demo_app(node: SimNode, *, controls: bool = True, clock: Callable[[], datetime] = pinned_clock) -> DevctlApp:
    """The app wired as ``devctl demo`` wires it: the sim's paths, and its plugins under the keys."""
    feed = NodeFeed(node.paths, 2.0, controls=PluginControls(node.plugins) if controls else None)
    return make_app(feed, label="demo", clock=clock)


def pin_snapshot(snapshot: NodeSnapshot) -> NodeSnapshot:
    """A collected snapshot with its temporary root, times and latencies replaced by fixed values."""
    plugins = tuple(
        replace(
            p,
            socket=f"{FIXED_PATHS.plugins_dir}/{Path(p.socket).name}",
            latency_ms=None,
        )
        for p in snapshot.plugins
    )
    checkpoint = replace(snapshot.checkpoint, path=FIXED_PATHS.checkpoint) if snapshot.checkpoint else None
    return replace(
        snapshot,
        taken_at=PINNED.isoformat(),
        paths=FIXED_PATHS,
        plugins=plugins,
        checkpoint=checkpoint,
        errors=(),
    )


class ScriptedFeed:
    """A small duck-typed feed: a fixed snapshot, then the given live items, then silence."""

    controls = None

    def __init__(self, snapshot: NodeSnapshot, items: Iterable[object] = ()):
        self._snapshot = snapshot
        self.items = list(items)
        self.polls = 0

    async def snapshot(self, progress: object = None) -> NodeSnapshot:
        self.polls += 1
        return self._snapshot

    async def events(self, resolve: object) -> AsyncIterator[object]:
        for item in self.items:
            yield item
        await asyncio.Event().wait()

    def change_token(self) -> object:
        return None
