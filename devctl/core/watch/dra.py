"""Following a DRA driver's health stream (``NodeWatchResources``) on the watch timeline.

A DRA driver is named by its driver name (``devctl watch gpu.example.com``),
found as the kubelet finds it: a ``plugins_registry/`` socket whose GetInfo
says ``DRAPlugin``. Its ``DRAResourceHealth`` stream (``v1``, else
``v1alpha1``) sends the complete device list with health on every change, as
ListAndWatch does, so the same events come out of it: a ``snapshot``, then
``added``/``removed``/``health`` per device (ID ``<pool>/<device>``), and
``disconnected``/``reconnected`` across driver restarts, with the same
backoff: the session loop is ``follow.Reconnecting``, shared with the device
plugins' ``Follower``. A driver that offers no health service has no stream
to follow: it says so once and is done. ``watch()`` hands named drivers
here, and in a whole-node watch every driver that registers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

from devctl.base.backoff import Backoff
from devctl.core.events import ADDED, DISCONNECTED, HEALTH, RECONNECTED, REMOVED, SNAPSHOT, Notice, WatchEvent
from devctl.core.watch.follow import BEHIND, SKIP_NOTICE_EVERY, Reconnecting, WatchItem, now
from devctl.core.watch.stream import StreamEnded as _Ended
from devctl.model import HEALTHY, DraDeviceHealth
from devctl.node.dra import Driver, HealthStream
from devctl.node.rpc import RpcFailure, check_socket

log = logging.getLogger(__name__)

# One device's state in a health list: (health, message).
_State = tuple[str, str]


def _tally(devices: tuple[DraDeviceHealth, ...]) -> tuple[int, int]:
    """(devices, healthy); a device listed twice counts once, as the kubelet's cache keyed <pool>/<device> does."""
    health = {(h.pool, h.device): h.health for h in devices}
    return len(health), sum(h == HEALTHY for h in health.values())


class DraFollower(Reconnecting):
    """One watched DRA driver and the last device list known for it."""

    ENDED = "NodeWatchResources stream ended"

    def __init__(
        self, out: asyncio.Queue[WatchItem], driver: Driver, *, wait: bool, once: bool, timeout: float, backoff: Backoff
    ):
        super().__init__(out, wait=wait, once=once, timeout=timeout, backoff=backoff)
        self.driver = driver
        self.last: dict[str, _State] | None = None
        self.tally = (0, 0)  # (devices, healthy) of the last list
        self.previous: tuple[DraDeviceHealth, ...] = ()  # the last list as the stream gave it

    @property
    def name(self) -> str:
        return self.driver.name

    def _notice(self, message: str) -> None:
        self.out.put_nowait(Notice(now(), message, self.driver.name, self.driver.endpoint))

    def _event(self, event: str, device: str | None = None, **change: str | None) -> None:
        devices, healthy = self.tally
        self.out.put_nowait(
            WatchEvent(
                time=now(),
                resource=self.driver.name,
                socket=self.driver.endpoint,
                event=event,
                device=device,
                devices=devices,
                healthy=healthy,
                from_=change.get("from_"),
                to=change.get("to"),
                message=change.get("message"),
            )
        )

    def _disconnected(self) -> None:
        self._event(DISCONNECTED)

    def _take(self, devices: tuple[DraDeviceHealth, ...]) -> None:
        """Emit what a new list changed; a list of the same devices in the same order costs only what changed.

        The stream hands back the very object of every device whose bytes did
        not change, so the devices changed are those whose object differs.
        """
        old, last = self.previous, self.last
        self.previous = devices
        if last is not None and len(old) == len(devices):
            changed = [(a, b) for a, b in zip(old, devices, strict=True) if a is not b]
            if all((a.pool, a.device) == (b.pool, b.device) for a, b in changed):
                if any(a.health != b.health for a, b in changed):
                    self.tally = _tally(devices)
                for a, b in changed:
                    key = f"{b.pool}/{b.device}"
                    last[key] = (b.health, b.message)
                    if a.health != b.health:
                        self._event(HEALTH, key, from_=a.health, to=b.health, message=b.message or None)
                return
        self._changes({f"{h.pool}/{h.device}": (h.health, h.message) for h in devices}, devices)

    def _changes(self, new: dict[str, _State], devices: tuple[DraDeviceHealth, ...]) -> None:
        """Removals (old order), then additions and health changes (new order), as ``diff`` orders them."""
        old = self.last or {}
        self.tally = _tally(devices)
        for device, (health, _) in old.items():
            if device not in new:
                self._event(REMOVED, device, from_=health)
        for device, (health, message) in new.items():
            before = old.get(device)
            if before is None:
                self._event(ADDED, device, to=health)
            elif before[0] != health:
                self._event(HEALTH, device, from_=before[0], to=health, message=message or None)
        self.last = new

    def _first(self, devices: tuple[DraDeviceHealth, ...]) -> None:
        self.connected = True
        states = {f"{h.pool}/{h.device}": (h.health, h.message) for h in devices}
        if self.last is None:
            self.tally = _tally(devices)
            self._event(SNAPSHOT)
            self.last = states
        else:
            self.tally = _tally(devices)
            self._event(RECONNECTED)
            self._changes(states, devices)
        self.previous = devices
        self.settled.set()

    async def run(self) -> None:
        """Follow the driver's health stream for ever; a driver without a health service is said once."""
        if not self.driver.versions:
            self._notice(f"{self.driver.name}: the driver offers no health service (DRAResourceHealth)")
            self.settled.set()
            return
        await super().run()

    async def _session(self) -> bool:
        """One session: the first health API version that is served, its first list, then every change."""
        path = self.driver.endpoint
        await check_socket(path, self.timeout)
        unserved = None
        for version in self.driver.versions:
            stream = HealthStream(path, version)
            told, told_at = 0, -SKIP_NOTICE_EVERY
            try:
                async for devices in stream.lists(self.timeout, behind=BEHIND):
                    if self.connected:
                        self._take(devices)
                    else:
                        self._first(devices)
                    if stream.skipped != told and time.monotonic() - told_at >= SKIP_NOTICE_EVERY:
                        self._notice(
                            f"{self.name}: behind the driver; skipped {stream.skipped - told} list(s) to show the"
                            " newest (their changes are folded into one diff)"
                        )
                        told, told_at = stream.skipped, time.monotonic()
            except RpcFailure as e:
                if e.code == grpc.StatusCode.UNIMPLEMENTED and not self.connected:
                    unserved = f"{path}: {version}.DRAResourceHealth offered but not served"
                    continue
                raise
            return True
        raise _Ended(unserved or f"{path}: no health service answered")
