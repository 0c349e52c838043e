"""Doctor's findings from the node's journal (``devctl record``): what the history says of its devices.

- ``device-unhealthy-since`` (info): a device unhealthy now, since when, and what came just before it
  ("unhealthy since 02:47:12, 0.4 s after Xid 79: GPU has fallen off the bus on 0000:3b:00.0");
- ``unhealthy-since-start`` (warning): a device unhealthy ever since its plugin (or DRA driver) last
  started, never evaluated again (a plugin that marks a GPU unhealthy on an Xid and never looks again);
- ``device-flapping`` (warning): a device whose health changed more than ``FLAP_LIMIT`` times in the hour.

Pure: the events are the journal's (``devctl.node.journal.read_journal``), in its order; ``now`` is the
snapshot's time. Without a journal there is nothing to say, and nothing is said.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from devctl.analyze.history import FLAP_WINDOW, DeviceStory, story
from devctl.analyze.inventory import devices_view
from devctl.model import Finding, NodeSnapshot, Severity
from devctl.model.history import EventSource, NodeEvent

FLAP_LIMIT = 5  # more health changes than this within FLAP_WINDOW is flapping
HEALTHY = "Healthy"
UNKNOWN = "Unknown"


def _subject(resource: str, device: str) -> str:
    return f"{resource} {device}"


def _since(told: DeviceStory, resource: str, device: str) -> Finding:
    hint = f"devctl events {device} --since 2h shows the whole story"
    if told.before is not None and told.before.source == EventSource.KERNEL:
        hint = f"the kernel spoke first: check the hardware at {told.before.pci or 'its PCI address'}; " + hint
    return Finding(Severity.INFO, "device-unhealthy-since", _subject(resource, device), f"{device}: {told.line}", hint)


def _since_start(told: DeviceStory, resource: str, device: str) -> Finding:
    started = f"{told.started:%H:%M:%S}" if told.started else "its start"
    return Finding(
        Severity.WARNING,
        "unhealthy-since-start",
        _subject(resource, device),
        f"{device} has been unhealthy since its plugin started at {started} and was never evaluated again",
        "a plugin that marks a device unhealthy once (an Xid) often never looks again: check the device "
        "(nvidia-smi -q), and if it is well, restart the plugin's pod so that it is evaluated afresh",
    )


def _flapping(told: DeviceStory, resource: str, device: str) -> Finding:
    return Finding(
        Severity.WARNING,
        "device-flapping",
        _subject(resource, device),
        f"{device} changed health {told.flips} times in the last hour",
        f"a flapping device is handed out and taken away again: devctl events {device} --since 1h; "
        "check its link and power (the kernel log's AER lines) and the plugin's health check",
    )


def _flip_candidates(events: Sequence[NodeEvent], now: datetime) -> dict[tuple[str, str], None]:
    """(resource or driver, device) of every device with a health event in the last hour, in order."""
    found: dict[tuple[str, str], None] = {}
    for e in events:
        name = e.resource or e.driver
        if e.kind == "health" and e.device and name and now - FLAP_WINDOW <= e.time <= now:
            found[(name, e.device)] = None
    return found


def history_findings(snapshot: NodeSnapshot, events: Sequence[NodeEvent], now: datetime) -> list[Finding]:
    """The findings the journal's ``events`` support about the devices of ``snapshot`` at ``now``."""
    if not events:
        return []
    out: list[Finding] = []
    told_about: set[tuple[str, str]] = set()
    for row in devices_view(snapshot):
        if row.health in (HEALTHY, UNKNOWN):
            continue
        told = story(events, row.resource, row.id, now, unhealthy=True)
        told_about.add((row.resource, row.id))
        if told.since_start:
            out.append(_since_start(told, row.resource, row.id))
        elif told.line is not None and told.unhealthy_since is not None:
            out.append(_since(told, row.resource, row.id))
        if told.flips > FLAP_LIMIT:
            out.append(_flapping(told, row.resource, row.id))
    for resource, device in _flip_candidates(events, now):
        if (resource, device) in told_about:
            continue
        told = story(events, resource, device, now)
        if told.flips > FLAP_LIMIT:
            out.append(_flapping(told, resource, device))
    return out
