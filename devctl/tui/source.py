"""The bridge from a feed to the screens: workers that poll and watch, and a throttled rebuild of the view.

Workers only talk to the feed and post messages; nothing here touches a
widget. Live events are buffered and announced with a message that merges
with the one before it (``can_replace``), and the view is rebuilt at most once
per interval, in a thread, so a burst of ListAndWatch updates renders once and
a key press never waits for an analysis of 10,000 devices.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from textual import work
from textual.message import Message
from textual.widget import Widget

from devctl.model import NodeSnapshot
from devctl.tui.feeds import Feed, LogCapture
from devctl.tui.state import LogLine, NodeView, build_view, event_line, view_changes

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class NodeSource(Widget):
    """Keeps a NodeView current from a feed; posts ``ViewReady`` and ``LogLines`` to its screen."""

    DEFAULT_CSS = "NodeSource { display: none; }"

    # pod-resources has no watch RPC and a rate limit of 100 calls/s shared by the
    # whole node (pkg/kubelet/apis/podresources/grpc/ratelimit.go): one collect is
    # two calls, and we make at most one a second.
    POLL_MIN = 1.0
    # A pod that holds only exclusive CPUs changes no file we can watch: look anyway, this often.
    POLL_EVERY = 5.0
    # How often the checkpoint's change time is looked at (a stat, no RPC).
    TOKEN_EVERY = 0.25
    # A burst renders once: the rebuild waits until events have been quiet this
    # long, but never longer than BURST_MAX after the first of them.
    QUIET = 0.05
    BURST_MAX = 0.3
    # And it waits at least twice as long as the last rebuild took, so analysis
    # never takes more than a third of the time, even on a node with 10,000 devices.
    REFRESH_MIN = 0.1
    # After the event stream itself fails (not a plugin: the whole watch), start it again after this.
    WATCH_RETRY = 2.0

    class ViewReady(Message):
        """A new view of the node, and what changed since the one before."""

        def __init__(self, view: NodeView, lines: list[LogLine]) -> None:
            super().__init__()
            self.view = view
            self.lines = lines

    class LogLines(Message):
        """Lines for the event log that arrived live (ListAndWatch events, notices, log records)."""

        def __init__(self, lines: list[LogLine]) -> None:
            super().__init__()
            self.lines = lines

    class Polled(Message):
        def __init__(self, snapshot: NodeSnapshot, mark: int) -> None:
            super().__init__()
            self.snapshot = snapshot
            self.mark = mark

        def can_replace(self, message: Message) -> bool:
            # A newer snapshot makes an older one that was not handled yet worthless.
            return isinstance(message, NodeSource.Polled)

    class Live(Message):
        """Something waits in the live buffer; many of these in a row are handled once."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, NodeSource.Live)

    class Built(Message):
        def __init__(self, view: NodeView | None, lines: list[LogLine], seconds: float) -> None:
            super().__init__()
            self.view = view
            self.lines = lines
            self.seconds = seconds

    def __init__(self, feed: Feed, *, clock: Clock = utc_now, logs: LogCapture | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.clock = clock
        self.logs = logs
        self.view: NodeView | None = None
        self.rebuilds = 0
        self._base: NodeSnapshot | None = None
        self._seq = 0
        self._items: list[tuple[int, Any]] = []  # live items since the base snapshot's poll began
        self._buffer: list[tuple[int, Any]] = []  # live items not handled yet
        self._poll_wanted = asyncio.Event()
        self._token: object = None
        self._building = False
        self._dirty = False
        self._interval = self.REFRESH_MIN
        self._last_build = -1e9
        self._first_pending: float | None = None  # when the oldest change not yet rebuilt arrived
        self._timer: Any = None
        self._watching = False

    def on_mount(self) -> None:
        self._token = self.feed.change_token()
        self._poll_wanted.set()
        self._poll()
        self.set_interval(self.TOKEN_EVERY, self._check_token)
        self.set_interval(self.POLL_EVERY, self.request_poll)
        if self.logs is not None:
            self.logs.on_record = lambda: self.post_message(self.Live())

    def on_unmount(self) -> None:
        if self.logs is not None:
            self.logs.on_record = None

    # --- polling ---------------------------------------------------------------------------

    def request_poll(self) -> None:
        """Collect again as soon as the rate limit allows."""
        self._poll_wanted.set()

    def _check_token(self) -> None:
        token = self.feed.change_token()
        if token != self._token:
            self._token = token
            self.request_poll()

    @work(exclusive=True, group="poll")
    async def _poll(self) -> None:
        while True:
            await self._poll_wanted.wait()
            self._poll_wanted.clear()
            mark = self._seq
            try:
                snapshot = await self.feed.snapshot()
            except Exception as e:  # collect turns failures into SourceErrors; anything else is said, not fatal
                self.post_message(self.LogLines([LogLine(self.clock(), "error", "", "", f"poll failed: {e}", "bad")]))
            else:
                self.post_message(self.Polled(snapshot, mark))
            await asyncio.sleep(self.POLL_MIN)

    def on_node_source_polled(self, message: Polled) -> None:
        message.stop()
        self._base = message.snapshot
        # Events that arrived while the snapshot was taken may not be in it: lay them over it again.
        self._items = [(seq, item) for seq, item in self._items if seq >= message.mark]
        self._schedule()
        if not self._watching:
            self._watching = True
            self._watch()

    # --- live events -----------------------------------------------------------------------

    async def _resolve(self) -> dict[str, str | None]:
        # Which resource each socket serves, from the last poll: no extra RPCs.
        base = self._base
        return {p.socket: p.resource for p in base.plugins} if base else {}

    @work(exclusive=True, group="watch")
    async def _watch(self) -> None:
        while True:
            try:
                async with contextlib.aclosing(self.feed.events(self._resolve)) as events:
                    async for item in events:
                        self._buffer.append((self._seq, item))
                        self._seq += 1
                        self.post_message(self.Live())
                return
            except Exception as e:  # the watch as a whole failed: say so, and start it again
                line = LogLine(self.clock(), "error", "", "", f"live events stopped: {e}", "bad")
                self.post_message(self.LogLines([line]))
                await asyncio.sleep(self.WATCH_RETRY)

    def on_node_source_live(self, message: Live) -> None:
        message.stop()
        items, self._buffer = self._buffer, []
        known = self.view.socket_resource if self.view else {}
        lines = [line for _, item in items if (line := event_line(item, known)) is not None]
        if self.logs is not None:
            lines += [
                LogLine(datetime.fromtimestamp(r.created, timezone.utc), "log", "", "", r.getMessage(), "warn")
                for r in self.logs.drain()
            ]
        if lines:
            self.post_message(self.LogLines(lines))
        if items:
            self._items.extend(items)
            self._schedule()

    # --- rebuilding the view ---------------------------------------------------------------

    def _schedule(self) -> None:
        """Rebuild when the burst is over (QUIET), or BURST_MAX after it began, never sooner than the interval."""
        if self._base is None:
            return
        now = time.monotonic()
        if self._first_pending is None:
            self._first_pending = now
        if self._building:
            self._dirty = True
            return
        due = max(min(now + self.QUIET, self._first_pending + self.BURST_MAX), self._last_build + self._interval)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(max(due - now, 0.001), self._start_build)

    def _start_build(self) -> None:
        self._timer = None
        if self._base is None or self._building:
            return
        self._building = True
        self._dirty = False
        self._first_pending = None
        self._build(self._base, tuple(item for _, item in self._items), self.view)

    @work(thread=True, group="build")
    def _build(self, base: NodeSnapshot, items: tuple[Any, ...], previous: NodeView | None) -> None:
        started = time.monotonic()
        try:
            view = build_view(base, items, self.clock(), previous)
            lines = view_changes(previous, view) if previous is not None else []
        except Exception as e:  # a bug in analysis must not freeze the view: keep the last one, say why
            line = LogLine(self.clock(), "error", "", "", f"analysis failed: {type(e).__name__}: {e}", "bad")
            self.post_message(self.Built(previous, [line], time.monotonic() - started))
            return
        self.post_message(self.Built(view, lines, time.monotonic() - started))

    def on_node_source_built(self, message: Built) -> None:
        message.stop()
        self._building = False
        self._last_build = time.monotonic()
        self._interval = max(self.REFRESH_MIN, 2 * message.seconds)
        if message.view is None:
            self.post_message(self.LogLines(message.lines))
        else:
            self.view = message.view
            self.rebuilds += 1
            self.post_message(self.ViewReady(message.view, message.lines))
        if self._dirty:
            self._dirty = False
            self._schedule()
