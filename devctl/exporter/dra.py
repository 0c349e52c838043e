"""The exporter's live DRA health: each driver's ``NodeWatchResources`` stream followed for as long as it runs.

A DRA driver's device health must reach Prometheus as the kubelet sees it —
from the stream, as a device plugin's does, not from the one message each
refresh reads. The streams are followed by devctl's own watch
(``devctl.core.watch.watch`` with the drivers' names: the same follower, backoff
and reconnection as ``devctl watch DRIVER``), and every event is kept here as
a change of one device, stamped with the time it arrived.

The refresh stays the base: it reads each driver's complete list (and its
claims, holders and NUMA nodes). A render lays over it the changes that
arrived after that read (``live_probes``), so a health flip shows at once, a
change the refresh already saw is not applied twice, and a stream that broke
after the refresh makes the driver's devices unknown until it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from devctl.core.watch import (
    ADDED,
    DISCONNECTED,
    HEALTH,
    RECONNECTED,
    REMOVED,
    SNAPSHOT,
    WatchError,
    WatchEvent,
    watch,
)
from devctl.model import DraDeviceHealth, NodePaths, PluginProbe, PluginStatus

log = logging.getLogger(__name__)

# The kubelet's default for a device whose driver gives no health_check_timeout_seconds.
DEFAULT_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class DeviceChange:
    """The newest thing a driver's stream said of one device: its health (None: removed) and when it arrived."""

    health: str | None
    message: str
    at: float  # seconds since the epoch


@dataclass(frozen=True)
class DriverLive:
    """What one driver's stream says: connected or not since ``at``, and the newest change of each device."""

    connected: bool
    at: float
    changes: Mapping[str, DeviceChange] = field(default_factory=dict)  # "<pool>/<device>" -> change


# (driver, its live state)
OnChange = Callable[[str, DriverLive], None]


def apply(live: DriverLive | None, event: WatchEvent) -> DriverLive:
    """The driver's live state after one watch event."""
    at = event.time.timestamp()
    changes = live.changes if live is not None else {}
    connected = live.connected if live is not None else False
    since = live.at if live is not None else at
    if event.event in (SNAPSHOT, RECONNECTED):
        connected, since = True, at
    elif event.event == DISCONNECTED:
        connected, since = False, at
    elif event.event in (ADDED, HEALTH, REMOVED) and event.device is not None:
        health = None if event.event == REMOVED else event.to
        changes = {**changes, event.device: DeviceChange(health, event.message or "", at)}
    return DriverLive(connected, since, changes)


def _with_changes(probe: PluginProbe, live: DriverLive) -> PluginProbe:
    """A driver's probe as its stream says now: the refresh's list with every later change laid over it."""
    dra = probe.dra
    if dra is None or dra.read_at is None:
        return probe
    if not live.connected and live.at > dra.read_at:
        # The stream broke since the refresh read it: nothing vouches for the devices now.
        return replace(
            probe,
            dra=replace(
                dra, status=PluginStatus.UNREACHABLE, health=None, health_error="the health stream is disconnected"
            ),
        )
    newer = {device: c for device, c in live.changes.items() if c.at > dra.read_at}
    if not newer or dra.health is None:
        return probe
    listed = {f"{h.pool}/{h.device}": h for h in dra.health}
    for device, c in newer.items():
        before = listed.get(device)
        if c.health is None:
            listed.pop(device, None)
            continue
        pool, _, name = device.partition("/")
        timeout = before.timeout_seconds if before is not None else DEFAULT_TIMEOUT_SECONDS
        listed[device] = DraDeviceHealth(pool, name, c.health, int(c.at), timeout, c.message)  # in its place
    return replace(probe, dra=replace(dra, health=tuple(listed.values())))


def live_probes(plugins: tuple[PluginProbe, ...], drivers: Mapping[str, DriverLive]) -> tuple[PluginProbe, ...]:
    """The refresh's probes, each followed DRA driver as its stream says now; the same tuple when nothing is newer."""
    if not drivers:
        return plugins
    out = []
    for p in plugins:
        live = drivers.get(p.registry.name) if p.registry is not None and p.registry.name else None
        out.append(_with_changes(p, live) if live is not None and p.dra is not None else p)
    return plugins if all(a is b for a, b in zip(out, plugins, strict=True)) else tuple(out)


def followable(plugins: tuple[PluginProbe, ...]) -> set[str]:
    """The DRA drivers a refresh found serving a health stream: the ones to follow."""
    return {
        p.dra_driver
        for p in plugins
        if p.dra_driver and p.dra is not None and p.dra.status == PluginStatus.SERVING and p.dra.health_stream
    }


async def _no_sockets() -> dict[str, str | None]:
    """The watch's device-plugin socket names: none are wanted here (and pod-resources is not asked for them)."""
    return {}


class DraStreams:
    """Follow the health stream of every DRA driver a refresh found, for as long as the exporter runs."""

    def __init__(self, paths: NodePaths, timeout: float, on_change: OnChange):
        self.paths = paths
        self.timeout = timeout
        self.on_change = on_change
        self._wanted: set[str] = set()
        self._following: set[str] = set()
        self._changed = asyncio.Event()
        self._live: dict[str, DriverLive] = {}

    def follow(self, drivers: set[str]) -> None:
        """Drivers a refresh found; a driver once followed stays followed (its stream retries with backoff)."""
        if not drivers <= self._following:
            self._wanted = self._following | drivers
            self._changed.set()

    async def run(self) -> None:
        """Until cancelled: one watch of the wanted drivers, started again when a refresh finds another driver."""
        task: asyncio.Task[None] | None = None
        try:
            while True:
                await self._changed.wait()
                self._changed.clear()
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                self._following = set(self._wanted)
                task = asyncio.ensure_future(self._watch(sorted(self._following)))
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _watch(self, drivers: list[str]) -> None:
        try:
            # watch() is an async generator: aclosing cancels its streams at once.
            events = watch(self.paths, drivers, timeout=self.timeout, resolve=_no_sockets)
            async with contextlib.aclosing(events):
                async for item in events:
                    if isinstance(item, WatchEvent) and item.resource in drivers:
                        self._live[item.resource] = apply(self._live.get(item.resource), item)
                        self.on_change(item.resource, self._live[item.resource])
        except WatchError as e:
            # A driver went away between the refresh and here: the next refresh that finds one starts again.
            log.debug("following DRA drivers %s: %s", drivers, e.message)
            self._following = set()
