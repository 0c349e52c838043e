"""Live ListAndWatch streams of many plugins, turned into one timeline of events.

The kubelet's device manager sees a plugin only through its ListAndWatch
stream: every message is the full device list
(pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go). A person watching a
device go bad wants the *changes*, so each list is diffed against the one
before it. We open our own stream on each plugin socket (a plugin serves many
streams; the kubelet's own is untouched), follow plugin and kubelet restarts
with backoff, and optionally merge kernel device events (``node/udev.py``).

This is core code: no UI imports, no printing. The CLI (``devctl watch``) and
the TUI's event log consume the same async generator, :func:`watch`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from devctl.model import HEALTHY, Device, NodePaths, NodeSnapshot, PluginStatus
from devctl.node import sockets as node_sockets
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.rpc import RpcFailure, check_socket
from devctl.node.udev import KernelEvent, UdevUnavailable, kernel_events

log = logging.getLogger(__name__)

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

# How often a live stream checks that its socket file is still the one it dialled.
# A kubelet restart deletes every socket in the plugins dir
# (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go, Start -> cleanup); the
# kubelet then cannot reach a plugin until the plugin serves a new socket, even
# if our old connection still lives.
SOCKET_POLL = 0.25
# How often the plugins dir is listed for new sockets when the whole node is watched.
DISCOVERY_POLL = 0.5
# A connection that lived this long resets the backoff; a flapping stream does not.
STABLE_AFTER = 2.0


@dataclass(frozen=True)
class WatchEvent:
    """One line of the timeline: exactly the fields of cli.md's ``devctl watch`` JSON.

    ``devices``/``healthy`` count the list the event came from (for
    ``disconnected``: the last list known). ``from_``/``to`` hold health
    strings for ``health`` (and the new device's health in ``to`` for
    ``added``, the old one's in ``from_`` for ``removed``), NUMA node lists such
    as ``"0,1"`` (or ``"none"``) for ``topology``.
    """

    time: datetime
    resource: str | None
    socket: str | None
    event: str
    device: str | None = None
    from_: str | None = None
    to: str | None = None
    devices: int | None = None
    healthy: int | None = None


@dataclass(frozen=True)
class Notice:
    """A status line that is not an event of the contract: waiting, a failure reason, udev unavailable.

    Faces show it apart from events (the CLI on stderr), so that ``-o json``
    stays exactly the contract's objects.
    """

    time: datetime
    message: str
    resource: str | None = None
    socket: str | None = None


WatchItem = WatchEvent | KernelEvent | Notice


class WatchError(Exception):
    """A watch that cannot start; ``message`` is one line for a person."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UnknownTarget(WatchError):
    """A named resource no socket serves, or a named socket that does not exist (and no ``wait``)."""


class NoPluginsDir(WatchError):
    """The whole node was to be watched, but its plugins dir does not exist (and no ``wait``)."""


@dataclass(frozen=True)
class Change:
    """One difference between two device lists; ``diff`` returns these."""

    event: str  # ADDED | REMOVED | HEALTH | TOPOLOGY
    device: str
    from_: str | None = None
    to: str | None = None


def numa_text(nodes: Sequence[int]) -> str:
    """NUMA nodes as written in a ``topology`` event: ``"0,1"``, or ``"none"``."""
    return ",".join(str(n) for n in nodes) if nodes else NO_TOPOLOGY


def diff(old: Sequence[Device], new: Sequence[Device]) -> list[Change]:
    """What changed from one full device list to the next, matched by device ID.

    Order: removals (in the old list's order), then additions, health and
    topology changes (in the new list's order), so one update reads top-down.
    A device listed twice counts once, its last entry winning, as a map keyed
    by ID would keep it in the kubelet (manager.go genericDeviceUpdateCallback).
    """
    if len(old) == len(new):
        # The common case, and the one that must be fast (a plugin with 10,000 devices
        # sending 20 lists a second): the same devices in the same order.
        same = _same_order(old, new)
        if same is not None:
            return same
    old_by_id = {d.id: d for d in old}
    new_by_id = {d.id: d for d in new}
    changes = [Change(REMOVED, i, from_=d.health) for i, d in old_by_id.items() if i not in new_by_id]
    for i, d in new_by_id.items():
        before = old_by_id.get(i)
        if before is None:
            changes.append(Change(ADDED, i, to=d.health))
        elif before is not d:
            _compare(before, d, changes)
    return changes


def _same_order(old: Sequence[Device], new: Sequence[Device]) -> list[Change] | None:
    """The changes between two lists of the same unique IDs in the same order; None when they are not."""
    changes: list[Change] = []
    for before, d in zip(old, new, strict=True):
        if before is d:
            continue
        if before.id != d.id:
            return None
        _compare(before, d, changes)
    return changes if len({d.id for d in new}) == len(new) else None


def _compare(before: Device, d: Device, changes: list[Change]) -> None:
    if before.health != d.health:
        changes.append(Change(HEALTH, d.id, from_=before.health, to=d.health))
    if before.numa_nodes != d.numa_nodes:
        changes.append(Change(TOPOLOGY, d.id, from_=numa_text(before.numa_nodes), to=numa_text(d.numa_nodes)))


def counts(devices: Sequence[Device]) -> tuple[int, int]:
    """(devices, healthy) of a list; anything but "Healthy" is unhealthy to the kubelet."""
    return len(devices), sum(d.health == HEALTHY for d in devices)


class Backoff:
    """Exponential reconnect delays with jitter, capped, so a restarting plugin is not hammered."""

    def __init__(self, first: float = 0.1, cap: float = 2.0, factor: float = 2.0, jitter: float = 0.2):
        self.first = first
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._next = first

    def next(self) -> float:
        """The delay before the next attempt; each call grows the following one up to ``cap``."""
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return min(self.cap, delay * (1 + self.jitter * (2 * random.random() - 1)))

    def reset(self) -> None:
        self._next = self.first


# socket path -> resource name (None when not known); see resolve_plugins.
Resolver = Callable[[], Awaitable[Mapping[str, str | None]]]


def now() -> datetime:
    return datetime.now(timezone.utc)


def plugin_sockets(plugins_dir: str, root: str | None = None) -> list[str]:
    """Every plugin socket of the plugins dir, as the file to dial (see devctl.node.sockets); [] when unreadable."""
    try:
        return [s.real for s in node_sockets.plugin_sockets(plugins_dir, root)]
    except OSError:
        return []


def socket_resources(snapshot: NodeSnapshot) -> dict[str, str | None]:
    """Which resource each live plugin socket serves, keyed by the socket to dial, as ``devctl plugins`` says."""
    served: dict[str, str | None] = {}
    for p in snapshot.plugins:
        if p.status != PluginStatus.SERVING:
            continue
        dial = node_sockets.dial_path(snapshot.paths, p)
        if dial is not None and served.get(dial) is None:
            served[dial] = p.resource
    return served


async def resolve_plugins(paths: NodePaths, timeout: float) -> dict[str, str | None]:
    """Which resource each plugin socket serves, resolved as every view resolves it (devctl.collect)."""
    from devctl.collect import collect
    from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES

    return socket_resources(await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT}))


