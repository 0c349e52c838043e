"""Tables for people, the way kubectl and crictl print them.

Upper-case headers, left-aligned columns, ``<none>`` for an empty cell, ``wide``
for more columns, no headers on request. Every function returns the text to
print (ending in a newline, or empty when there are no rows): printing and the
"No resources found." notice are the caller's.

Every cell passes ``devctl.base.escape.escape`` in ``grid`` (a coloured word has
been escaped by ``paint``), and so does every string from the node in the lines
around a table: a device ID cannot add a row or drive the terminal.

Here ``ls`` and ``devices``; the writer itself is ``grid`` (devctl.render.grid), the other views' tables are
in table_pods, table_node and table_findings, and every name is importable from here as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from devctl.analyze import CAPACITY_NOTE
from devctl.base.escape import escape
from devctl.base.units import UNKNOWN_COUNT, format_count
from devctl.model import SourceError
from devctl.render.grid import (
    ELLIPSIS,
    MIN_CUT,
    WIDTH,
    TableStyle,
    cut_middle,
    cut_path,
    grid,
    numa_cell,
    options_cells,
    short_name,
    some,
)
from devctl.render.style import paint, word
from devctl.render.table_findings import findings_table
from devctl.render.table_node import checkpoint_table, plugins_table, topology_table
from devctl.render.table_pods import Health, healthy_of, pods_table

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    from devctl.analyze import DeviceRow, ResourceRow


def names(items: Iterable[str]) -> str:
    """``-q``: one name per line (escaped: a newline in a name must not make two)."""
    return "".join(f"{escape(n)}\n" for n in items)


def warnings(errors: Iterable[SourceError], color: bool = False) -> str:
    """Source errors as ``warning: <source>: <message>`` lines, for stderr."""
    return "".join(f"{paint('warning', 'yellow', color)}: {escape(e.source)}: {escape(e.message)}\n" for e in errors)


# ls's counts under the TUI's short headers, so that the table fits 80 columns:
# CAP capacity, ALLOC allocatable (healthy), USED allocated (held), FREE, BAD unhealthy.
RESOURCE_COUNTS = ["cap", "alloc", "used", "free", "bad"]


def resources_table(rows: Sequence[ResourceRow], style: TableStyle) -> str:
    headers = ["name", "status", *RESOURCE_COUNTS]
    if style.wide:
        headers += ["numa", "pre-start", "preferred", "socket"]
    out = []
    for r in rows:
        row: list[object] = [
            r.name,
            word(r.status, style.color),
            format_count(r.capacity, r.capacity_min),
            format_count(r.allocatable),
            format_count(r.allocated),
            format_count(r.free),
            paint(format_count(r.unhealthy), "red", style.color and bool(r.unhealthy)),
        ]
        if style.wide:
            row += [numa_cell(r.numa_nodes), *options_cells(r.options), r.socket]
        out.append(row)
    text = grid(headers, out, style)
    if text and style.headers and any(r.capacity is None and r.capacity_min for r in rows):
        text += f"\n{CAPACITY_NOTE}\n"
    return text


def devices_table(
    rows: Sequence[DeviceRow],
    style: TableStyle,
    procs: dict[tuple[str, str], int] | None = None,
    procs_asked: bool = False,
) -> str:
    """RESOURCE ID HEALTH NUMA ALLOCATED-TO, which fits 80 columns; ``wide`` adds the state, the PCI function
    (address, vendor, model, bound driver) and, when ``procs_asked``, PROCS: processes holding each device open
    (``?`` when ``procs`` is None, or does not count the device: none of its nodes is known).

    The state is the health and the holders in one word, so the narrow table leaves it to ``wide``.
    """
    with_procs = style.wide and procs_asked
    headers = ["resource", "id", "health", "numa", "allocated-to"]
    if style.wide:
        headers += ["state", "pci", "vendor", "model", "driver"] + (["procs"] if with_procs else [])
    out = []
    for d in rows:
        if d.allocated_to is None:
            holders = UNKNOWN_COUNT  # pod-resources could not be read: who holds it is unknown
        elif style.wide:
            holders = ",".join(f"{h.namespace}/{h.pod}/{h.container}" for h in d.allocated_to)
        else:
            holders = ",".join(dict.fromkeys(f"{h.namespace}/{h.pod}" for h in d.allocated_to))
        row: list[object] = [d.resource, d.id, word(d.health, style.color), numa_cell(d.numa_nodes), holders]
        if style.wide:
            pci = d.pci
            row += [word(d.state or UNKNOWN_COUNT, style.color)]
            if pci is None:
                row += ["", "", "", ""]
            else:
                row += [pci.address, pci.vendor or pci.vendor_id, pci.device or pci.device_id, pci.driver]
            if with_procs:
                row.append(UNKNOWN_COUNT if procs is None else procs.get((d.resource, d.id), UNKNOWN_COUNT))
        out.append(row)
    return grid(headers, out, style, cut=(0, 1, 4))  # RESOURCE, ID, ALLOCATED-TO; never HEALTH or NUMA


__all__ = [
    "ELLIPSIS",
    "MIN_CUT",
    "RESOURCE_COUNTS",
    "WIDTH",
    "Health",
    "TableStyle",
    "checkpoint_table",
    "cut_middle",
    "cut_path",
    "devices_table",
    "findings_table",
    "grid",
    "healthy_of",
    "names",
    "plugins_table",
    "pods_table",
    "resources_table",
    "short_name",
    "some",
    "topology_table",
    "warnings",
]
