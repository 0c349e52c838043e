"""Watch events as lines: a table for people, JSON lines for scripts.

A watch prints as events happen, so a table cannot be laid out after the
fact (tabulate needs every row), and a column that widened for a long value
would push every column after it. So every column but the last has a fixed
width that fits 80 columns: TIME, EVENT, CHANGE (a longer change is cut with
``…``), then OBJECT, the resource or driver and, for a per-device event, the
device as ``<resource>/<device>`` (doctor's spelling), whatever its length.
A snapshot's device counts are its change. Every cell is escaped
(devctl.base.escape): a device ID or health string from a plugin is one cell of
one line. JSON lines keep every field whole and escape every non-ASCII
character themselves; ``devctl.model.serial`` writes them (the TUI reads them back
with it), from the fields of ``WatchEvent`` as they declare their keys.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from devctl.base.escape import escape
from devctl.core.events import WatchEvent
from devctl.model import serial
from devctl.model.serial import iso_time
from devctl.model.udev import KernelEvent
from devctl.render.grid import GAP  # between columns, as kubectl and devctl's other tables print them
from devctl.render.style import NONE

__all__ = ["COLUMNS", "EventTable", "clock_time", "event_object", "iso_time", "json_line"]

# (header, width); the last column is not padded. CHANGE holds the longest health change, Unhealthy→Healthy.
COLUMNS = (("TIME", 12), ("EVENT", 12), ("CHANGE", 17), ("OBJECT", 0))


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
    applies, but is not known). A watch event's object is its plain form
    (``devctl.model.serial``; the fields declare their keys). A kernel event
    (``--udev``, an extension, never read back) is a view of its own: ``time``,
    ``event`` and ``device`` (the kernel's device name), plus ``subsystem``,
    ``devpath`` and ``driver`` (``null`` when none is bound).
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
    obj: dict[str, Any] = serial.to_plain(item)
    return obj


def json_line(item: WatchEvent | KernelEvent) -> str:
    """One event as one line of JSON (no newline), as ``devctl.model.serial`` writes it and reads it back."""
    return serial.json_line(item if isinstance(item, WatchEvent) else event_object(item))


class EventTable:
    """One watch's table: its header, then a row per event, in columns of fixed widths (see the module)."""

    def header(self) -> str:
        return _row(tuple(name for name, _ in COLUMNS))

    def line(self, item: WatchEvent | KernelEvent) -> str:
        """One event as a table row: time, event, change (or counts), what it is about; ``<none>`` where empty."""
        return _row(tuple(escape(cell) or NONE for cell in _cells(item)))


def _row(cells: tuple[str, ...]) -> str:
    parts = [_fit(cell, width).ljust(width) for cell, (_, width) in zip(cells[:-1], COLUMNS[:-1], strict=True)]
    return GAP.join([*parts, cells[-1]]).rstrip()


def _fit(cell: str, width: int) -> str:
    """``cell`` cut to ``width`` with a trailing ``…``, so that it never pushes the next column."""
    return cell if len(cell) <= width else cell[: width - 1] + "…"


def _change(item: WatchEvent) -> str:
    if item.from_ is not None and item.to is not None:
        return f"{item.from_}→{item.to}"
    if item.to is not None:
        return item.to
    if item.from_ is not None:
        return item.from_
    if item.devices is not None:  # snapshot, disconnected, reconnected: the list's counts
        return f"{item.devices} devices" if item.healthy is None else f"{item.healthy}/{item.devices} healthy"
    return ""


def _cells(item: WatchEvent | KernelEvent) -> tuple[str, str, str, str]:
    if isinstance(item, KernelEvent):
        driver = f"driver {item.driver}" if item.driver else ""
        return (clock_time(item.time), item.event, driver, f"{item.subsystem}/{item.name}")
    # A socket whose resource no source names is shown by its socket file.
    resource = item.resource or (f"({item.socket.rsplit('/', 1)[-1]})" if item.socket else "")
    what = f"{resource}/{item.device}" if item.device else resource
    if item.message:  # a DRA driver's word on the device, after what it is about
        what += f" ({item.message})"
    return (clock_time(item.time), item.event, _change(item), what)
