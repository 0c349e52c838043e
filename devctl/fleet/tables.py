"""The fleet views as tables, in the node commands' style (``devctl.render.table.grid``): ``?`` for unknown."""

from __future__ import annotations

from collections.abc import Sequence

from devctl.fleet.views import FleetDeviceRow, FleetFindingRow, FleetResourceRow
from devctl.render.style import paint
from devctl.render.table import TableStyle, grid

UNKNOWN = "?"


def _number(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def resources_table(rows: Sequence[FleetResourceRow], style: TableStyle) -> str:
    # The headers of `devctl ls` (ALLOC allocatable, USED held, BAD unhealthy): one meaning per word on a node
    # and across the fleet, and a table that fits 80 columns.
    headers = ["node", "resource", "cap", "alloc", "used", "free", "bad"]
    if style.wide:
        headers.append("kind")
    out = []
    for r in rows:
        if r.resource is None:
            row: list[object] = [r.node, None, None, None, None, None, None]
        else:
            bad = r.unhealthy is not None and r.unhealthy > 0
            row = [
                r.node,
                r.resource,
                _number(r.capacity),
                _number(r.allocatable),
                _number(r.allocated),
                _number(r.free),
                paint(_number(r.unhealthy), "red", style.color and bad),
            ]
        out.append([*row, r.kind] if style.wide else row)
    return grid(headers, out, style, cut=(0, 1))  # NODE, RESOURCE: cut in their middle to fit 80 columns


def devices_table(rows: Sequence[FleetDeviceRow], style: TableStyle) -> str:
    headers = ["node", "resource", "id", "health", "state", "numa", "allocated-to"]
    out = []
    for d in rows:
        if style.wide:
            holders = ",".join(f"{h.namespace}/{h.pod}/{h.container}" for h in d.allocated_to)
        else:
            holders = ",".join(dict.fromkeys(f"{h.namespace}/{h.pod}" for h in d.allocated_to))
        out.append([d.node, d.resource, d.id, d.health, d.state, d.numa, holders])
    return grid(headers, out, style, cut=(0, 1, 2, 6))  # never HEALTH, STATE or NUMA


_SEVERITY_COLORS = {"error": "red", "warning": "yellow"}


def findings_table(rows: Sequence[FleetFindingRow], style: TableStyle) -> str:
    out = [
        [r.node, paint(r.severity, _SEVERITY_COLORS.get(r.severity, ""), style.color), r.code, _number(r.count)]
        for r in rows
    ]
    return grid(["node", "severity", "code", "count"], out, style)
