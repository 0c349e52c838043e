"""``devctl events``' table: TIME SOURCE KIND DEVICE/PCI HOLDER WHAT, 80 columns by default.

HOLDER is the pod that held the device (``ns/pod``, ``+N`` when more pods did); WHAT takes the rest of the
line and wraps under itself rather than being cut. ``-o wide`` keeps each cell whole on one line, with
every holder's container (HOLDERS, last).

Every cell came from outside devctl (a plugin, the kernel, the journal): ``grid`` escapes each one, and
WHAT, laid out here, passes ``escape`` before it is wrapped.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from devctl.base.escape import escape
from devctl.model.history import NodeEvent
from devctl.render.grid import GAP, WIDTH, TableStyle, grid

HEADERS = ("time", "source", "kind", "device/pci", "holder", "what")
WIDE_HEADERS = ("time", "source", "kind", "device/pci", "what", "holders")
_CUT = (3, 4)  # the device and the holder may be cut in their middle to fit; WHAT wraps, never cut
MIN_ROOM = 24  # less room than this left of the line: WHAT goes on the lines below, under SOURCE
_SLOT = "~"  # WHAT's place while the grid lays out (and cuts to fit) the other columns
_INDENT = len("12-03 14:38:56") + len(GAP)


def _device(event: NodeEvent, pool: bool = True) -> str:
    """The device and its PCI address; without ``pool`` a DRA device's pool is left out (``gpu-3``, not
    ``node-a/gpu-3``): what a narrow table cuts first, since the device and the address are what tell it."""
    device = event.device if pool or not event.device else event.device.rpartition("/")[2]
    if device and event.pci and event.device != event.pci:
        return f"{device} ({event.pci})"
    return device or event.pci or event.driver or event.resource or ""


def _what(event: NodeEvent) -> str:
    return event.what if event.count == 1 else f"{event.what} (x{event.count})"


def _holders(event: NodeEvent) -> str:
    if event.holders_known is False:
        return "?"
    return ",".join(f"{h.namespace}/{h.pod}" + (f"/{h.container}" if h.container else "") for h in event.holders)


def holder_cell(event: NodeEvent) -> str:
    """The first pod that held the device (``ns/pod``) and ``+N`` for the other pods; '' when none did."""
    pods = list(dict.fromkeys(f"{h.namespace}/{h.pod}" for h in event.holders))
    if not pods:
        return "?" if event.holders_known is False else ""
    return pods[0] + (f" +{len(pods) - 1}" if len(pods) > 1 else "")


def _when(event: NodeEvent, wide: bool) -> str:
    if wide:
        return event.time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return event.time.strftime("%m-%d %H:%M:%S")


def row(event: NodeEvent, wide: bool) -> list[object]:
    """One event's cells: its UTC time (``MM-DD HH:MM:SS``; with ``wide`` the whole ISO time)."""
    if wide:
        return [_when(event, True), str(event.source), event.kind, _device(event), _what(event), _holders(event) or "-"]
    return [_when(event, False), str(event.source), event.kind, _device(event), holder_cell(event), _what(event)]


def _wrapped(lines: list[str], whats: list[str]) -> str:
    """Each grid line with WHAT's slot replaced by its text, wrapped in the room left (under itself); when the
    other columns leave less than MIN_ROOM, WHAT goes on the lines below, under SOURCE."""
    out: list[str] = []
    for line, what in zip(lines, whats, strict=True):
        prefix = line[: len(line) - len(_SLOT)] if line.endswith(_SLOT) else line + GAP
        room = WIDTH - len(prefix)
        if room < MIN_ROOM:
            out.append(prefix.rstrip())
            prefix, room = " " * _INDENT, WIDTH - _INDENT
            parts = textwrap.wrap(what, room, break_on_hyphens=False) or [""]
        else:
            parts = textwrap.wrap(what, room, break_on_hyphens=False) or [""]
            out.append((prefix + parts.pop(0)).rstrip())
        out.extend((" " * len(prefix) + part).rstrip() for part in parts)
    return "\n".join(out) + "\n"


def _uncut(rows: list[list[object]], headers: bool) -> int:
    """How wide the columns before WHAT are with every value whole, and the gap after them."""
    widths = [max(len(escape(str(cell))) for cell in column) for column in zip(*(r[:-1] for r in rows), strict=True)]
    if headers:
        widths = [max(w, len(h)) for w, h in zip(widths, HEADERS, strict=False)]
    return sum(widths) + len(GAP) * len(widths)


def _below(events: list[NodeEvent], rows: list[list[object]], whats: list[str], style: TableStyle) -> str:
    """Every WHAT on the lines under its row (under SOURCE, its header too): the other columns then have the whole
    width, so a device or a holder is cut only when it does not fit even so (a DRA device's pool left out first)."""
    others = (0, 1, 2, 4)  # TIME SOURCE KIND and HOLDER: what DEVICE/PCI shares the line with
    widths = [max(len(escape(str(r[i]))) for r in rows) for i in others]
    if style.headers:
        widths = [max(w, len(HEADERS[i])) for w, i in zip(widths, others, strict=True)]
    room = WIDTH - sum(widths) - len(GAP) * len(others)
    for event, r in zip(events, rows, strict=True):
        if len(escape(str(r[3]))) > room:
            r[3] = _device(event, pool=False)
    lines = grid(HEADERS[:-1], (r[:-1] for r in rows), style, cut=_CUT).rstrip("\n").split("\n")
    out = []
    if style.headers:  # WHAT's header where its lines go: under SOURCE
        out += [lines.pop(0).rstrip(), " " * _INDENT + HEADERS[-1].upper()]
    for line, what in zip(lines, whats, strict=True):
        out.append(line.rstrip())
        out.extend(" " * _INDENT + part for part in textwrap.wrap(what, WIDTH - _INDENT, break_on_hyphens=False))
    return "\n".join(out) + "\n"


def events_table(events: Iterable[NodeEvent], style: TableStyle) -> str:
    """The events as a table ('' when there are none); within WIDTH columns unless ``wide``."""
    events = list(events)
    if style.wide:
        return grid(WIDE_HEADERS, (row(e, True) for e in events), style)
    if not events:
        return ""
    rows = [row(e, False) for e in events]
    whats = [escape(str(r[-1])) for r in rows]
    if _uncut(rows, style.headers) + MIN_ROOM > WIDTH:
        return _below(events, rows, whats, style)
    lines = grid(HEADERS, ([*r[:-1], _SLOT] for r in rows), style, cut=_CUT).rstrip("\n").split("\n")
    head = [lines.pop(0)] if style.headers else []
    return "".join(h + "\n" for h in head) + _wrapped(lines, whats)


def event_line(event: NodeEvent, style: TableStyle) -> str:
    """One event as a table line without header (``events -w``), through the same grid."""
    return grid((), [row(event, style.wide)], TableStyle(wide=True, headers=False, color=style.color)).rstrip("\n")
