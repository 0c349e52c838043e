"""The textual app: it composes the screens and nothing else; its data comes from the feed it is given."""

from __future__ import annotations

import contextlib
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from devctl.fast.interpreter import FULL_AT_LEAST_EVERY, FullCollections, tuned_for_keys, use_started_pool
from devctl.tui.feeds import Feed, LogCapture
from devctl.tui.screens.help import HelpScreen
from devctl.tui.screens.node import NodeScreen
from devctl.tui.source import Clock, utc_now


class DevctlApp(App[None]):
    """``devctl tui`` and ``devctl demo``."""

    TITLE = "devctl"
    # textual runs thread workers on the app loop's default executor, and every one of the TUI's can
    # run at once: the poll and watch loops and a rebuild (tui/source.py), a diagnosis (screens/node.py),
    # the journal's history and a `:fit`/`:why` answer (screens/node_answers.py).
    # Twice that: a thread worker cannot be stopped, only asked to end, so a loop worker started anew
    # (exclusive) may still hold its thread for a while, and a job that waits for a thread is a first
    # screen that never fills (asyncio's own bound on 2 CPUs was 6; a started pool has no slack to grow).
    THREAD_WORKERS = 12
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(self, feed: Feed, *, label: str, clock: Clock = utc_now, logs: LogCapture | None = None) -> None:
        super().__init__()
        # Over SSH every animated frame is bytes on the wire and a delay before the next key is seen.
        self.animation_level = "none"
        self.feed = feed
        self.label = label
        self.clock = clock
        self.logs = logs
        # The first screen is mounted: from here on exit() is safe. Asked earlier (a hang-up during
        # start-up), it can be lost or tear widgets down under a screen's on_mount.
        self.started = False
        self._while_running = contextlib.ExitStack()

    async def on_mount(self) -> None:
        use_started_pool(self.THREAD_WORKERS, "devctl-tui")  # before the first worker (devctl.fast.pools)
        self._while_running.enter_context(tuned_for_keys())
        self.set_interval(FULL_AT_LEAST_EVERY, FullCollections().due)
        await self.push_screen(NodeScreen(self.feed, label=self.label, clock=self.clock, logs=self.logs))
        self.started = True

    def on_unmount(self) -> None:
        self._while_running.close()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


def make_app(feed: Feed, *, label: str = "node", clock: Clock = utc_now, logs: LogCapture | None = None) -> DevctlApp:
    """The one way to build the app, shared by the CLI, the tests and the benchmark.

    ``feed`` supplies every piece of data (see ``devctl.tui.feeds``); ``clock``
    stamps the view, so tests pin it; ``logs`` receives the log records of
    plugins and the simulator running in this process while the app owns the terminal.
    """
    return DevctlApp(feed, label=label, clock=clock, logs=logs)
