"""The main screen: six views of the node, a filter, and the keys that drive in-process plugins."""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input

from devctl.analyze.doctor import recheck_sockets
from devctl.core.doctor import DoctorExtras, diagnose_node
from devctl.fast.interpreter import settle
from devctl.model import Finding, NodeSnapshot, Severity
from devctl.tui.feeds import Feed, LogCapture, PluginControls
from devctl.tui.screens.detail import ContainerScreen
from devctl.tui.screens.node_answers import NodeAnswers
from devctl.tui.screens.node_rows import CONTROL_ACTIONS, TITLES, VIEW_NAMES, VIEWS, Diagnosed, Presented, Presenter
from devctl.tui.screens.text import TextScreen
from devctl.tui.source import Clock, NodeSource, utc_now
from devctl.tui.state import LogLine, NodeView, container_key, waiting_text
from devctl.tui.widgets import overview
from devctl.tui.widgets.claims import ClaimsPane, claim_text
from devctl.tui.widgets.devices import DevicesPane
from devctl.tui.widgets.events import EventsPane
from devctl.tui.widgets.keybar import KeyBar
from devctl.tui.widgets.numa import NumaPane
from devctl.tui.widgets.overview import OverviewPane, event_text, finding_text
from devctl.tui.widgets.pods import PodsPane
from devctl.tui.widgets.resources import ResourcesPane
from devctl.tui.widgets.statusbar import StatusBar
from devctl.tui.widgets.table import RowTable, row_set
from devctl.tui.widgets.viewbar import ViewBar


