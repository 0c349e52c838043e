"""The live event log: ListAndWatch changes of every plugin and what each poll found changed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from textual.app import ComposeResult
from textual.containers import Vertical

from devctl.tui.state import LogLine
from devctl.tui.widgets.table import Column, Row, RowTable

COLUMNS = (
    Column("TIME (UTC)", 12),
    Column("EVENT", 12),
    Column("RESOURCE", 30, min_width=14, give=1),
    Column("DEVICE", 24, min_width=8, give=1),
    Column("DETAIL", 80, min_width=20),
)

MAX_LINES = 5000  # older lines drop off; `devctl watch --record` keeps everything


def log_row(number: int, line: LogLine) -> Row:
    stamp = line.time.strftime("%H:%M:%S.") + f"{line.time.microsecond // 1000:03d}"
    return Row(str(number), (stamp, line.event, line.resource or "-", line.device or "-", line.detail), line.tone)


class EventsPane(Vertical):
    """Newest at the bottom; the view follows new lines while the cursor is on the last one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: deque[Row] = deque(maxlen=MAX_LINES)
        self._count = 0

    def compose(self) -> ComposeResult:
        yield RowTable(COLUMNS, empty="no events yet", follow_tail=True, id="events-table")

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    @property
    def lines(self) -> int:
        """How many lines were ever added (the table keeps the newest MAX_LINES)."""
        return self._count

    def add(self, lines: Iterable[LogLine]) -> None:
        added = False
        for line in lines:
            self._rows.append(log_row(self._count, line))
            self._count += 1
            added = True
        if added:
            self.table.set_rows(self._rows)
