"""Watch events as lines: a table for people, JSON lines for scripts.

A watch prints as events happen, so a table cannot be laid out after the
fact (tabulate needs every row): columns start at minimum widths (the
resource column as wide as the resources named up front), and a longer value
widens its column for good, so the lines after it line up again. Every cell is
escaped (devctl.escape): a device ID or health string from a plugin is one cell
of one line. JSON lines escape every non-ASCII character themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from devctl.escape import escape
from devctl.events import WatchEvent
from devctl.node.udev import KernelEvent
from devctl.render.style import NONE

# (header, minimum width); the last column is not padded.
COLUMNS = (("TIME", 12), ("EVENT", 12), ("RESOURCE", 24), ("DEVICE", 18), ("CHANGE", 24), ("DEVICES", 0))
_RESOURCE = 2  # the index of RESOURCE in COLUMNS
# Between columns, as kubectl and devctl's other tables print them.
_GAP = "   "


def iso_time(t: datetime) -> str:
    """UTC with milliseconds, as cli.md writes it: ``2026-01-02T03:04:05.678Z``."""
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def clock_time(t: datetime) -> str:
    """UTC ``HH:MM:SS.mmm``, the time column of the table."""
    t = t.astimezone(timezone.utc)
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def event_object(item: WatchEvent | KernelEvent) -> dict[str, Any]:
    """The JSON object of one event: cli.md's keys, in its order, those that apply.

    A key that does not apply to the event is absent, as cli.md says of
    ``device`` in a ``snapshot``: ``device`` names a device only in
    per-device events, ``from``/``to`` appear where the event has them.
    ``resource`` is ``null`` when no source names the socket's resource (it
    applies, but is not known). A kernel event (``--udev``, an extension) has
    ``time``, ``event`` and ``device`` (the kernel's device name), plus
    ``subsystem``, ``devpath`` and ``driver`` (``null`` when none is bound).
    """
    if isinstance(item, KernelEvent):
        return {
            "time": iso_time(item.time),
            "event": item.event,
            "device": item.name,
            "subsystem": item.subsystem,
            "devpath": item.devpath,
            "driver": item.driver,
        }
    obj: dict[str, Any] = {
        "time": iso_time(item.time),
        "resource": item.resource,
        "socket": item.socket,
        "event": item.event,
    }
    for key, value in (
        ("device", item.device),
        ("from", item.from_),
        ("to", item.to),
        ("devices", item.devices),
        ("healthy", item.healthy),
        ("message", item.message),
    ):
        if value is not None:
            obj[key] = value
    return obj


def json_line(item: WatchEvent | KernelEvent) -> str:
    """One event as one line of JSON (no newline)."""
    return json.dumps(event_object(item))


class EventTable:
    """One watch's table: its header, then a row per event, columns widening as values need.

    Widths only grow, so a long resource name or device ID misaligns at most
    the lines printed before it.
    """

    def __init__(self, resources: Iterable[str] = ()) -> None:
        self._widths = [width for _, width in COLUMNS[:-1]]
        self._widths[_RESOURCE] = max([self._widths[_RESOURCE], *(len(escape(r)) for r in resources)])

    def header(self) -> str:
        return self._row(tuple(name for name, _ in COLUMNS))

    def line(self, item: WatchEvent | KernelEvent) -> str:
        """One event as a table row: time, event, resource, device, from→to, counts; ``<none>`` where empty."""
        return self._row(tuple(escape(cell) or NONE for cell in _cells(item)))

    def _row(self, cells: tuple[str, ...]) -> str:
        padded = cells[:-1]  # the last column is not padded
        self._widths = [max(width, len(cell)) for width, cell in zip(self._widths, padded, strict=True)]
        parts = [cell.ljust(width) for cell, width in zip(padded, self._widths, strict=True)]
        return _GAP.join([*parts, cells[-1]]).rstrip()


def _change(item: WatchEvent) -> str:
    if item.from_ is not None and item.to is not None:
        return f"{item.from_}→{item.to}"
    if item.to is not None:
        return item.to
    return item.from_ or ""


def _cells(item: WatchEvent | KernelEvent) -> tuple[str, ...]:
    if isinstance(item, KernelEvent):
        driver = f"driver {item.driver}" if item.driver else ""
        return (clock_time(item.time), item.event, item.subsystem, item.name, driver, "")
    # A socket whose resource no source names is shown by its socket file.
    resource = item.resource or (f"({item.socket.rsplit('/', 1)[-1]})" if item.socket else "")
    total = "" if item.devices is None else f"{item.devices} ({item.healthy} healthy)"
    return (clock_time(item.time), item.event, resource, item.device or "", _change(item), total)
