"""Under the resources on the first screen: doctor's findings and the last few events.

A person who opens the TUI on a sick node should see what is wrong without
pressing a key: the findings are ``devctl doctor``'s (``devctl.analyze.doctor.diagnose``
on the same view, errors first), each opening its hint on Enter, and the newest
lines of the event log follow them in whatever height is left.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Static

from devctl.base.escape import escape
from devctl.model import Finding, Severity
from devctl.tui.state import LogLine
from devctl.tui.widgets.edge import EdgeTable
from devctl.tui.widgets.events import COLUMNS as EVENT_COLUMNS
from devctl.tui.widgets.events import FLUSH_EVERY, log_row
from devctl.tui.widgets.table import Column, Row, RowSet, RowTable

# The subject tells one finding from the next (two bad GPUs, two containers of one pod): the message gives way
# first, then the code; the subject is cut in its middle, so its end (the device, the container) stays.
FINDING_COLUMNS = (
    Column("SEVERITY", 8),
    Column("CODE", 28, min_width=24, give=1),
    Column("SUBJECT", 40, min_width=16, middle=True),
    Column("MESSAGE", 200, min_width=20, give=2),
)

_TONES = {Severity.ERROR: "bad", Severity.WARNING: "warn", Severity.INFO: "dim"}

RECENT = 50  # the newest lines kept here; as many as fit are shown, the newest at the bottom


def finding_rows(findings: Iterable[Finding]) -> list[Row]:
    """One row per finding, in doctor's order (errors first); the key is its position."""
    return [
        Row(str(i), (f.severity, f.code, f.subject or "-", f.message), _TONES.get(f.severity, ""))
        for i, f in enumerate(findings)
    ]


def finding_text(f: Finding) -> Text:
    """A finding as ``devctl doctor`` prints it, with its hint in full."""
    out = Text()
    out.append(escape(f"{f.severity} {f.code}"), "bold red" if f.severity == Severity.ERROR else "bold")
    out.append(escape(f"  {f.subject}") + "\n" if f.subject else "\n")
    out.append(escape(f.message) + "\n")
    out.append("\nhint: ", "bold")
    out.append(escape(f.hint or "none given") + "\n")
    return out


def event_text(line: LogLine) -> Text:
    """An event log line in full: every field, nothing cut."""
    out = Text()
    stamp = line.time.strftime("%Y-%m-%d %H:%M:%S.") + f"{line.time.microsecond // 1000:03d}Z"
    out.append(f"{stamp}  ", "dim")
    out.append(escape(line.event) + "\n", "bold")
    if line.resource:
        out.append(escape(f"resource  {line.resource}") + "\n")
    if line.device:
        out.append(escape(f"device    {line.device}") + "\n")
    out.append(escape(line.detail or "-") + "\n")
    return out


class OverviewPane(Vertical):
    """Findings, then the newest events, below the resources table."""

    DEFAULT_CSS = """
    OverviewPane { height: 1fr; }
    OverviewPane .overview-title { height: 1; color: $text-accent; text-style: bold; }
    OverviewPane #findings-table { height: auto; max-height: 40vh; }
    OverviewPane #recent-table { height: 1fr; min-height: 2; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.findings: tuple[Finding, ...] = ()
        self._recent: list[LogLine] = []
        self._pending: list[LogLine] = []
        self._timer: Timer | None = None
        self._shown = True  # the first screen is the one shown at start

    def compose(self) -> ComposeResult:
        yield Static("Findings (devctl doctor) · Enter: hint", classes="overview-title", id="findings-title")
        yield EdgeTable(
            FINDING_COLUMNS,
            empty="no findings: the node looks fine",
            id="findings-table",
            above="resources-table",
            below="recent-table",
        )
        yield Static("Last events · 5: all", classes="overview-title")
        yield EdgeTable(
            EVENT_COLUMNS, empty="no events yet", follow_tail=True, id="recent-table", above="findings-table"
        )

    def show(self, findings: tuple[Finding, ...], rows: RowSet) -> None:
        self.findings = findings
        errors = sum(1 for f in findings if f.severity == Severity.ERROR)
        title = f"Findings (devctl doctor): {len(findings)}, {errors} error{'' if errors == 1 else 's'} · Enter: hint"
        self.query_one("#findings-title", Static).update(title if findings else "Findings (devctl doctor)")
        self.query_one("#findings-table", RowTable).set_rows(rows)

    def add(self, lines: Iterable[LogLine]) -> None:
        """New events: they reach the table in batches, and only while the first screen is shown (as the log's)."""
        self._pending.extend(lines)
        del self._pending[:-RECENT]
        if self._shown and self._timer is None:
            self._timer = self.set_timer(FLUSH_EVERY, self.flush)

    def shown(self, shown: bool) -> None:
        """Told by the screen when the first screen comes into view (and goes)."""
        self._shown = shown
        if shown:
            self.flush()

    def flush(self) -> None:
        """The newest events, in time order (the event log has them all)."""
        self._timer = None
        if not self._pending:
            return
        self._recent = sorted([*self._recent, *self._pending], key=lambda line: line.time)[-RECENT:]
        self._pending = []
        self.query_one("#recent-table", RowTable).set_rows([log_row(i, line) for i, line in enumerate(self._recent)])

    def line(self, key: str) -> LogLine | None:
        index = int(key)
        return self._recent[index] if 0 <= index < len(self._recent) else None
