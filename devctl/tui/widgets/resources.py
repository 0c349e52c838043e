"""The resources overview: one row per extended resource, and the state of the node's own sources."""

from __future__ import annotations

import os

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from devctl.analyze.rows import WAITING
from devctl.base.escape import escape
from devctl.base.units import format_count, format_numa
from devctl.model import PluginStatus, SocketStatus
from devctl.tui.state import NodeView
from devctl.tui.widgets.edge import EdgeTable
from devctl.tui.widgets.table import Column, Row, RowSet, RowTable
from devctl.tui.widgets.text import show_text

COLUMNS = (
    Column("RESOURCE", 40, min_width=20, give=1),
    Column("STATUS", 12),
    Column("CAP"),
    Column("ALLOC"),
    Column("USED"),
    Column("FREE"),
    Column("BAD"),
    Column("NUMA", 8),
    Column("SOCK", 40, give=2),  # short, as CAP ALLOC: at 80 columns the resource name keeps the room
)

LEGEND = "CAP capacity · ALLOC allocatable (healthy) · USED held · BAD unhealthy"


def numa_list(nodes: tuple[int, ...]) -> str:
    return format_numa(nodes)


def resource_rows(view: NodeView) -> list[Row]:
    """The table rows; counts straight from devctl.analyze, status as the live stream last said."""
    rows = []
    for r in view.resources:
        status = view.status_of(r)
        if status == WAITING:  # the first read is still waiting for a socket that may serve it
            tone = "dim"
        elif status != PluginStatus.SERVING.value:  # unreachable, stale, ..., a DRA driver-missing
            tone = "bad" if status != PluginStatus.NO_PLUGIN.value else "warn"
        else:
            tone = "warn" if r.unhealthy else ""
        cells = (
            r.name,
            status,
            format_count(r.capacity, r.capacity_min),
            format_count(r.allocatable),
            format_count(r.allocated),
            format_count(r.free),
            format_count(r.unhealthy),
            numa_list(r.numa_nodes),
            os.path.basename(r.socket) if r.socket else "-",
        )
        rows.append(Row(r.name, cells, tone))
    return rows


def sources_line(view: NodeView) -> str:
    """One line on the node's own sources: the kubelet socket, pod-resources, the checkpoint."""
    snap = view.snapshot
    if not snap.kubelet_socket_present:
        kubelet = "kubelet.sock MISSING"
    elif snap.kubelet_socket_status in (None, SocketStatus.LISTENING):
        kubelet = "kubelet.sock ok"
    else:  # the kubelet leaves its socket on disk when it exits
        kubelet = f"kubelet.sock {snap.kubelet_socket_status.value.upper()}"
    pods = f"pod-resources {len(snap.pods)} pods" if snap.pods is not None else "pod-resources NOT READ"
    cp = view.checkpoint
    if cp.format is None:
        checkpoint = "checkpoint NOT READ"
    else:
        verdict = {True: "checksum ok", False: "checksum MISMATCH", None: "checksum not verified"}[cp.checksum_ok]
        checkpoint = f"checkpoint {cp.format} {len(cp.entries)} entries {verdict}"
    return f"{kubelet} · {pods} · {checkpoint}"


def errors_text(view: NodeView, limit: int = 3) -> str:
    """The sources that failed, one line each (the rest counted), or nothing."""
    if not view.errors:
        return ""
    lines = [escape(f"! {e.source}: {e.message}") for e in view.errors[:limit]]
    if len(view.errors) > limit:
        lines.append(f"! … and {len(view.errors) - limit} more (see the event log)")
    return "\n".join(lines)


class ResourcesPane(Vertical):
    """Counts, health and plugin status of each resource; Enter opens its devices."""

    DEFAULT_CSS = """
    ResourcesPane #sources { color: $text-muted; height: auto; }
    ResourcesPane #errors { color: $text-error; height: auto; }
    ResourcesPane #legend { color: $text-muted; height: auto; }
    """

    EMPTY = "no extended resources known on this node"

    def compose(self) -> ComposeResult:
        yield EdgeTable(COLUMNS, empty=self.EMPTY, id="resources-table", below="findings-table")
        yield Static("", id="errors", markup=False)
        yield Static("", id="sources", markup=False)
        yield Static(LEGEND, id="legend", markup=False)

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    def waiting(self, text: str) -> None:
        """While the first read waits, an empty table says for what, not that the node has nothing."""
        self.table.empty = text or self.EMPTY
        self.table.refresh()

    def show(self, view: NodeView, rows: RowSet) -> None:
        self.table.set_rows(rows)
        errors = errors_text(view)
        show_text(self.query_one("#errors", Static), errors)
        self.query_one("#errors", Static).display = bool(errors)
        show_text(self.query_one("#sources", Static), sources_line(view))
