"""One item of the node (a watch event, a kernel record, a udev event) as a ``NodeEvent``, and SUBJECT matching.

A minimal private conversion for the recorder and ``devctl events`` until ``devctl.analyze.history``
(which joins a PCI address to its device through sysfs) lands; the signatures are the same
(``from_watch``, ``from_kernel``, ``from_udev``, ``matches``), so switching is an import. Pure: no I/O.
Holders are those of ``snapshot``'s pod-resources List at that moment.
"""

from __future__ import annotations

from datetime import datetime, timezone

from devctl.analyze.kernel import describe
from devctl.core.events import DISCONNECTED, RECONNECTED, SNAPSHOT, WatchEvent
from devctl.model import NodeSnapshot, PodResources
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.kernel import KernelRecord
from devctl.model.pci import normalize_pci_address
from devctl.model.udev import KernelEvent

HolderIndex = dict[tuple[str, str], tuple[Holder, ...]]


def holder_index(pods: tuple[PodResources, ...] | None) -> HolderIndex:
    """(resource, device ID) -> the containers holding it, from a pod-resources List."""
    index: dict[tuple[str, str], list[Holder]] = {}
    for pod in pods or ():
        for container in pod.containers:
            for devices in container.devices:
                for device_id in devices.ids:
                    index.setdefault((devices.resource, device_id), []).append(
                        Holder(pod.namespace, pod.name, container.name)
                    )
    return {key: tuple(dict.fromkeys(value)) for key, value in index.items()}


def _holders(snapshot: NodeSnapshot | None, resource: str | None, device: str | None) -> tuple[Holder, ...]:
    if snapshot is None or resource is None or device is None:
        return ()
    return holder_index(snapshot.pods).get((resource, device), ())


def _watch_what(event: WatchEvent) -> str:
    if event.event in (SNAPSHOT, RECONNECTED, DISCONNECTED):
        counts = f"{event.devices} devices, {event.healthy} healthy" if event.devices is not None else ""
        return ", ".join(x for x in (counts, event.message or "") if x) or event.event
    change = f"{event.from_} -> {event.to}" if event.from_ is not None and event.to is not None else event.to or ""
    return ": ".join(x for x in (change, event.message or "") if x) or event.event


def from_watch(event: WatchEvent, snapshot: NodeSnapshot | None) -> NodeEvent | None:
    """A watch event as a node event: ``dra`` when its resource is a DRA driver's name (no ``/``), else ``plugin``."""
    dra = event.resource is not None and "/" not in event.resource
    return NodeEvent(
        time=event.time,
        source=EventSource.DRA if dra else EventSource.PLUGIN,
        kind=event.event,
        resource=None if dra else event.resource,
        device=event.device,
        holders=() if dra else _holders(snapshot, event.resource, event.device),
        what=_watch_what(event),
        driver=event.resource if dra else None,
    )


def from_kernel(record: KernelRecord, snapshot: NodeSnapshot | None) -> NodeEvent | None:
    """A kernel record that names a device (``describe``), ``None`` for any other line or one without a time."""
    described = record if record.device is not None else describe(record)
    mention = described.device
    if mention is None or described.time is None:
        return None
    device: str | None = None
    resource: str | None = None
    holders: tuple[Holder, ...] = ()
    if snapshot is not None and mention.pci is not None:  # a device plugin whose IDs are PCI addresses (SR-IOV)
        for (res, dev), held in holder_index(snapshot.pods).items():
            if normalize_pci_address(dev) == mention.pci:
                device, resource, holders = dev, res, held
                break
    return NodeEvent(
        time=described.time,
        source=EventSource.KERNEL,
        kind=mention.kind,
        resource=resource,
        device=device or mention.gpu_uuid,
        pci=mention.pci,
        holders=holders,
        what=mention.what,
        driver=mention.driver,
    )


def from_udev(event: KernelEvent, snapshot: NodeSnapshot | None) -> NodeEvent | None:
    """A udev event as a node event (its PCI address when the device's name is one)."""
    pci = normalize_pci_address(event.name)
    what = f"{event.action} {event.subsystem} {event.name}" + (f" ({event.driver})" if event.driver else "")
    return NodeEvent(
        time=event.time, source=EventSource.UDEV, kind=event.action, pci=pci, what=what, driver=event.driver
    )


def matches(event: NodeEvent, subject: str) -> bool:
    """Whether ``subject`` is the event's resource, driver, device, PCI address, or a holder (``ns/name``, name)."""
    if subject in (event.resource, event.driver, event.device):
        return True
    pci = normalize_pci_address(subject)
    if pci is not None and pci == event.pci:
        return True
    return any(subject in (holder.pod, f"{holder.namespace}/{holder.pod}") for holder in event.holders)


def now() -> datetime:
    """The time an event is stamped with: now, in UTC."""
    return datetime.now(timezone.utc)
