"""The table of ``devctl who``: one row per process and device it holds open."""

from __future__ import annotations

from collections.abc import Sequence

from devctl.analyze.holders import DeviceKey, HolderRow
from devctl.render.table import TableStyle, grid

# crictl shows the first 13 characters of a container ID.
SHORT_ID = 13


def _allocated(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "no"


def without_nodes_lines(keys: Sequence[DeviceKey]) -> list[str]:
    """One line per resource or driver naming its devices of which no node is known."""
    by: dict[str, list[str]] = {}
    for _, resource, device in keys:
        by.setdefault(resource, []).append(device)
    return [
        f"{resource}: no device node known for {', '.join(devices)} (no container was given "
        f"{'it' if len(devices) == 1 else 'them'}, and no Allocate reply or CDI spec names one)"
        for resource, devices in by.items()
    ]


def holders_table(rows: Sequence[HolderRow], style: TableStyle) -> str:
    headers = ["resource", "device", "path", "pid", "command", "pod", "container", "allocated"]
    if style.wide:
        headers.insert(7, "container-id")
    out = []
    for r in rows:
        command = r.command if style.wide or len(r.command) <= 40 else r.command[:39] + "…"
        pod = f"{r.pod.namespace}/{r.pod.name}" if r.pod else None
        row: list[object] = [r.resource, r.device, r.path, r.pid, command, pod, r.container]
        if style.wide:
            row.append(r.container_id)
        elif r.container is None and r.container_id:
            row[6] = r.container_id[:SHORT_ID]
        row.append(_allocated(r.allocated))
        out.append(row)
    return grid(headers, out, style)
