"""The devices of one resource: health, NUMA nodes, state and the container holding each."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from devctl.analyze import DeviceRow
from devctl.base.escape import escape
from devctl.base.units import UNKNOWN_COUNT, format_count
from devctl.tui.state import NodeView
from devctl.tui.widgets.resources import numa_list
from devctl.tui.widgets.table import Column, Row, RowSet, RowTable
from devctl.tui.widgets.text import show_text

COLUMNS = (
    Column("DEVICE", 36, min_width=12),
    Column("HEALTH", 10),
    Column("NUMA", 6),
    Column("STATE", 19),
    Column("HELD BY", 60, min_width=12),
)

_TONES = {"free": "ok", "allocated": "", "unhealthy": "bad", "unhealthy-allocated": "bad"}


def holder_text(d: DeviceRow) -> str:
    if d.allocated_to is None:
        return UNKNOWN_COUNT  # pod-resources could not be read
    return ", ".join(f"{h.namespace}/{h.pod}/{h.container}" for h in d.allocated_to) or "-"


def device_row(d: DeviceRow) -> Row:
    state = d.state or UNKNOWN_COUNT
    return Row(d.id, (d.id, d.health, numa_list(d.numa_nodes), state, holder_text(d)), _TONES.get(state, "warn"))


def device_rows(view: NodeView, resource: str | None, made: dict[DeviceRow, Row] | None = None) -> list[Row]:
    """The rows of one resource's devices; a device found in ``made`` (the last rows made) keeps its Row.

    A ListAndWatch update changes a device or two of thousands: formatting only
    those keeps a rebuild of a 10,000-device view short.
    """
    made = made if made is not None else {}
    rows = []
    for d in view.devices.get(resource or "", ()):
        row = made.get(d)
        if row is None:
            row = made[d] = device_row(d)
        rows.append(row)
    return rows


def title_text(view: NodeView, resource: str | None) -> str:
    """What the table shows, its counts (from analyze), and the keys that change it."""
    if resource is None:
        return "no resource selected: pick one in Resources (1)"
    row = next((r for r in view.resources if r.name == resource), None)
    if row is None:
        return f"{escape(resource)}: gone from the node"
    return escape(
        f"{resource} · {view.status_of(row)} · {format_count(row.capacity, row.capacity_min)} devices, "
        f"{format_count(row.allocatable)} healthy, {format_count(row.allocated)} held"
    )


class DevicesPane(Vertical):
    """One resource's devices; ``[`` and ``]`` step through the resources."""

    DEFAULT_CSS = """
    DevicesPane #devices-title { height: auto; color: $text-accent; text-style: bold; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="devices-title", markup=False)
        yield RowTable(COLUMNS, empty="this resource has no devices", id="devices-table")

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    def show(self, view: NodeView, resource: str | None, rows: RowSet | None) -> None:
        show_text(self.query_one("#devices-title", Static), title_text(view, resource))
        self.table.set_rows(rows or ())