class NodeScreen(NodeAnswers):
    """What a person at the node sees first; every view follows the feed live."""

    # Doctor's checks cost more than the analysis itself (about 1.5x at 10,000 devices): they run
    # in a thread of their own, only while the first screen shows them, on the newest view, at
    # most every 2 s and never sooner than four times the last run took (a fifth of the
    # interpreter at most), so live updates and keys keep their pace.
    FINDINGS_EVERY = 2.0
    FINDINGS_FACTOR = 4

    DEFAULT_CSS = """
    NodeScreen #views { height: 1fr; }
    NodeScreen #resources ResourcesPane { height: auto; }
    NodeScreen #resources-table { height: auto; max-height: 45vh; }
    NodeScreen #filter { dock: bottom; display: none; height: 3; }
    NodeScreen #filter.-shown { display: block; }
    NodeScreen #command { dock: bottom; display: none; height: 3; }
    NodeScreen #command.-shown { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "next_view(1)", "View"),
        Binding("shift+tab", "next_view(-1)", "Previous view", show=False),
        *(Binding(str(i + 1), f"show_view('{v}')", TITLES[v], show=False) for i, v in enumerate(VIEWS)),
        Binding("slash", "filter", "Filter"),
        Binding("colon", "command", "Command", show=False),
        Binding("escape", "back", "Back", show=False),
        Binding("r", "refresh", "Refresh"),
        Binding("left_square_bracket", "step_resource(-1)", "Previous resource", show=False),
        Binding("right_square_bracket", "step_resource(1)", "Next resource", show=False),
        Binding("h", "toggle_health", "Health"),
        Binding("a", "add_device", "Add"),
        Binding("x", "remove_device", "Remove"),
    ]

    def __init__(
        self,
        feed: Feed,
        *,
        label: str,
        clock: Clock = utc_now,
        logs: LogCapture | None = None,
    ) -> None:
        super().__init__()
        self.feed = feed
        self.label = label
        self.clock = clock
        self.logs = logs
        self.controls: PluginControls | None = getattr(feed, "controls", None)
        self.live: bool = getattr(feed, "live", True)  # False for a snapshot file: nothing to read again
        self.view: NodeView | None = None
        self.presented: Presented | None = None
        self.resource: str | None = None  # the resource whose devices the devices view shows
        self._stale: set[str] = set(VIEWS)  # views not redrawn since the last new view
        self._history: list[str] = ["resources"]  # the views shown, the current one last, for Esc
        self.findings_for: NodeView | None = None  # the view whose findings are on screen
        self._diagnosing = False
        self._diagnose_after = 0.0  # monotonic time before which no new diagnosis starts
        self._diagnose_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar(self.label, self.live)
        yield ViewBar(TITLES, "resources")
        # Each view is one widget whose id is the view's name; the switcher shows one of them.
        with ContentSwitcher(initial="resources", id="views"):
            with Vertical(id="resources"):
                yield ResourcesPane()
                yield OverviewPane()
            yield DevicesPane(id="devices")
            yield PodsPane(id="pods")
            yield NumaPane(id="numa")
            yield EventsPane(id="events")
            yield ClaimsPane(id="claims")
        yield Input(placeholder="filter rows: type, Enter to keep, Esc to clear", id="filter")
        yield Input(placeholder=":view [resource]  e.g. pods, devices nvidia.com/gpu  (Esc: cancel)", id="command")
        yield KeyBar(self.live)
        yield NodeSource(self.feed, clock=self.clock, logs=self.logs, present=Presenter())

    def on_mount(self) -> None:
        self.query_one("#resources-table", RowTable).focus()
        self.load_history()  # the journal's last 24 h, in a thread (screens/node_answers.py)

    # --- the view ----------------------------------------------------------------------------

    @property
    def active(self) -> str:
        return self.query_one(ContentSwitcher).current or "resources"

    @property
    def source(self) -> NodeSource:
        return self.query_one(NodeSource)

    def active_table(self) -> RowTable | None:
        tables = self.query_one(f"#{self.active}").query(RowTable)
        return tables.first() if tables else None

    def on_node_source_view_ready(self, message: NodeSource.ViewReady) -> None:
        first = self.view is None
        self.view = message.view
        self.presented = message.presented  # type: ignore[assignment]
        if message.lines:
            self._log(message.lines)
        names = [r.name for r in message.view.resources]
        if self.resource not in names:
            self.resource = names[0] if names else None
        self.query_one(StatusBar).show(message.view)
        self._stale = set(VIEWS) - {"events"}
        # Only the view on screen is drawn now; the others when they are shown.
        self._redraw(self.active)
        self._want_findings()
        if isinstance(self.app.screen, ContainerScreen):
            self.app.screen.show(message.view)
        if first:
            settle()  # the app is up: what lives now stays out of the collector's way (tui/interpreter.py)

    def _log(self, lines: list[LogLine]) -> None:
        """Lines for the event log, and for the last events on the first screen."""
        self.query_one(EventsPane).add(lines)
        self.query_one(OverviewPane).add(lines)

    def on_node_source_log_lines(self, message: NodeSource.LogLines) -> None:
        self._log(message.lines)

    def on_node_source_waiting(self, message: NodeSource.Waiting) -> None:
        """The first read waits for a slow source: say for what, in the status bar and where rows would be."""
        text = waiting_text(message.names, message.seconds)
        self.query_one(StatusBar).wait_for(text)
        self.query_one(ResourcesPane).waiting(text)

    def on_node_source_failed(self, message: NodeSource.Failed) -> None:
        """A background task stopped: log why, and mark the status bar for as long as the app runs."""
        self._log([message.line])
        self.query_one(StatusBar).fail(message.line.detail)

    def _redraw(self, name: str) -> None:
        view, presented = self.view, self.presented
        if view is None or presented is None or name not in self._stale:
            return
        self._stale.discard(name)
        if name == "resources":
            self.query_one(ResourcesPane).show(view, presented.resources)
            if self.resource is not None:
                self.query_one("#resources-table", RowTable).move_to_key(self.resource)
        elif name == "devices":
            self.query_one(DevicesPane).show(view, self.resource, presented.devices.get(self.resource or ""))
        elif name == "pods":
            self.query_one(PodsPane).show(view, presented.pods)
        elif name == "numa":
            self.query_one(NumaPane).show(view)
        elif name == "claims":
            self.query_one(ClaimsPane).show(presented.claims)
        self._show_keys()

    # --- doctor's findings on the first screen -------------------------------------------------

    def _want_findings(self) -> None:
        """Diagnose the newest view, when the first screen is shown and the pace allows."""
        view = self.view
        if view is None or view is self.findings_for or self._diagnosing or self.active != "resources":
            return
        wait = self._diagnose_after - time.monotonic()
        if wait > 0:
            if self._diagnose_timer is None:
                self._diagnose_timer = self.set_timer(wait, self._diagnose_due)
            return
        self._diagnosing = True
        self._diagnose(view)

    def _diagnose_due(self) -> None:
        self._diagnose_timer = None
        self._want_findings()

    @work(thread=True, group="findings", exit_on_error=False, description="diagnose the node (devctl doctor)")
    def _diagnose(self, view: NodeView) -> None:
        again = self._reread(view)
        extras = self._extras(view)
        started = time.monotonic()
        try:
            found = diagnose_node(view.snapshot, again, extras)
        except Exception as e:  # a bug in a check must not stop the screen: say it where the findings go
            bug = f"{type(e).__name__}: {e}"
            found = (Finding(Severity.ERROR, "diagnose-failed", "", bug, "a bug in devctl doctor"),)
        rows = row_set(overview.FINDING_COLUMNS, overview.finding_rows(found))
        self.post_message(Diagnosed(view, found, rows, time.monotonic() - started))

    def _extras(self, view: NodeView) -> DoctorExtras | None:
        """As ``devctl doctor`` on a live node: its readings beside the snapshot (none from a snapshot file)."""
        extras_of = getattr(self.feed, "doctor_extras", None)
        if extras_of is None:
            return None
        try:
            extras: DoctorExtras = asyncio.run(extras_of(view.snapshot))
        except Exception:  # doctor's extra readings failed: the snapshot's findings alone
            return None
        return extras

    def _reread(self, view: NodeView) -> NodeSnapshot | None:
        """As ``devctl doctor``: where a plugin and the kubelet disagree, read both again a moment later (in this
        thread, on a loop of its own), so that a health flip the kubelet has not yet been polled for is no finding."""
        reread = getattr(self.feed, "reread", None)
        sockets = recheck_sockets(view.snapshot) if reread is not None else ()
        if not sockets or reread is None:
            return None
        try:
            again: NodeSnapshot = asyncio.run(reread(view.snapshot, sockets))
        except Exception:  # the second reading failed: one reading, as doctor on a snapshot file says
            return None
        return again

    def on_diagnosed(self, message: Diagnosed) -> None:
        self._diagnosing = False
        self._diagnose_after = time.monotonic() + max(self.FINDINGS_EVERY, self.FINDINGS_FACTOR * message.seconds)
        self.findings_for = message.view
        self.query_one(OverviewPane).show(message.findings, message.rows)
        self._want_findings()

    def _show_keys(self) -> None:
        active = self.active
        self.query_one(KeyBar).show(active, active == "devices" and self._controllable(self.resource))

    def _view_shown(self, name: str) -> None:
        if self._history[-1:] != [name]:
            self._history = [*self._history[-20:], name]
        self._redraw(name)
        self._want_findings()
        self.query_one(EventsPane).shown(name == "events")
        self.query_one(OverviewPane).shown(name == "resources")
        table = self.active_table()
        typing = self.query_one("#command", Input).has_class("-shown")  # a `:` typed since keeps its line
        if table is not None:
            if not typing:
                table.focus()
            self.query_one("#filter", Input).value = table.filter_text
        elif not typing:
            self.query_one(f"#{name}").focus()  # the NUMA map: arrows, PgUp, PgDn, Home, End scroll it
        self._show_keys()

    def action_show_view(self, name: str) -> None:
        if name == self.active:
            return
        self.query_one(ContentSwitcher).current = name
        self.query_one(ViewBar).show(name)
        self._view_shown(name)

    @on(ViewBar.Chosen)
    def _view_clicked(self, event: ViewBar.Chosen) -> None:
        self.action_show_view(event.view)

    def action_next_view(self, step: int) -> None:
        index = VIEWS.index(self.active)
        self.action_show_view(VIEWS[(index + step) % len(VIEWS)])

    # --- selecting and opening ---------------------------------------------------------------

    @on(RowTable.Highlighted, "#resources-table")
    def _resource_highlighted(self, event: RowTable.Highlighted) -> None:
        if event.key is not None and event.key != self.resource:
            self.resource = event.key
            self._stale.add("devices")

    @on(RowTable.Selected, "#resources-table")
    def _resource_selected(self, event: RowTable.Selected) -> None:
        self.resource = event.key
        self._stale.add("devices")
        self.action_show_view("devices")

    @on(RowTable.Selected, "#devices-table")
    def _device_selected(self, event: RowTable.Selected) -> None:
        if self.view is None:
            return
        row = next((d for d in self.view.devices.get(self.resource or "", ()) if d.id == event.key), None)
        timeline = self.device_timeline(self.resource or "", row) if row is not None else None
        if row is None or not row.allocated_to:
            if timeline is not None:
                self.app.push_screen(TextScreen(Text(timeline), title="device"))
            else:
                self.tell(f"{event.key} is not held by any container", timeout=3)
            return
        h = row.allocated_to[0]
        key = container_key(h.namespace, h.pod, h.container)
        self.app.push_screen(ContainerScreen(key, self.view, timeline=timeline))

    @on(RowTable.Selected, "#pods-table")
    def _container_selected(self, event: RowTable.Selected) -> None:
        if self.view is not None:
            self.app.push_screen(ContainerScreen(event.key, self.view))

    @on(RowTable.Selected, "#claims-table")
    def _claim_selected(self, event: RowTable.Selected) -> None:
        claim = self.presented.claim_rows.get(event.key) if self.presented is not None else None
        if claim is not None and self.presented is not None:
            self.app.push_screen(TextScreen(claim_text(claim, self.presented.cdi), title="claim"))

    @on(RowTable.Selected, "#findings-table")
    def _finding_selected(self, event: RowTable.Selected) -> None:
        findings = self.query_one(OverviewPane).findings
        index = int(event.key)
        if 0 <= index < len(findings):
            self.app.push_screen(TextScreen(finding_text(findings[index]), title="finding"))

    @on(RowTable.Selected, "#events-table")
    def _event_selected(self, event: RowTable.Selected) -> None:
        line = self.query_one(EventsPane).line(event.key)
        if line is not None:
            self.app.push_screen(TextScreen(event_text(line), title="event"))

    @on(RowTable.Selected, "#recent-table")
    def _recent_selected(self, event: RowTable.Selected) -> None:
        line = self.query_one(OverviewPane).line(event.key)
        if line is not None:
            self.app.push_screen(TextScreen(event_text(line), title="event"))

    def action_step_resource(self, step: int) -> None:
        if self.view is None or not self.view.resources:
            return
        names = [r.name for r in self.view.resources]
        index = names.index(self.resource) if self.resource in names else -step
        self.resource = names[(index + step) % len(names)]
        self._stale.update({"devices", "resources"})
        if self.active != "devices":
            self.action_show_view("devices")
        else:
            self._redraw("devices")

    def action_refresh(self) -> None:
        self.source.request_poll()
        self.load_history()  # the journal and the kernel log read again, in a thread: new events join the log
        self.tell("polling pod-resources and the plugins again", timeout=2)

    # --- filter ------------------------------------------------------------------------------

    def action_filter(self) -> None:
        table = self.active_table()
        if table is None:
            self.tell("this view has no rows to filter", timeout=3)
            return
        field = self.query_one("#filter", Input)
        field.value = table.filter_text
        field.add_class("-shown")
        field.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        table = self.active_table()
        if table is not None:
            table.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        field = self.query_one("#filter", Input)
        if not field.value:
            field.remove_class("-shown")
        table = self.active_table()
        if table is not None:
            table.focus()

    def action_back(self) -> None:
        """Esc: close the command line, else clear the filter, else go back to the view shown before."""
        command = self.query_one("#command", Input)
        table = self.active_table()
        if command.has_class("-shown"):
            command.value = ""
            command.remove_class("-shown")
            if table is not None:
                table.focus()
        elif self.query_one("#filter", Input).has_class("-shown") or (table is not None and table.filter_text):
            self.action_clear_filter()
        elif len(self._history) > 1:
            self._history.pop()
            self.action_show_view(self._history.pop())

    # --- the command line --------------------------------------------------------------------

    def action_command(self) -> None:
        field = self.query_one("#command", Input)
        field.value = ""
        field.add_class("-shown")
        field.focus()

    @on(Input.Submitted, "#command")
    def _command_given(self, event: Input.Submitted) -> None:
        field = self.query_one("#command", Input)
        field.remove_class("-shown")
        words = event.value.strip().lstrip(":").split()
        view = VIEW_NAMES.get(words[0].lower()) if words else None
        if words and words[0] in ("q", "quit", "q!"):
            self.app.exit()
            return
        if self.answer_command(words):  # `:fit REQUEST`, `:why POD`: answered in a text screen
            words = []
        if words and view is None:
            from devctl.base.names import likely

            guess = likely(words[0], VIEW_NAMES)
            hint = f" (did you mean {guess}?)" if guess else f": one of {', '.join(VIEWS)}"
            self.tell(f"no view {words[0]}{hint}", timeout=4)
        if view is not None and len(words) > 1 and view == "devices":
            self._show_resource(words[1])
        if view is None or view == self.active:
            table = self.active_table()
            if table is not None:
                table.focus()
        else:
            self.action_show_view(view)  # its table takes the focus when the view is shown

    def _show_resource(self, name: str) -> None:
        from devctl.base.names import likely

        names = [r.name for r in self.view.resources] if self.view is not None else []
        chosen = name if name in names else likely(name, names)
        if chosen is None:
            self.tell(f"resource {name} not found", timeout=4)
            return
        self.resource = chosen
        self._stale.update({"devices", "resources"})
        if self.active == "devices":
            self._redraw("devices")

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.remove_class("-shown")
        table = self.active_table()
        if table is not None:
            table.filter_text = ""
            table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CONTROL_ACTIONS:
            # Shown only where they act: on the devices of a plugin running in this process.
            return self.active == "devices" and self._controllable(self.resource)
        if action == "refresh":
            return self.live  # a snapshot file has nothing to read again
        return True


__all__ = ["CONTROL_ACTIONS", "TITLES", "VIEWS", "VIEW_NAMES", "NodeScreen", "Presented", "Presenter"]
