"""The items of a watch timeline: frozen values every layer may hold.

``devctl.core.watch`` makes them from ListAndWatch streams; ``render/events``, the
TUI and the exporter show them. They live here, beside ``model.py`` and below
all of those, so that a face never has to import the watch machinery to
name what it prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from devctl.model.serial import json_field

# The ``event`` values of the CLI contract (cli.md, ``devctl watch``).
SNAPSHOT = "snapshot"
ADDED = "added"
REMOVED = "removed"
HEALTH = "health"
TOPOLOGY = "topology"
DISCONNECTED = "disconnected"
RECONNECTED = "reconnected"

# How a device without topology is written in a ``topology`` event's from/to.
NO_TOPOLOGY = "none"


@dataclass(frozen=True)
class WatchEvent:
    """One line of the timeline: exactly the fields of cli.md's ``devctl watch`` JSON.

    ``devices``/``healthy`` count the list the event came from (for
    ``disconnected``: the last list known). ``from_``/``to`` hold health
    strings for ``health`` (and the new device's health in ``to`` for
    ``added``, the old one's in ``from_`` for ``removed``), NUMA node lists such
    as ``"0,1"`` (or ``"none"``) for ``topology``. ``message`` is what a DRA
    driver says of a device in a ``health`` event, when it says anything.

    ``devctl.model.serial`` writes it as cli.md's JSON object and reads it back
    (the TUI from its ``devctl watch -o json`` child): its keys in this order,
    ``from_`` as ``from``, the keys after ``event`` only where they apply (not
    ``None``), the time to the millisecond.
    """

    time: datetime
    resource: str | None
    socket: str | None
    event: str
    device: str | None = json_field(omit_none=True)
    from_: str | None = json_field("from", omit_none=True)
    to: str | None = json_field(omit_none=True)
    devices: int | None = json_field(omit_none=True)
    healthy: int | None = json_field(omit_none=True)
    message: str | None = json_field(omit_none=True)


@dataclass(frozen=True)
class Notice:
    """A status line that is not an event of the contract: waiting, a failure reason, lists skipped.

    Faces show it apart from events (the CLI on stderr), so that ``-o json``
    stays exactly the contract's objects. The TUI's ``devctl watch`` child
    writes its notices as ``devctl.model.serial`` JSON lines on stderr instead, so
    that they come back whole (resource and socket too).
    """

    time: datetime
    message: str
    resource: str | None = None
    socket: str | None = None


@dataclass(frozen=True)
class Change:
    """One difference between two device lists; ``devctl.core.watch.diff`` returns these."""

    event: str  # ADDED | REMOVED | HEALTH | TOPOLOGY
    device: str
    from_: str | None = None
    to: str | None = None


def numa_text(nodes: Sequence[int]) -> str:
    """NUMA nodes as written in a ``topology`` event: ``"0,1"``, or ``"none"``."""
    return ",".join(str(n) for n in nodes) if nodes else NO_TOPOLOGY
