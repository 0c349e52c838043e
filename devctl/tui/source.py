"""The bridge from a feed to the screens: workers that poll and watch, and a throttled rebuild of the view.

Workers only talk to the feed and post messages; nothing here touches a
widget. Live events are buffered and announced with a message that merges
with the one before it (``can_replace``), and the view is rebuilt at most once
per interval, in a thread, so a burst of ListAndWatch updates renders once and
a key press never waits for an analysis of 10,000 devices.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from textual import work
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from devctl.core.events import WatchEvent
from devctl.fast.interpreter import use_started_pool
from devctl.model import NodeSnapshot
from devctl.tui.dra import is_dra_event, with_dra_health
from devctl.tui.feeds import Feed, LogCapture
from devctl.tui.state import LogLine, NodeView, build_view, event_line, view_changes

if TYPE_CHECKING:
    from devctl.core.collect import Progress

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
    # And it waits at least three times as long as the last rebuild took, so the
    # rebuild thread never takes more than a quarter of the time (and of the
    # interpreter, which it shares with the keyboard), even with 10,000 devices.
    REFRESH_MIN = 0.1
    REFRESH_FACTOR = 3
    # While the first poll waits for a slow source, what has answered is shown and what it waits for said this often.
    WAITING_TICK = 0.25
    # An event whose plugin no source has named yet waits for a poll to name it, at most this long, so
    # that the first lines of the log name resources rather than socket files (they keep their times).
    HOLD_MAX = 3.0
    # After the event stream itself fails (not a plugin: the whole watch), start it again after this.
    WATCH_RETRY = 2.0
    # collect reads this many files and directories at once on the poll loop (collect.py's
    # asyncio.to_thread calls: the two checkpoints, CDI, topology, pod identities, kubelet state, /proc).
    POLL_THREADS = 7
    # How long closing the app waits for the feed's threads to clean up.
    STOP_WAIT = 5.0

    class ViewReady(Message):
        """A new view of the node, what changed since the one before, and what ``present`` made of it."""

        def __init__(self, view: NodeView, lines: list[LogLine], presented: object) -> None:
            super().__init__()
            self.view = view
            self.lines = lines
            self.presented = presented

    class LogLines(Message):
        """Lines for the event log that arrived live (ListAndWatch events, notices, log records)."""

        def __init__(self, lines: list[LogLine]) -> None:
            super().__init__()
            self.lines = lines

    class Failed(Message):
        """A worker of this source stopped with an error: the view may no longer update."""

        def __init__(self, line: LogLine) -> None:
            super().__init__()
            self.line = line

    class Waiting(Message):
        """The first poll still waits for these (sockets by file name, sources), this many seconds so far."""

        def __init__(self, names: list[str], seconds: float) -> None:
            super().__init__()
            self.names = names
            self.seconds = seconds

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, NodeSource.Waiting)

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
        def __init__(self, view: NodeView | None, lines: list[LogLine], seconds: float, presented: object) -> None:
            super().__init__()
            self.view = view
            self.lines = lines
            self.seconds = seconds
            self.presented = presented

    def __init__(
        self,
        feed: Feed,
        *,
        clock: Clock = utc_now,
        logs: LogCapture | None = None,
        present: Callable[[NodeView], object] = lambda view: None,
    ) -> None:
        """``present`` runs in the rebuild thread beside the analysis: what the screens can prepare off the loop."""
        super().__init__()
        self.feed = feed
        self.present = present
        self.clock = clock
        self.logs = logs
        self.view: NodeView | None = None
        self.rebuilds = 0
        self.last_build_seconds = 0.0  # how long the last rebuild took (bench/bench_tui.py reports it)
        self._base: NodeSnapshot | None = None
        self._seq = 0  # numbers live items; only the watch thread counts up
        self._items: list[tuple[int, Any]] = []  # live items since the base snapshot's poll began
        self._buffer: collections.deque[tuple[int, Any]] = collections.deque()  # filled by the watch thread
        self._poll_wanted = threading.Event()
        self._polled_once = threading.Event()
        # socket -> resource from every poll so far (see _resolve); replaced whole, never mutated, across threads
        self._names: dict[str, str | None] = {}
        self._stopping = threading.Event()
        self._loops: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[None]]] = {}
        self._loops_lock = threading.Lock()
        self._building = False
        self._dirty = False
        self._interval = self.REFRESH_MIN
        self._last_build = -1e9
        self._first_pending: float | None = None  # when the oldest change not yet rebuilt arrived
        self._timer: Any = None
        self._held: list[tuple[float, object]] = []  # (since, item): events waiting for their socket's name
        self._hold_timer: Any = None

    @property
    def building(self) -> bool:
        """Whether a rebuild runs in its thread now (bench/bench_tui.py tells the keys that overlapped one)."""
        return self._building

    def on_mount(self) -> None:
        self._poll_wanted.set()
        self._poll_thread()
        self._watch_thread()
        if self.logs is not None:
            self.logs.on_record = lambda: self.post_message(self.Live())

    async def on_unmount(self) -> None:
        if self.logs is not None:
            self.logs.on_record = None
        self._stopping.set()
        with self._loops_lock:
            loops = list(self._loops.values())
        for loop, task in loops:
            with contextlib.suppress(RuntimeError):  # that loop has just finished by itself
                loop.call_soon_threadsafe(task.cancel)
        # Wait (bounded) for the feed's threads to finish their clean-up, such as
        # stopping a `devctl watch` child, before the process may exit under them.
        deadline = time.monotonic() + self.STOP_WAIT
        while any(not loop.is_closed() for loop, _ in loops) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)  # other threads' loops: nothing here can await them

    # --- the feed's own threads ------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False, description="poll the feed")
    def _poll_thread(self) -> None:
        self._in_own_loop("poll", self._poll_loop, self.POLL_THREADS)

    @work(thread=True, exclusive=True, group="watch", exit_on_error=False, description="follow the feed's events")
    def _watch_thread(self) -> None:
        self._in_own_loop("watch", self._watch_loop)

    def _in_own_loop(self, name: str, run: Callable[[], Awaitable[None]], threads: int = 0) -> None:
        """Run ``run`` on a new event loop in this worker thread, until the app goes away.

        gRPC replies are parsed and turned into model objects where they are
        received: on this loop, never on the app's, so a plugin listing 10,000
        devices twenty times a second does not stand between a key and its frame.
        ``threads`` (when not 0) is the size of the loop's default executor, started full (devctl.fast.pools).
        """

        async def main() -> None:
            if threads:
                use_started_pool(threads, f"devctl-tui-{name}")
            with self._loops_lock:
                if self._stopping.is_set():
                    return
                task = asyncio.current_task()
                assert task is not None
                self._loops[name] = (asyncio.get_running_loop(), task)
            try:
                await run()
            finally:
                with self._loops_lock:
                    self._loops.pop(name, None)

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(main())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker that fails says so: the one place worker errors become words (as harlequin does).

        Textual sends a worker's state to the widget that started it, and every
        worker of the TUI is this one's; the screen puts the line in the event
        log and marks the status bar, so a view that stopped updating never
        looks fine.
        """
        if event.state != WorkerState.ERROR:
            return
        event.stop()
        worker, error = event.worker, event.worker.error
        what = worker.description or worker.name or "a background task"
        text = f"{what} stopped: {type(error).__name__}: {error}".splitlines()[0]
        self.post_message(self.Failed(LogLine(self.clock(), "error", "", "", text, "bad")))

    def _say(self, text: str) -> None:
        self.post_message(self.LogLines([LogLine(self.clock(), "error", "", "", text, "bad")]))

    # --- polling ---------------------------------------------------------------------------

    def request_poll(self) -> None:
        """Collect again as soon as the rate limit allows."""
        self._poll_wanted.set()

    async def _poll_loop(self) -> None:
        token = self.feed.change_token()
        last = -1e9
        while True:
            changed = self.feed.change_token()
            due = self._poll_wanted.is_set() or changed != token or time.monotonic() - last >= self.POLL_EVERY
            if not due:
                await asyncio.sleep(self.TOKEN_EVERY)
                continue
            await asyncio.sleep(max(last + self.POLL_MIN - time.monotonic(), 0))
            token = changed
            self._poll_wanted.clear()
            mark = self._seq
            last = time.monotonic()
            try:
                snapshot = await (self.feed.snapshot() if self._polled_once.is_set() else self._first_snapshot(mark))
            except Exception as e:  # collect turns failures into SourceErrors; anything else is said, not fatal
                self._say(f"poll failed: {e}")
            else:
                self._learn_names(snapshot)
                self.post_message(self.Polled(snapshot, mark))
                self._polled_once.set()

    async def _first_snapshot(self, mark: int) -> NodeSnapshot:
        """The first poll, which may wait up to the deadline for a hung socket: meanwhile, show what has answered.

        Each tick, the node as far as it answered becomes the view (when
        something new answered), and ``Waiting`` names what is still awaited;
        the complete snapshot replaces it all when it comes.
        """
        latest: Progress | None = None

        def heard(progress: Progress) -> None:
            nonlocal latest
            latest = progress

        started = time.monotonic()
        full = asyncio.ensure_future(self.feed.snapshot(progress=heard))
        shown: frozenset[str] | None = None
        try:
            while not (await asyncio.wait({full}, timeout=self.WAITING_TICK))[0]:
                if latest is None:
                    continue
                if latest.pending != shown:
                    shown = latest.pending
                    partial = latest.snapshot()
                    self._learn_names(partial)
                    self.post_message(self.Polled(partial, mark))
                    self._polled_once.set()  # the live stream need not wait for the slow source either
                self.post_message(self.Waiting(latest.names(), time.monotonic() - started))
        finally:
            if not full.done():
                full.cancel()
            if shown is not None:
                self.post_message(self.Waiting([], time.monotonic() - started))
        return full.result()

    def on_node_source_polled(self, message: Polled) -> None:
        message.stop()
        self._base = message.snapshot
        # Events that arrived while the snapshot was taken may not be in it: lay them over it again.
        self._items = [(seq, item) for seq, item in self._items if seq >= message.mark]
        self._schedule()

    # --- live events -----------------------------------------------------------------------

    def _learn_names(self, snapshot: NodeSnapshot) -> None:
        """Remember which resource each socket serves, before the live stream may ask (see _resolve)."""
        from devctl.core.watch import socket_resources

        learned = {socket: name for socket, name in socket_resources(snapshot).items() if name is not None}
        self._names = {**self._names, **learned}

    async def _resolve(self) -> dict[str, str | None]:
        # Which resource each socket serves, from the polls so far: no extra RPCs. A socket keeps the name
        # it was last known by, so that a plugin that stopped is still named in its "disconnected" event.
        return self._names

    async def _watch_loop(self) -> None:
        # The first poll names the sockets' resources. It is set from another thread's
        # loop, which an asyncio.Event cannot be, hence a threading.Event looked at briefly.
        while not self._polled_once.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        # The watch follows the DRA drivers' health streams too, on the same timeline (devctl.core.watch).
        await self._follow_plugins()

    def _take(self, item: object) -> None:
        self._buffer.append((self._seq, item))
        self._seq += 1
        self.post_message(self.Live())

    async def _follow_plugins(self) -> None:
        while True:
            try:
                async with contextlib.aclosing(self.feed.events(self._resolve)) as events:
                    async for item in events:
                        self._take(item)
                return
            except Exception as e:  # the watch as a whole failed: say so, and start it again
                self._say(f"live events stopped: {e}")
                await asyncio.sleep(self.WATCH_RETRY)

    def on_node_source_live(self, message: Live) -> None:
        message.stop()
        items = [self._buffer.popleft() for _ in range(len(self._buffer))]
        known = self._known()
        lines = []
        for _, item in items:
            if self._unnamed(item, known):
                self._held.append((time.monotonic(), item))
                if self._hold_timer is None:
                    self._hold_timer = self.set_timer(self.HOLD_MAX, self._release_held)
            elif (line := event_line(item, known)) is not None:
                lines.append(line)
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

    def _known(self) -> dict[str, str]:
        """Sockets as the polls so far named them (the first events may come before the first view), then the view's."""
        known = {os.path.abspath(s): n for s, n in self._names.items() if n is not None}
        known.update(self.view.socket_resource if self.view else {})
        return known

    def _unnamed(self, item: object, known: dict[str, str]) -> bool:
        """A plugin's event whose socket no source has named yet (a plugin is named by the kubelet's device IDs)."""
        if not isinstance(item, WatchEvent) or item.resource is not None or not item.socket:
            return False
        return os.path.abspath(item.socket) not in known

    def _release_held(self) -> None:
        """Log the held events that are named now, and those held HOLD_MAX (by their socket's file name)."""
        self._hold_timer = None
        known, now = self._known(), time.monotonic()
        lines, keep = [], []
        for since, item in self._held:
            if self._unnamed(item, known) and now - since < self.HOLD_MAX:
                keep.append((since, item))
            elif (line := event_line(item, known)) is not None:
                lines.append(line)
        self._held = keep
        if keep:
            self._hold_timer = self.set_timer(max(self.HOLD_MAX - (now - keep[0][0]), 0.05), self._release_held)
        if lines:
            self.post_message(self.LogLines(lines))

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

    # A description of its own: textual's default is the repr of the arguments, a whole snapshot.
    @work(thread=True, group="build", description="rebuild the view")
    def _build(self, base: NodeSnapshot, items: tuple[Any, ...], previous: NodeView | None) -> None:
        started = time.monotonic()
        try:
            dra = [item for item in items if is_dra_event(item)]
            plugin_items = [item for item in items if not is_dra_event(item)] if dra else items
            view = build_view(with_dra_health(base, dra), plugin_items, self.clock(), previous)
            lines = view_changes(previous, view) if previous is not None else []
            presented = self.present(view)
        except Exception as e:  # a bug in analysis must not freeze the view: keep the last one, say why
            line = LogLine(self.clock(), "error", "", "", f"analysis failed: {type(e).__name__}: {e}", "bad")
            self.post_message(self.Built(None, [line], time.monotonic() - started, None))
            return
        self.post_message(self.Built(view, lines, time.monotonic() - started, presented))

    def on_node_source_built(self, message: Built) -> None:
        message.stop()
        self._building = False
        self._last_build = time.monotonic()
        self.last_build_seconds = message.seconds
        self._interval = max(self.REFRESH_MIN, self.REFRESH_FACTOR * message.seconds)
        if message.view is None:
            self.post_message(self.LogLines(message.lines))
        else:
            self.view = message.view
            self.rebuilds += 1
            if self._held:
                self._release_held()
            self.post_message(self.ViewReady(message.view, message.lines, message.presented))
        if self._dirty:
            self._dirty = False
            self._schedule()
