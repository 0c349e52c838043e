"""Following a DRA driver's health stream (``NodeWatchResources``) on the watch timeline.

A DRA driver is named by its driver name (``devctl watch gpu.example.com``),
found as the kubelet finds it: a ``plugins_registry/`` socket whose GetInfo
says ``DRAPlugin``. Its ``DRAResourceHealth`` stream (``v1``, else
``v1alpha1``) sends the complete device list with health on every change, as
ListAndWatch does, so the same events come out of it: a ``snapshot``, then
``added``/``removed``/``health`` per device (ID ``<pool>/<device>``), and
``disconnected``/``reconnected`` across driver restarts, with the same
backoff. A driver that offers no health service has no stream to follow: it
says so once and is done. Device-plugin watching is untouched
(``follow.py``); ``watch()`` only hands named drivers here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc

from devctl.events import ADDED, DISCONNECTED, HEALTH, RECONNECTED, REMOVED, SNAPSHOT, Notice, WatchEvent
from devctl.model import HEALTHY, NodePaths
from devctl.node.dra import _API, DRA_PLUGIN_TYPE, device_health, health_versions
from devctl.node.rpc import RpcFailure, channel, check_socket, failure, parsed
from devctl.node.sockets import OutsideRoot, registry_endpoint, registry_sockets
from devctl.watch.backoff import Backoff
from devctl.watch.follow import STABLE_AFTER, WatchItem, now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Driver:
    """A DRA driver as its registration names it: where its endpoint is and which health APIs it offers."""

    name: str
    endpoint: str
    versions: tuple[str, ...]  # health API versions, in the order devctl asks them


async def find_drivers(paths: NodePaths, names: Sequence[str], timeout: float) -> dict[str, Driver]:
    """The named drivers that a registry socket serves (GetInfo of type DRAPlugin), asked all at once.

    A registry that cannot be listed, or a socket that does not answer, names
    no driver: the names stay for the device-plugin watch to judge.
    """
    from devctl.node.deviceplugin import registry_info

    try:
        found = registry_sockets(paths.plugins_registry, paths.root)
    except OSError:
        return {}

    async def ask(real: str, listed: str) -> Driver | None:
        try:
            await check_socket(real, timeout)
            info = await registry_info(real, timeout)
            if info.type != DRA_PLUGIN_TYPE or info.name not in names:
                return None
            endpoint = registry_endpoint(paths, listed, info)
        except (RpcFailure, OutsideRoot, AttributeError, TypeError) as e:
            log.debug("registry socket %s: %s", listed, e)
            return None
        return Driver(info.name, endpoint, tuple(health_versions(info.supported_versions)))

    answers = await asyncio.gather(*(ask(s.real, s.path) for s in found))
    return {d.name: d for d in answers if d is not None}


# One device's state in a health list: (health, message).
_State = tuple[str, str]


def _states(message: object) -> dict[str, _State]:
    """A NodeWatchResourcesResponse as ``<pool>/<device>`` -> (health, message); the timestamps are not changes."""
    out = {}
    for d in message.devices:  # type: ignore[attr-defined]
        h = device_health(d)
        out[f"{h.pool}/{h.device}"] = (h.health, h.message)
    return out


def _tally(states: Mapping[str, _State]) -> tuple[int, int]:
    return len(states), sum(health == HEALTHY for health, _ in states.values())


class _Ended(Exception):
    """The stream ended; the message says why, in one line."""


class DraFollower:
    """One watched DRA driver and the last device list known for it."""

    def __init__(
        self, out: asyncio.Queue[WatchItem], driver: Driver, *, wait: bool, once: bool, timeout: float, backoff: Backoff
    ):
        self.out = out
        self.driver = driver
        self.wait = wait
        self.retries = wait or not once
        self.timeout = timeout
        self.backoff = backoff
        self.last: dict[str, _State] | None = None
        self.connected = False
        self.settled = asyncio.Event()  # first list, or (without wait) the first failure: ``--once`` waits on it

    def _notice(self, message: str) -> None:
        self.out.put_nowait(Notice(now(), message, self.driver.name, self.driver.endpoint))

    def _event(self, event: str, states: Mapping[str, _State], device: str | None = None, **change: str | None) -> None:
        devices, healthy = _tally(states)
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

    def _changes(self, new: dict[str, _State]) -> None:
        """Removals (old order), then additions and health changes (new order), as ``diff`` orders them."""
        old = self.last or {}
        for device, (health, _) in old.items():
            if device not in new:
                self._event(REMOVED, new, device, from_=health)
        for device, (health, message) in new.items():
            before = old.get(device)
            if before is None:
                self._event(ADDED, new, device, to=health)
            elif before[0] != health:
                self._event(HEALTH, new, device, from_=before[0], to=health, message=message or None)
        self.last = new

    def _first(self, states: dict[str, _State]) -> None:
        self.connected = True
        if self.last is None:
            self._event(SNAPSHOT, states)
            self.last = states
        else:
            self._event(RECONNECTED, states)
            self._changes(states)
        self.settled.set()

    async def run(self) -> None:
        """Follow the driver's health stream for ever: connect, stream, and after a failure try again with backoff."""
        if not self.driver.versions:
            self._notice(f"{self.driver.name}: the driver offers no health service (DRAResourceHealth)")
            self.settled.set()
            return
        said: str | None = None
        while True:
            started = time.monotonic()
            try:
                await self._stream()
                reason = "NodeWatchResources stream ended"
            except (_Ended, RpcFailure) as e:
                reason = e.args[0]
            except Exception as e:  # a misbehaving driver must never end the watch of the others
                log.debug("watching %s failed", self.driver.name, exc_info=True)
                reason = f"{type(e).__name__}: {e}"
            why = reason if reason.startswith(self.driver.endpoint) else f"{self.driver.name}: {reason}"
            if self.connected:
                self.connected = False
                self._event(DISCONNECTED, self.last or {})
                said = f"{why}; reconnecting"
                self._notice(said)
                if time.monotonic() - started >= STABLE_AFTER:
                    self.backoff.reset()
            elif said != (message := f"{why}; retrying" if self.retries else why):
                self._notice(message)
                said = message
            if not self.wait:
                self.settled.set()
            await asyncio.sleep(self.backoff.next())

    async def _stream(self) -> None:
        """One session: the first health API version that is served, its first list, then every change."""
        path = self.driver.endpoint
        await check_socket(path, self.timeout)
        unserved = None
        for version in self.driver.versions:
            pb, pb_grpc = _API[version]
            what = f"{path} {version} NodeWatchResources"
            async with channel(path) as ch:
                call = pb_grpc.DRAResourceHealthStub(ch).NodeWatchResources(pb.NodeWatchResourcesRequest())
                try:
                    try:
                        reply = await asyncio.wait_for(call.read(), self.timeout)
                    except asyncio.TimeoutError:
                        raise _Ended(f"{what}: no device list within {self.timeout:g}s") from None
                    except grpc.aio.AioRpcError as e:
                        if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                            unserved = f"{path}: {version}.DRAResourceHealth offered but not served"
                            continue
                        raise failure(e, what, self.timeout) from None
                    while reply is not grpc.aio.EOF:
                        states = _states(parsed(reply, what, "NodeWatchResourcesResponse"))
                        if self.connected:
                            self._changes(states)
                        else:
                            self._first(states)
                        try:
                            reply = await call.read()
                        except grpc.aio.AioRpcError as e:
                            raise failure(e, what, self.timeout) from None
                    return
                finally:
                    with contextlib.suppress(Exception):
                        call.cancel()
        raise _Ended(unserved or f"{path}: no health service answered")
