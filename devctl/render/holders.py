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
    """DEVICE PID COMMAND POD CONTAINER ALLOCATED, one row per process and device, which fits 80 columns;
    ``wide`` adds the resource, each device node held open (a row per node) and the container ID."""
    headers = ["device", "pid", "command", "pod", "container", "allocated"]
    if style.wide:
        headers = ["resource", "device", "path", "pid", "command", "pod", "container", "container-id", "allocated"]
    out: dict[tuple[object, ...], None] = {}  # the narrow rows of one process's nodes of a device are one row
    for r in rows:
        command = r.command if style.wide or len(r.command) <= 40 else r.command[:39] + "…"
        pod = f"{r.pod.namespace}/{r.pod.name}" if r.pod else None
        container = r.container if r.container is not None or style.wide else (r.container_id or "")[:SHORT_ID]
        if style.wide:
            row: tuple[object, ...] = (r.resource, r.device, r.path, r.pid, command, pod, container, r.container_id)
        else:
            row = (r.device, r.pid, command, pod, container)
        key = (*row, _allocated(r.allocated))
        out[key] = None
    return grid(headers, list(out), style, cut=(0, 2, 3, 4))  # DEVICE, COMMAND, POD, CONTAINER
