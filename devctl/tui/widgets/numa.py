"""The NUMA map: each node's CPUs, memory and devices, who holds them, and containers split across nodes.

Every mark is a distinct character as well as a colour, so the map reads the
same under NO_COLOR and on a monochrome terminal.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from devctl.analyze import AlignmentRow, DeviceCount, NumaRow
from devctl.base.escape import escape
from devctl.base.units import format_bytes, format_count, format_cpulist
from devctl.tui.state import NodeView

EXCLUSIVE, SHARED, RESERVED = "█", "▒", "·"
HELD, FREE, UNHEALTHY = "■", "□", "✗"
BAR_MAX = 48  # marks per bar; longer bars are cut and counted

LEGEND = (
    f"CPUs: {EXCLUSIVE} exclusive  {SHARED} shared pool  {RESERVED} not allocatable\n"
    f"devices: {HELD} held  {FREE} free  {UNHEALTHY} unhealthy"
)
LABEL_MAX = 22  # resource names longer than this are cut, so that a line fits 80 columns

_STYLES = {
    EXCLUSIVE: "bold yellow",
    SHARED: "green",
    RESERVED: "dim",
    HELD: "bold yellow",
    FREE: "green",
    UNHEALTHY: "bold red",
}


def _bar(marks: list[str]) -> Text:
    text = Text()
    for mark in marks[:BAR_MAX]:
        text.append(mark, _STYLES[mark])
    if len(marks) > BAR_MAX:
        text.append("…", "dim")
    return text


def cpu_bar(node: NumaRow) -> Text:
    exclusive, allocatable = set(node.exclusive_cpus), set(node.allocatable_cpus)
    marks = [EXCLUSIVE if c in exclusive else SHARED if c in allocatable else RESERVED for c in node.cpus]
    return _bar(marks)


def device_bar(count: DeviceCount, held_unhealthy: int = 0) -> Text:
    """Held, free, unhealthy marks; a held device that went unhealthy is an unhealthy mark among the held."""
    if count.total is None or count.allocated is None or count.free is None:
        return Text("?", "dim")  # a count that depends on a source that failed
    unhealthy = max(count.total - count.allocated - count.free, 0)
    sick = min(held_unhealthy, count.allocated)
    return _bar([HELD] * (count.allocated - sick) + [UNHEALTHY] * sick + [FREE] * count.free + [UNHEALTHY] * unhealthy)


def _counts(count: DeviceCount, held_unhealthy: int = 0) -> str:
    """``4 held, 0 free, 1 unhealthy (held)``: every unhealthy device counts, held or not (as ls's BAD)."""
    if count.total is None or count.allocated is None or count.free is None:
        total = format_count(count.total, count.total_min)
        return f"{total} devices, {format_count(count.allocated)} held, {format_count(count.free)} free"
    sick = min(held_unhealthy, count.allocated)
    unhealthy = max(count.total - count.allocated - count.free, 0) + sick
    held = "" if not sick else " (held)" if sick == unhealthy else f" ({sick} held)"
    return f"{count.allocated} held, {count.free} free, {unhealthy} unhealthy{held}"


def held_unhealthy(view: NodeView) -> dict[tuple[int | None, str], int]:
    """How many held devices are unhealthy, by NUMA node (None: no topology) and resource."""
    found: dict[tuple[int | None, str], int] = {}
    for resource, rows in view.devices.items():
        for d in rows:
            if d.state == "unhealthy-allocated":
                for node in d.numa_nodes or (None,):
                    found[(node, resource)] = found.get((node, resource), 0) + 1
    return found


def _nodes_text(a: AlignmentRow) -> str:
    parts = []
    for label, nodes in (("devices", a.device_numa), ("CPUs", a.cpu_numa), ("memory", a.memory_numa)):
        if nodes:
            parts.append(f"{label} on {','.join(str(n) for n in nodes)}")
    return ", ".join(parts)


def numa_text(view: NodeView) -> Text:
    """The whole map as one rich Text (not markup), every name from the node escaped."""
    topo = view.topology
    out = Text()
    if not topo.numa_nodes:
        out.append("no NUMA information: sysfs was not read and no device names a NUMA node\n", "dim")
    holders_by_node: dict[int, list[str]] = {}
    for a in topo.alignment:
        for n in sorted(set(a.device_numa) | set(a.cpu_numa) | set(a.memory_numa)):
            holders_by_node.setdefault(n, []).append(escape(f"{a.namespace}/{a.pod}/{a.container}"))
    width = min(max((len(escape(name)) for n in topo.numa_nodes for name in n.devices), default=10), LABEL_MAX)
    sick = held_unhealthy(view)
    for node in topo.numa_nodes:
        if node.id is None:
            out.append("no NUMA node", "bold")
            out.append("  devices without topology\n", "dim")
        else:
            out.append(f"NUMA {node.id}", "bold reverse")
            memory = f"  memory {format_bytes(node.memory_bytes)}" if node.memory_bytes else ""
            out.append(f"  CPUs {format_cpulist(node.cpus) or '-'}{memory}\n")
        if node.cpus:
            out.append("  cpus ".ljust(width + 4))
            out.append_text(cpu_bar(node))
            out.append(
                f"  {len(node.exclusive_cpus)} exclusive, {len(node.shared_cpus)} shared,"
                f" {len(node.cpus) - len(node.allocatable_cpus)} reserved\n"
            )
        for resource, count in node.devices.items():
            name = escape(resource)
            label = name if len(name) <= width else name[: width - 1] + "…"
            out.append(f"  {label}".ljust(width + 4))
            bad = sick.get((node.id, resource), 0)
            out.append_text(device_bar(count, bad))
            out.append(f"  {_counts(count, bad)}\n")
        held = holders_by_node.get(node.id) if node.id is not None else None
        if held:
            out.append("  used by " + ", ".join(held) + "\n", "dim")
        out.append("\n")
    misaligned = [a for a in topo.alignment if a.aligned is False]
    if misaligned:
        out.append("MISALIGNED containers (devices, CPUs and memory not on one NUMA node):\n", "bold red")
        for a in misaligned:
            out.append(f"  {UNHEALTHY} {escape(f'{a.namespace}/{a.pod}/{a.container}')}", "bold red")
            out.append(f"  {_nodes_text(a)}\n")
    elif topo.alignment:
        out.append(
            f"all {len(topo.alignment)} containers with devices, exclusive CPUs or memory are aligned\n", "green"
        )
    out.append(LEGEND, "dim")
    return out


class NumaPane(VerticalScroll):
    """The map, scrollable when a node has more than fits."""

    DEFAULT_CSS = "NumaPane { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("", id="numa-map", markup=False)

    def show(self, view: NodeView) -> None:
        self.query_one("#numa-map", Static).update(numa_text(view))
