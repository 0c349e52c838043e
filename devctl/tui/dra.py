"""DRA drivers' health streams in the TUI: followed live, and laid over the last polled snapshot.

A DRA driver's ``DRAResourceHealth`` stream is followed by the whole-node watch
(``devctl.core.watch``: every driver in ``plugins_registry/``, ones that register
later too), the same one ``devctl watch`` uses, so the event log shows the same
events with the same words (``snapshot``, ``health`` with the driver's
message, ``disconnected``/``reconnected``). Here: telling those events apart
and laying them over the last poll. No widgets here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from devctl.core.events import ADDED, HEALTH, REMOVED, WatchEvent
from devctl.model import HEALTHY, Device, DraDeviceHealth, NodeSnapshot

if TYPE_CHECKING:
    from devctl.lab.plugin.dra import DraDriver


def is_dra_event(item: object) -> bool:
    """A DRA driver's event: its resource is a driver name, a DNS name with no ``/``.

    Every extended resource of a device plugin is ``vendor/name``
    (the kubelet refuses others), so the two never mix.
    """
    return isinstance(item, WatchEvent) and item.resource is not None and "/" not in item.resource


def _patched(health: tuple[DraDeviceHealth, ...], events: Sequence[WatchEvent]) -> tuple[DraDeviceHealth, ...]:
    by_key = {f"{h.pool}/{h.device}": h for h in health}
    for e in events:
        if e.device is None or "/" not in e.device:
            continue
        pool, device = e.device.rsplit("/", 1)  # a pool name may hold "/", a device name (a DNS label) never
        when = int(e.time.timestamp())
        old = by_key.get(e.device)
        if e.event == ADDED:
            timeout = old.timeout_seconds if old else DraDeviceHealth(pool, device, HEALTHY).timeout_seconds
            by_key[e.device] = DraDeviceHealth(pool, device, e.to or HEALTHY, when, timeout)
        elif e.event == REMOVED:
            by_key.pop(e.device, None)
        elif e.event == HEALTH and old is not None:
            by_key[e.device] = replace(old, health=e.to or old.health, last_updated=when, message=e.message or "")
    return tuple(by_key.values())


def with_dra_health(snapshot: NodeSnapshot, items: Iterable[object]) -> NodeSnapshot:
    """The snapshot with each driver's device health as its live stream last said (for the Devices and Claims views).

    Only drivers whose health the poll read are patched: a device list is needed to lay changes over.
    """
    per_driver: dict[str, list[WatchEvent]] = {}
    for item in items:
        if is_dra_event(item):
            assert isinstance(item, WatchEvent) and item.resource is not None
            per_driver.setdefault(item.resource, []).append(item)
    if not per_driver:
        return snapshot
    plugins = []
    for p in snapshot.plugins:
        name = p.registry.name if p.registry is not None else None
        events = per_driver.get(name or "")
        if events and p.dra is not None and p.dra.health is not None:
            p = replace(p, dra=replace(p.dra, health=_patched(p.dra.health, events)))
        plugins.append(p)
    return replace(snapshot, plugins=tuple(plugins))


class DraHandle:
    """A DRA driver running in this process (``devctl demo``), under the keys that drive plugins: h, a, x.

    It has the shape of ``feeds.PluginHandle``, with device IDs as the
    Devices view writes them (``<pool>/<device>``); a health change goes out on
    the driver's health streams (the kubelet's and the TUI's own) with a message
    saying who made it.
    """

    MESSAGE = "set from the devctl TUI"

    def __init__(self, driver: DraDriver):
        self.driver = driver

    @property
    def devices(self) -> tuple[Device, ...]:
        pool = self.driver.spec.pool
        return tuple(Device(f"{pool}/{d.name}", d.health, d.numa_nodes) for d in self.driver.devices)

    def set_health(self, device_id: str, health: str) -> None:
        self.driver.set_health(device_id, health, "" if health == HEALTHY else self.MESSAGE)

    def add(self, device: Device) -> None:
        from devctl.lab.plugin.dra import DraDevice

        self.driver.add(DraDevice(device.id, device.numa_nodes, device.health))

    def remove(self, device_id: str) -> None:
        self.driver.remove(device_id)