class _CachedResolver:
    """Shares one resolution between followers asking at the same moment.

    Resolving probes every socket and asks pod-resources, whose rate limit is
    shared by every client of the node (kubelet-contract.md): ask rarely.
    """

    def __init__(self, resolve: Resolver, ttl: float = 0.5):
        self._resolve = resolve
        self._ttl = ttl
        self._lock = asyncio.Lock()
        self._at = -1e9
        self._value: Mapping[str, str | None] = {}

    async def __call__(self) -> Mapping[str, str | None]:
        async with self._lock:
            if time.monotonic() - self._at > self._ttl:
                try:
                    self._value = await self._resolve()
                except Exception as e:  # a failed resolution means "not known yet", never a crash
                    log.debug("resolving plugin sockets failed: %s", e)
                    self._value = {}
                self._at = time.monotonic()
            return self._value

    async def sockets_of(self, resource: str) -> list[str]:
        return sorted(s for s, r in (await self()).items() if r == resource)

    async def resource_of(self, socket: str) -> str | None:
        return (await self()).get(socket)


class _Ended(Exception):
    """A stream session ended; the message says why, in one line."""


def _absolute(path: str) -> str:
    return os.path.abspath(path)


def _exists(path: str | None) -> bool:
    return path is not None and os.path.exists(path)


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class _Follower:
    """One watched target (a resource, or a socket) and the last device list known for it."""

    def __init__(
        self,
        out: asyncio.Queue[WatchItem],
        resolver: _CachedResolver,
        *,
        resource: str | None,
        socket: str | None,
        fixed_socket: bool,
        wait: bool,
        once: bool,
        timeout: float,
        backoff: Backoff,
    ):
        self.out = out
        self.resolver = resolver
        self.resource = resource
        self.socket = socket
        self.fixed_socket = fixed_socket  # --socket or a discovered socket: never re-resolved
        self.wait = wait
        # ``--once`` without ``wait`` gives up after the first failure: no "retrying" then.
        self.retries = wait or not once
        self.timeout = timeout
        self.backoff = backoff
        self.last: tuple[Device, ...] | None = None
        self.tally = (0, 0)  # (devices, healthy) of the last list
        self.connected = False
        self._failed = False  # the last attempt failed before a first list
        # Set once the first list arrived, or (without wait) the first attempt failed: ``--once`` waits on it.
        self.settled = asyncio.Event()

    @property
    def name(self) -> str:
        return self.resource or self.socket or "?"

    def _notice(self, message: str) -> None:
        self.out.put_nowait(Notice(now(), message, self.resource, self.socket))

    def _event(self, event: str, tally: tuple[int, int], change: Change | None = None) -> None:
        self.out.put_nowait(
            WatchEvent(
                time=now(),
                resource=self.resource,
                socket=self.socket,
                event=event,
                device=change.device if change else None,
                from_=change.from_ if change else None,
                to=change.to if change else None,
                devices=tally[0],
                healthy=tally[1],
            )
        )

    def _changes(self, devices: tuple[Device, ...]) -> None:
        """Emit what changed since the last list; counts are taken once per list, not per event."""
        changes = diff(self.last or (), devices)
        if changes:
            self.tally = counts(devices)
            for change in changes:
                self._event(change.event, self.tally, change)
        self.last = devices

    async def _locate(self) -> str | None:
        """The socket to dial now, or None when nothing serves the target yet.

        A resource's last socket is tried first (a restarting plugin comes
        back on the same path); after a failed attempt the resource is
        resolved again, in case it now lives on another socket.
        """
        if self.fixed_socket:
            return self.socket if _exists(self.socket) else None
        assert self.resource is not None
        known = self.socket if _exists(self.socket) else None
        if known and not self._failed:
            return known
        served = await self.resolver.sockets_of(self.resource)
        if not served:
            return known
        if self.socket not in served:
            if len(served) > 1:
                self._notice(f"{self.resource} is served by {len(served)} sockets; following {served[0]}")
            self.socket = served[0]
        return self.socket

    async def run(self) -> None:
        """Follow the target for ever: connect, stream, and after a failure try again with backoff."""
        said: str | None = None  # the last notice given while not connected, not to repeat it
        while True:
            socket = await self._locate()
            if socket is None:
                message = f"waiting for {self.name} to be served" if self.resource else f"waiting for {self.name}"
                if said is None:
                    self._notice(message)
                    said = message
                if not self.wait:
                    self.settled.set()
                await asyncio.sleep(self.backoff.next())
                continue
            started = time.monotonic()
            try:
                await self._session(socket)
                reason = "ListAndWatch stream ended"
            except (_Ended, RpcFailure) as e:
                reason = e.args[0]
            except Exception as e:  # one misbehaving plugin must never end the watch of the others
                log.debug("watching %s failed", socket, exc_info=True)
                reason = f"{type(e).__name__}: {e}"
            self._failed = not self.connected
            # Most reasons start with the socket's path already: name the target once.
            why = reason if reason.startswith(f"{self.name}:") else f"{self.name}: {reason}"
            if self.connected:
                self.connected = False
                self._event(DISCONNECTED, self.tally)
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

    async def _session(self, socket: str) -> None:
        """Dial ``socket``, emit the first list and every change, return or raise when the stream ends."""
        await check_socket(socket, self.timeout)
        inode = _inode(socket)
        async with DevicePluginClient(socket, self.timeout) as client:
            stream = client.list_and_watch()
            try:
                try:
                    first = await asyncio.wait_for(stream.__anext__(), self.timeout)
                except asyncio.TimeoutError:
                    raise _Ended(f"{socket}: no device list within {self.timeout:g}s") from None
                except StopAsyncIteration:
                    raise _Ended(f"{socket}: ListAndWatch ended before the first list") from None
                if self.resource is None:
                    self.resource = await self.resolver.resource_of(socket)
                self._first_list(first)
                consume = asyncio.ensure_future(self._consume(stream))
                replaced = asyncio.ensure_future(self._until_replaced(socket, inode))
                try:
                    await asyncio.wait({consume, replaced}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in (consume, replaced):
                        task.cancel()
                    await asyncio.gather(consume, replaced, return_exceptions=True)
                if replaced.done() and not replaced.cancelled() and replaced.exception() is None:
                    raise _Ended(replaced.result())
                consume.result()  # re-raises the RpcFailure that ended the stream
            finally:
                await stream.aclose()

    def _first_list(self, devices: tuple[Device, ...]) -> None:
        self.connected = True
        self.tally = counts(devices)
        if self.last is None:
            self._event(SNAPSHOT, self.tally)
            self.last = devices
        else:
            self._event(RECONNECTED, self.tally)
            self._changes(devices)
        self.settled.set()

    async def _consume(self, stream: AsyncIterator[tuple[Device, ...]]) -> None:
        async for devices in stream:
            self._changes(devices)

    async def _until_replaced(self, socket: str, inode: int | None) -> str:
        while True:
            await asyncio.sleep(SOCKET_POLL)
            current = _inode(socket)
            if current is None:
                return f"{socket} was deleted (plugin or kubelet restart)"
            if current != inode:
                return f"{socket} was created again (plugin or kubelet restart)"


async def _discover(
    plugins_dir: str,
    start: Callable[[str], None],
    known: set[str],
    out: asyncio.Queue[WatchItem],
    root: str | None = None,
) -> None:
    """Follow every new socket that appears in the plugins dir (whole-node watch)."""
    said_empty = False
    while True:
        found = plugin_sockets(plugins_dir, root)
        if not found and not known and not said_empty:
            out.put_nowait(Notice(now(), f"no device plugin sockets in {plugins_dir} yet; waiting for one"))
            said_empty = True
        for socket in found:
            if socket not in known:
                known.add(socket)
                start(socket)
        await asyncio.sleep(DISCOVERY_POLL)


async def _forward_udev(out: asyncio.Queue[WatchItem]) -> None:
    try:
        async for event in kernel_events(on_notice=lambda m: out.put_nowait(Notice(now(), m))):
            out.put_nowait(event)
    except UdevUnavailable as e:
        out.put_nowait(Notice(now(), f"{e}; going on without kernel device events"))


_DONE = object()


def _check_targets(paths: NodePaths, sockets: Sequence[str], whole_node: bool) -> None:
    """Refuse named sockets that do not exist, and a whole-node watch without a plugins dir."""
    missing = [s for s in sockets if not os.path.exists(s)]
    if missing:
        raise UnknownTarget(f"{missing[0]}: no such socket (use --wait to wait for it)")
    if whole_node and not os.path.isdir(paths.plugins_dir):
        raise NoPluginsDir(f"{paths.plugins_dir}: no such directory (use --wait to wait for plugins)")


def _not_served(paths: NodePaths, unknown: Sequence[str], served: set[str | None]) -> str:
    """Why named resources cannot be watched, with what a person most likely needs to hear.

    Connecting to a unix socket needs write permission on it: a user who lacks
    it sees no plugin serve anything, which is not the same as none serving.
    """
    import difflib

    denied = [s for s in plugin_sockets(paths.plugins_dir, paths.root) if not os.access(s, os.W_OK)]
    close = difflib.get_close_matches(unknown[0], sorted(r for r in served if r), n=1)
    if denied:
        hint = f"{len(denied)} plugin socket(s) refuse devctl: permission denied; run as root"
    elif close:
        hint = f"did you mean {close[0]}? see `devctl plugins`"
    else:
        hint = "see `devctl plugins`; use --wait to wait for it"
    return f"no plugin serves {', '.join(unknown)} ({hint})"


async def watch(
    paths: NodePaths,
    resources: Sequence[str] = (),
    sockets: Sequence[str] = (),
    *,
    wait: bool = False,
    once: bool = False,
    udev: bool = False,
    timeout: float = 5.0,
    resolve: Resolver | None = None,
    backoff: Callable[[], Backoff] = Backoff,
) -> AsyncIterator[WatchItem]:
    """Yield events of every target on one timeline, until the caller stops (or ``once`` is done).

    Targets are ``resources`` (resolved to sockets as ``devctl plugins``
    does) and ``sockets``; with neither, every socket in the plugins dir,
    including ones that appear later. Raises :class:`UnknownTarget` (or
    :class:`NoPluginsDir`) before the first item when a target does not
    exist and ``wait`` is false. With ``once``, ends after each target's
    snapshot (or its first failure, without ``wait``). Close it with
    ``contextlib.aclosing`` so its streams are cancelled at once.
    """
    resolver = _CachedResolver(resolve or (lambda: resolve_plugins(paths, timeout)))
    out: asyncio.Queue[WatchItem] = asyncio.Queue()
    followers: list[_Follower] = []
    tasks: list[asyncio.Future[None]] = []

    def start(resource: str | None, socket: str | None, fixed: bool) -> None:
        f = _Follower(
            out,
            resolver,
            resource=resource,
            socket=socket,
            fixed_socket=fixed,
            wait=wait,
            once=once,
            timeout=timeout,
            backoff=backoff(),
        )
        followers.append(f)
        tasks.append(asyncio.ensure_future(f.run()))

    whole_node = not resources and not sockets
    socket_paths = [_absolute(s) for s in sockets]
    if not wait:
        _check_targets(paths, socket_paths, whole_node)
        if resources:
            served = set((await resolver()).values())
            unknown = [r for r in resources if r not in served]
            if unknown:
                raise UnknownTarget(_not_served(paths, unknown, served))

    try:
        for r in dict.fromkeys(resources):
            start(r, None, False)
        for s in dict.fromkeys(socket_paths):
            start(None, s, True)
        if whole_node:
            known: set[str] = set()
            if once:
                for s in plugin_sockets(paths.plugins_dir, paths.root):
                    start(None, s, True)
            else:
                tasks.append(
                    asyncio.ensure_future(
                        _discover(paths.plugins_dir, lambda s: start(None, s, True), known, out, paths.root)
                    )
                )
        if udev and not once:
            tasks.append(asyncio.ensure_future(_forward_udev(out)))
        if once:

            async def settle() -> None:
                await asyncio.gather(*(f.settled.wait() for f in followers))
                out.put_nowait(_DONE)  # type: ignore[arg-type]

            tasks.append(asyncio.ensure_future(settle()))
        while True:
            item = await out.get()
            if item is _DONE:
                return
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
