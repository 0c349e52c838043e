"""Pods and their containers: devices, exclusive CPUs, memory, DRA claims and NUMA alignment."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from devctl.analyze import AlignmentRow
from devctl.base.units import format_bytes, format_cpulist
from devctl.model import ContainerResources
from devctl.tui.state import NodeView, container_key
from devctl.tui.widgets.table import Column, Row, RowSet, RowTable

COLUMNS = (
    Column("POD", 36, min_width=20),
    Column("CONTAINER", 20, min_width=10),
    Column("NUMA", 14, min_width=10),
    Column("CPUS", 16, min_width=5),
    Column("MEMORY", 12, min_width=5),
    Column("DEVICES", 60, min_width=10),
    Column("CLAIMS", 30, min_width=6),
)


def short(resource: str) -> str:
    """``nvidia.com/gpu`` -> ``gpu``: the table is narrow; the detail view names resources in full."""
    return resource.rsplit("/", 1)[-1]


def devices_text(c: ContainerResources) -> str:
    return " ".join(f"{short(d.resource)}={','.join(d.ids)}" for d in c.devices) or "-"


def memory_text(c: ContainerResources) -> str:
    """Memory the memory manager pinned; ``+hp`` when hugepages come too (the detail view lists each)."""
    plain = sum(m.size for m in c.memory if m.type == "memory")
    huge = any(m.type != "memory" for m in c.memory)
    if not c.memory:
        return "-"
    return (format_bytes(plain) if plain else "") + ("+hp" if huge else "")


def claims_text(c: ContainerResources) -> str:
    return ", ".join(r.claim_name for r in c.dynamic_resources) or "-"


def alignment_text(a: AlignmentRow | None) -> str:
    """``aligned 0``, ``MISALIGNED`` (spelled out, so it reads without colour) or ``-``."""
    if a is None or a.aligned is None:
        return "-"
    nodes = sorted(set(a.device_numa) | set(a.cpu_numa) | set(a.memory_numa))
    return f"aligned {','.join(str(n) for n in nodes)}" if a.aligned else "MISALIGNED"


def pod_rows(view: NodeView) -> list[Row]:
    rows = []
    for pod in view.pods:
        for c in pod.containers:
            key = container_key(pod.namespace, pod.name, c.name)
            align = view.alignment.get(key)
            cells = (
                f"{pod.namespace}/{pod.name}",
                c.name,
                alignment_text(align),
                format_cpulist(c.cpu_ids) or "-",
                memory_text(c),
                devices_text(c),
                claims_text(c),
            )
            tone = "bad" if align is not None and align.aligned is False else ""
            rows.append(Row(key, cells, tone))
    return rows


class PodsPane(Vertical):
    """One row per container holding anything; Enter shows what it was really given."""

    DEFAULT_CSS = "PodsPane #pods-title { height: auto; color: $text-muted; }"

    def compose(self) -> ComposeResult:
        yield RowTable(COLUMNS, empty="no pods listed by pod-resources", id="pods-table")
        yield Static("Enter: what the container was given (checkpoint allocation)", id="pods-title", markup=False)

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    def show(self, view: NodeView, rows: RowSet) -> None:
        self.table.set_rows(rows)
