"""The node's history: one event of the journal (``devctl record`` writes them, ``devctl events`` reads them).

``NodeEvent`` holds exactly the keys of cli.md's ``events[]`` (``devctl events -o json``) plus ``count``
(a flapping source's repeats coalesced into one event by the recorder; 1 normally) and ``driver`` (a DRA
driver's name, left out when ``None``). ``devctl.model.serial`` writes it and reads it back, in the journal
(``devctl.node.journal``) as on the command line. Unknown is ``None`` (a kernel line naming a PCI address
devctl cannot join to a device has ``device=None``), never an empty string or 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from devctl.base.errors import Word
from devctl.model import SourceError
from devctl.model.serial import json_field


class EventSource(Word):
    """Where a node event came from: cli.md's ``source`` values."""

    PLUGIN = "plugin"  # added, removed, health, topology
    DRA = "dra"  # health, prepared, unprepared
    KUBELET = "kubelet"  # registered, restarted, allocated, freed
    KERNEL = "kernel"  # xid, aer, fallen-off-bus, and other lines naming a device's PCI address
    UDEV = "udev"


@dataclass(frozen=True)
class Holder:
    """A container that held the device when the event happened (``container`` unknown: ``None``)."""

    namespace: str
    pod: str
    container: str | None = None


@dataclass(frozen=True)
class NodeEvent:
    """One event of the node's history, as ``devctl events`` shows it and the journal keeps it.

    ``time`` is UTC, as stamped when the event was seen (a clock that went backwards is kept as it
    said: the journal orders by its own sequence, not by time); serial writes it to the millisecond.
    ``kind`` is the contract's word within its source (``health``, ``xid``, ``allocated``...),
    ``what`` the one line a person reads (``Xid 79: GPU has fallen off the bus``).
    """

    time: datetime
    source: EventSource
    kind: str
    resource: str | None = None
    device: str | None = None
    pci: str | None = None
    holders: tuple[Holder, ...] = ()
    what: str = ""
    count: int = 1
    driver: str | None = json_field(omit_none=True)
    health: str | None = json_field(omit_none=True)  # a health event's new health (``Healthy``...), for the faces
    # False: who held the device at ``time`` could not be established (a live kernel line older than every pod
    # that holds it now: a pod gone since may have held it), so no holder is not "free"; None: as joined.
    holders_known: bool | None = json_field(omit_none=True)


@dataclass(frozen=True)
class JournalRead:
    """What ``devctl.node.journal.read_journal`` found in a journal file.

    ``events`` are the records kept within the time asked for, in the order they were written
    (sequence order). ``records`` counts every record the file still holds (whatever the
    time filter), ``dropped`` the oldest records the bound pushed out (``None``: unknown, a damaged
    header), ``written`` every record ever appended. ``first_time`` is the oldest record's time:
    the journal's history starts there. ``notices`` are one line each (a torn tail, a corrupt
    record skipped); ``error`` is set when the file could not be read at all (missing, not a
    journal, a newer format), and then there is nothing else.
    """

    path: str
    events: tuple[NodeEvent, ...] = ()
    first_time: datetime | None = None
    records: int = 0
    dropped: int | None = 0
    written: int | None = 0
    notices: tuple[str, ...] = ()
    error: SourceError | None = None
