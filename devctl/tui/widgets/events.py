"""The live event log: ListAndWatch changes of every plugin and what each poll found changed."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer

from devctl.analyze.history import matches
from devctl.model.history import NodeEvent
from devctl.tui.state import LogLine
from devctl.tui.widgets.table import Column, Row, RowTable

# At 80 columns the device ID stays whole (up to 24 characters) and the detail keeps a health change
# (``Healthy → Unhealthy``): the detail's tail gives way first, then the resource's name.
COLUMNS = (
    Column("TIME (UTC)", 12),
    Column("EVENT", 12),
    Column("RESOURCE", 30, min_width=14, give=1),
    Column("DEVICE", 24, min_width=24),
    Column("DETAIL", 80, min_width=20, give=2),
)

MAX_LINES = 5000  # older lines drop off; `devctl watch --record` keeps everything
# New lines reach the table at most this often while the log is on screen, and
# not at all while it is not: each batch re-lays the screen out once, not once a line.
FLUSH_EVERY = 0.25


def log_row(number: int, line: LogLine) -> Row:
    stamp = line.time.strftime("%H:%M:%S.") + f"{line.time.microsecond // 1000:03d}"
    return Row(str(number), (stamp, line.event, line.resource or "-", line.device or "-", line.detail), line.tone)


class EventsTable(RowTable):
    """The log's table: `/` keeps a row whose text holds the filter, or whose journal event it names as
    ``devctl events SUBJECT`` does (``analyze.history.matches``: a resource, device, PCI address in any
    spelling, or a pod that held the device)."""

    def __init__(self, events: dict[str, NodeEvent], **kwargs: object) -> None:
        super().__init__(COLUMNS, **kwargs)  # type: ignore[arg-type]
        self._events = events

    def passes(self, row: Row, needle: str) -> bool:
        if super().passes(row, needle):
            return True
        event = self._events.get(row.key)
        return event is not None and matches(event, self.filter_text)


class EventsPane(Vertical):
    """Newest at the bottom; the view follows new lines while the cursor is on the last one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._count = 0
        self._pending: list[tuple[LogLine, Row]] = []
        self._lines: dict[str, LogLine] = {}  # row key -> the whole line, the newest MAX_LINES
        self._events: dict[str, NodeEvent] = {}  # row key -> the journal's event behind a history line
        self._last: datetime | None = None  # the time of the newest line in the table
        self._timer: Timer | None = None
        self._shown = False

    def compose(self) -> ComposeResult:
        yield EventsTable(self._events, empty="no events yet", follow_tail=True, id="events-table")

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    @property
    def lines(self) -> int:
        """How many lines were ever added (the table keeps the newest MAX_LINES)."""
        return self._count

    def add(self, lines: Iterable[LogLine]) -> None:
        batch = [(line, log_row(self._count + i, line)) for i, line in enumerate(lines)]
        self._count += len(batch)
        self._pending.extend(batch)
        del self._pending[:-MAX_LINES]
        if self._shown and self._timer is None:
            self._timer = self.set_timer(FLUSH_EVERY, self.flush)

    def add_history(self, pairs: Iterable[tuple[LogLine, NodeEvent]]) -> None:
        """The journal's events (oldest first) with their lines: they take their place in time order,
        above the live lines that came after them, and `/` matches them by subject too."""
        pairs = list(pairs)[-MAX_LINES:]
        for i, (_, event) in enumerate(pairs):
            self._events[str(self._count + i)] = event
        self.add(line for line, _ in pairs)

    def event(self, key: str) -> NodeEvent | None:
        """The journal's event behind a row, None for a live line."""
        return self._events.get(key)

    def shown(self, shown: bool) -> None:
        """Told by the screen when the log comes into view (and goes); lines wait while it is hidden."""
        self._shown = shown
        if shown:
            self.flush()

    def line(self, key: str) -> LogLine | None:
        """The whole line behind a row (its cells are cut to the column width)."""
        return self._lines.get(key)

    def flush(self) -> None:
        """Put the lines that arrived since the last flush into the table, in one go, in time order.

        Live events and what a poll found arrive by different paths (a poll's
        lines come when its rebuild is done), so a batch may hold lines older
        than the last one shown: then the kept lines are laid out again in order.
        """
        self._timer = None
        pending, self._pending = sorted(self._pending, key=lambda p: p[0].time), []
        if not pending:
            return
        for line, row in pending:
            self._lines[row.key] = line
        while len(self._lines) > MAX_LINES:
            del self._lines[next(iter(self._lines))]
        if len(self._events) > len(self._lines):  # history lines that dropped off (or never reached the table)
            for key in [k for k in self._events if k not in self._lines]:
                del self._events[key]
        if self._last is None or pending[0][0].time >= self._last:
            self.table.append_rows([row for _, row in pending], MAX_LINES)
        else:
            ordered = sorted(self._lines.items(), key=lambda kv: kv[1].time)
            self.table.set_rows([log_row(int(key), line) for key, line in ordered])
        self._last = max(self._last or pending[-1][0].time, pending[-1][0].time)
