"""``devctl why``'s history: the node journal's events about the devices a pod holds, and an unhealthy device's story.

Pure over values: the events are the journal's and the kernel log's (``devctl.core.history.read_events``,
bounded by the caller to the last day), in time order; the devices are the pod's (resource or DRA driver,
device ID) with the PCI addresses the snapshot joins them to (``analyze.history.node_index``). An event is
about the pod's device when ``analyze.history.matches`` says it names one of its IDs or addresses and its
resource (or driver) is the device's own, or it names no resource at all (a kernel line on the PCI address).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from devctl.analyze.history import DeviceKey, matches, node_index, story
from devctl.model import NodeSnapshot
from devctl.model.history import EventSource, NodeEvent

MAX_EVENTS = 5  # evidence lines from the history: the newest, newest last


def iso_time(when: datetime) -> str:
    """An event's time as the evidence's: UTC ISO 8601 to the second."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def addresses(snapshot: NodeSnapshot, devices: Iterable[DeviceKey]) -> dict[DeviceKey, str]:
    """The PCI address of each device the snapshot can join it to (the CDI device nodes, or an ID that is one)."""
    pci = node_index(snapshot).pci
    return {key: pci[key] for key in devices if key in pci}


def _about(event: NodeEvent, key: DeviceKey, pci: str | None) -> bool:
    name, device = key
    named = event.resource is not None or event.driver is not None
    if named and name not in (event.resource, event.driver) and event.source != EventSource.KERNEL:
        return False  # another resource's device of the same ID
    if matches(event, device):
        return True
    return pci is not None and matches(event, pci)


def device_events(
    events: Sequence[NodeEvent], devices: Iterable[DeviceKey], pci: dict[DeviceKey, str], limit: int = MAX_EVENTS
) -> tuple[NodeEvent, ...]:
    """The last ``limit`` events about any of ``devices`` (by ID, or by PCI address), in time order."""
    keys = list(dict.fromkeys(devices))
    found = [e for e in events if any(_about(e, k, pci.get(k)) for k in keys)]
    found.sort(key=lambda e: e.time)
    return tuple(found[-limit:]) if limit > 0 else ()


def event_what(event: NodeEvent) -> str:
    """One evidence line's text: the device (or its PCI address), then what happened."""
    subject = " ".join(x for x in (event.resource or event.driver, event.device or event.pci) if x)
    count = f" (x{event.count})" if event.count > 1 else ""
    return f"{subject}: {event.what}{count}" if subject else f"{event.what}{count}"


def story_line(events: Sequence[NodeEvent], resource: str, device: str, now: datetime) -> str | None:
    """``unhealthy since 02:47:12, 0.4 s after Xid 79 … on 0000:3b:00.0`` for a device unhealthy now, else None."""
    return story(events, resource, device, now, unhealthy=True).line if events else None
