"""``devctl events``' table: TIME SOURCE KIND DEVICE/PCI WHAT (and HOLDERS with ``-o wide``), 80 columns by default.

Every cell came from outside devctl (a plugin, the kernel, the journal): ``grid`` escapes each one.
"""

from __future__ import annotations

from collections.abc import Iterable

from devctl.model.history import NodeEvent
from devctl.render.table import TableStyle, grid

HEADERS = ("time", "source", "kind", "device/pci", "what")
_CUT = (3, 4)  # the device and the words may be cut in their middle to fit; -o wide keeps them whole


def _device(event: NodeEvent) -> str:
    if event.device and event.pci and event.device != event.pci:
        return f"{event.device} ({event.pci})"
    return event.device or event.pci or event.driver or event.resource or ""


def _what(event: NodeEvent) -> str:
    return event.what if event.count == 1 else f"{event.what} (x{event.count})"


def _holders(event: NodeEvent) -> str:
    return ",".join(f"{h.namespace}/{h.pod}" + (f"/{h.container}" if h.container else "") for h in event.holders)


def row(event: NodeEvent, wide: bool) -> list[object]:
    """One event's cells: its UTC time (``MM-DD HH:MM:SS``; with ``wide`` the whole ISO time)."""
    when = event.time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if wide else event.time.strftime("%m-%d %H:%M:%S")
    cells: list[object] = [when, str(event.source), event.kind, _device(event), _what(event)]
    if wide:
        cells.append(_holders(event) or "-")
    return cells


def events_table(events: Iterable[NodeEvent], style: TableStyle) -> str:
    """The events as a table ('' when there are none)."""
    headers = (*HEADERS, "holders") if style.wide else HEADERS
    return grid(headers, (row(e, style.wide) for e in events), style, cut=_CUT)


def event_line(event: NodeEvent, style: TableStyle) -> str:
    """One event as a table line without header (``events -w``), through the same grid."""
    return grid((), [row(event, style.wide)], TableStyle(wide=True, headers=False, color=style.color)).rstrip("\n")
