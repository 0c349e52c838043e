"""Live ListAndWatch streams of many plugins, turned into one timeline of events.

The kubelet's device manager sees a plugin only through its ListAndWatch
stream: every message is the full device list
(pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go). A person watching a
device go bad wants the *changes*, so each list is diffed against the one
before it (``diff``). We open our own stream on each plugin socket and follow
plugin and kubelet restarts with backoff (``follow``), find the sockets of
named resources by dialling them all at once (``follow.Scouts``), follow DRA
drivers' health streams on the same timeline (``dra``: named ones, or every
driver of the registry in a whole-node watch), and optionally merge kernel
device events (``node/udev.py``). The items themselves are in
``devctl.core.events``.

This is core code: no UI imports, no printing. The CLI (``devctl watch``) and
the TUI's event log consume the same async generator, :func:`watch`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Callable, Sequence

from devctl.base.backoff import Backoff
from devctl.base.errors import DevctlError
from devctl.base.waits import cancel_and_wait
from devctl.core.events import (
    ADDED,
    DISCONNECTED,
    HEALTH,
    NO_TOPOLOGY,
    RECONNECTED,
    REMOVED,
    SNAPSHOT,
    TOPOLOGY,
    Change,
    Notice,
    WatchEvent,
    numa_text,
)
from devctl.core.failures import UnknownResource
from devctl.core.watch.diff import counts, diff
from devctl.core.watch.dra import DraFollower
from devctl.core.watch.follow import Follower, Reconnecting, Scouts, WatchItem, now
from devctl.core.watch.sockets import (
    DISCOVERY_POLL,
    CachedResolver,
    FromKnownIds,
    Namer,
    Registered,
    Resolver,
    by_resolver,
    device_sockets,
    discover,
    inode_of,
    plugin_sockets,
    resolve_plugins,
    socket_resources,
)
from devctl.model import NodePaths
from devctl.node.dra import Driver, driver_at, find_drivers
from devctl.node.paths import not_a_node
from devctl.node.rpc import RpcFailure
from devctl.node.sockets import OutsideRoot, SocketFile, registry_sockets
from devctl.node.udev import UdevUnavailable, kernel_events


class WatchError(DevctlError):
    """A watch that cannot start; ``message`` is one line for a person."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UnknownTarget(WatchError):
    """A named resource no socket serves, or a named socket that does not exist (and no ``wait``)."""


class ResourceNotServed(UnknownTarget, UnknownResource):
    """A named resource no socket serves, while the plugins dir is there: the name is likely wrong."""


class NoRights(WatchError):
    """The plugin sockets refuse devctl (connecting needs write permission on them): nothing could be watched."""


class NoPluginsDir(WatchError):
    """The whole node or a resource was to be watched, but the plugins dir does not exist (and no ``wait``)."""


def _absolute(path: str) -> str:
    return os.path.abspath(path)


def _device_sockets(paths: NodePaths, registered: Registered) -> list[str]:
    """Every device-plugin socket to dial: the plugins dir's, and those registered in ``plugins_registry/``."""
    return list(device_sockets(paths.plugins_dir, paths.root, registered))


async def _discover(
    paths: NodePaths,
    registered: Registered,
    start: Callable[[str], None],
    known: set[str],
    out: asyncio.Queue[WatchItem],
) -> None:
    """Follow every new device-plugin socket, in the plugins dir or registered in the registry (whole-node watch)."""
    plugins_dir = paths.plugins_dir
    said_empty = False

    def found(sockets: dict[str, str]) -> None:
        nonlocal said_empty
        if not sockets and not known and not said_empty and registered.settled():
            out.put_nowait(Notice(now(), f"no device plugin sockets in {plugins_dir} yet; waiting for one"))
            said_empty = True
        for socket in sockets:
            if socket not in known:
                known.add(socket)
                start(socket)

    await discover(plugins_dir, paths.root, registered, found, DISCOVERY_POLL)


async def _discover_drivers(paths: NodePaths, timeout: float, start: Callable[[Driver], None]) -> None:
    """Follow every DRA driver that registers in ``plugins_registry/``, now or later (whole-node watch).

    Each registration socket is asked GetInfo once per file (a new inode is a
    restarted driver: asked again), each on its own: a driver is followed as
    soon as its own socket answers, whatever a hung one beside it does. One
    that does not answer yet is asked again at a later look. A driver already
    followed is not started twice: its own follower reconnects across restarts.
    """
    asked: dict[str, int | None] = {}  # listed path -> inode of the file that answered
    asking: dict[str, asyncio.Future[None]] = {}  # listed path -> its GetInfo under way
    following: set[str] = set()

    async def ask(socket: SocketFile) -> None:
        try:
            driver = await driver_at(paths, socket, timeout)
        except (RpcFailure, OutsideRoot):
            return  # not answering (yet), or an endpoint outside the root: `devctl plugins` says which
        finally:
            asking.pop(socket.path, None)
        asked[socket.path] = inode_of(socket.real)
        if driver is not None and driver.name not in following:  # None: not a DRA driver's registration
            following.add(driver.name)
            start(driver)

    try:
        while True:
            try:
                found = registry_sockets(paths.plugins_registry, paths.root)
            except OSError:
                found = []  # no registry (yet): most nodes without DRA or CSI drivers
            for s in found:
                if s.path not in asking and (s.path not in asked or asked[s.path] != inode_of(s.real)):
                    asking[s.path] = asyncio.ensure_future(ask(s))
            await asyncio.sleep(DISCOVERY_POLL)
    finally:
        await cancel_and_wait(*asking.values())


async def _forward_udev(out: asyncio.Queue[WatchItem]) -> None:
    try:
        async for event in kernel_events(on_notice=lambda m: out.put_nowait(Notice(now(), m))):
            out.put_nowait(event)
    except UdevUnavailable as e:
        out.put_nowait(Notice(now(), f"{e}; going on without kernel device events"))


_DONE = object()


def _check_targets(paths: NodePaths, sockets: Sequence[str], whole_node: bool, drivers: bool) -> None:
    """Refuse named sockets that do not exist, and a whole-node watch without a plugins dir or without rights.

    A whole-node watch of a node whose every plugin socket refuses devctl (and
    no DRA driver answered) would retry for ever, one "permission denied" per
    socket: it is the user's rights, said once as the read commands say it.
    """
    missing = [s for s in sockets if not os.path.exists(s)]
    if missing:
        raise UnknownTarget(f"{missing[0]}: no such socket (use --wait to wait for it)")
    if whole_node and not os.path.isdir(paths.plugins_dir):
        raise NoPluginsDir(f"{not_a_node(paths)} (use --wait to wait for plugins)")
    found = plugin_sockets(paths.plugins_dir, paths.root) if whole_node and not drivers else []
    if found and not any(os.access(s, os.W_OK) for s in found):
        raise NoRights(f"none of the {len(found)} plugin socket(s) in {paths.plugins_dir} lets devctl connect")


def _not_served(paths: NodePaths, unknown: Sequence[str], served: set[str | None]) -> WatchError:
    """Why named resources cannot be watched, with what a person most likely needs to hear.

    No plugins dir: the wrong root, most likely. Sockets that refuse devctl:
    rights. Else the name itself is wrong (exit 1 in the CLI, as in ``ls``).

    Connecting to a unix socket needs write permission on it: a user who lacks
    it sees no plugin serve anything, which is not the same as none serving.
    """
    from devctl.base.names import likely

    if not os.path.isdir(paths.plugins_dir):
        return NoPluginsDir(not_a_node(paths))
    denied = [s for s in plugin_sockets(paths.plugins_dir, paths.root) if not os.access(s, os.W_OK)]
    if denied:
        return NoRights(f"no plugin serves {', '.join(unknown)} that devctl may open")
    close = likely(unknown[0], (r for r in served if r))
    hint = f"did you mean {close}? see `devctl plugins`" if close else "see `devctl plugins`; use --wait to wait for it"
    return ResourceNotServed(f"no plugin serves {', '.join(unknown)} ({hint})")


async def _served_or_settled(scouts: Scouts, resources: Sequence[str]) -> list[str]:
    """Wait until each resource has a socket, or every socket has answered or timed out; the unserved ones."""
    while True:
        unknown = [r for r in resources if not scouts.serving(r)]
        if not unknown or scouts.settled():
            return unknown
        await scouts.changed(0.1)


def _namer(paths: NodePaths, timeout: float, resolve: Resolver | None, registered: Registered) -> Namer:
    """How a socket is named: by ``resolve`` when given, else from the device IDs the kubelet knows."""
    if resolve is not None:
        return by_resolver(CachedResolver(resolve))
    return FromKnownIds(paths, timeout, registered=registered)


async def _drivers(paths: NodePaths, timeout: float, wanted: Sequence[str], every: bool) -> dict[str, Driver]:
    """The DRA drivers to follow: ``every`` one registered now, else those of the ``wanted`` names."""
    if every:
        return await find_drivers(paths, timeout)
    # A name a DRA driver registered is that driver's health stream, not a device-plugin resource.
    # Driver names are DNS names, never with the "/" every extended resource has: a watch of
    # resources only asks no registry socket anything, and waits for none.
    maybe_drivers = [r for r in wanted if "/" not in r]
    return await find_drivers(paths, timeout, maybe_drivers) if maybe_drivers else {}


def _follow_whole_node(
    paths: NodePaths,
    registered: Registered,
    timeout: float,
    once: bool,
    start: Callable[[str | None, str | None], None],
    start_driver: Callable[[Driver], None],
    out: asyncio.Queue[WatchItem],
) -> list[asyncio.Future[None]]:
    """Every device plugin socket followed: those there now (``once``), else the tasks that find them as they come."""
    if once:
        for s in _device_sockets(paths, registered):
            start(None, s)
        return []
    known: set[str] = set()
    discover = _discover(paths, registered, lambda s: start(None, s), known, out)
    return [
        asyncio.ensure_future(discover),
        asyncio.ensure_future(_discover_drivers(paths, timeout, start_driver)),
    ]


async def _done_when_settled(followers: Sequence[Reconnecting], out: asyncio.Queue[WatchItem]) -> None:
    """``once``: the end of the timeline, after each follower's snapshot (or its failure)."""
    await asyncio.gather(*(f.settled.wait() for f in followers))
    out.put_nowait(_DONE)  # type: ignore[arg-type]


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
) -> AsyncGenerator[WatchItem, None]:
    """Yield events of every target on one timeline, until the caller stops (or ``once`` is done).

    Targets are ``resources`` (device-plugin resources or DRA driver names)
    and ``sockets``; with neither, every socket in the plugins dir and every
    DRA driver in ``plugins_registry/``, including ones that appear later. A socket is named from
    its own first list (the device IDs the kubelet knows, or ``resolve``'s
    mapping when given), so a resource's stream starts as soon as its socket
    answers, whatever other sockets do. Raises :class:`UnknownTarget` (or
    :class:`NoPluginsDir`) before the first item when a target does not
    exist and ``wait`` is false. With ``once``, ends after each target's
    snapshot (or its first failure, without ``wait``). Close it with
    ``contextlib.aclosing`` so its streams are cancelled at once.
    """
    out: asyncio.Queue[WatchItem] = asyncio.Queue()
    # Plugins registered through plugins_registry/ are found as `devctl plugins` finds them (devctl.node.sockets).
    registered = Registered(paths, timeout, lambda m: out.put_nowait(Notice(now(), m)))
    name = _namer(paths, timeout, resolve, registered)
    followers: list[Reconnecting] = []
    tasks: list[asyncio.Future[None]] = []
    wanted = list(dict.fromkeys(resources))
    whole_node = not resources and not sockets
    drivers = await _drivers(paths, timeout, wanted, whole_node and once)
    wanted = [r for r in wanted if r not in drivers]
    scouts = Scouts(paths.plugins_dir, set(wanted), name, timeout, paths.root, registered) if wanted else None

    def start(resource: str | None, socket: str | None) -> None:
        f = Follower(
            out,
            name,
            resource=resource,
            socket=socket,
            scouts=scouts if resource is not None else None,
            wait=wait,
            once=once,
            timeout=timeout,
            backoff=backoff(),
        )
        followers.append(f)
        tasks.append(asyncio.ensure_future(f.run()))

    def start_driver(driver: Driver) -> None:
        dra = DraFollower(out, driver, wait=wait, once=once, timeout=timeout, backoff=backoff())
        followers.append(dra)
        tasks.append(asyncio.ensure_future(dra.run()))

    socket_paths = [_absolute(s) for s in sockets]
    if not wait:
        _check_targets(paths, socket_paths, whole_node, bool(drivers))
    try:
        if isinstance(name, FromKnownIds):
            tasks.append(asyncio.ensure_future(name.prime()))
        if (scouts is not None or whole_node) and not once:
            tasks.append(asyncio.ensure_future(registered.run()))
        elif scouts is not None or whole_node:
            await registered.settle()
        if scouts is not None:
            tasks.append(asyncio.ensure_future(scouts.run()))
            if not wait:
                unknown = await _served_or_settled(scouts, wanted)
                if unknown:
                    raise _not_served(paths, unknown, scouts.names())
        for r in wanted:
            start(r, None)
        for driver in drivers.values():
            start_driver(driver)
        for s in dict.fromkeys(socket_paths):
            start(None, s)
        if whole_node:
            tasks += _follow_whole_node(paths, registered, timeout, once, start, start_driver, out)
        if udev and not once:
            tasks.append(asyncio.ensure_future(_forward_udev(out)))
        if once:
            tasks.append(asyncio.ensure_future(_done_when_settled(followers, out)))
        while True:
            item = await out.get()
            if item is _DONE:
                return
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "ADDED",
    "DISCONNECTED",
    "DISCOVERY_POLL",
    "HEALTH",
    "NO_TOPOLOGY",
    "RECONNECTED",
    "REMOVED",
    "SNAPSHOT",
    "TOPOLOGY",
    "Backoff",
    "Change",
    "NoPluginsDir",
    "NoRights",
    "Notice",
    "Resolver",
    "ResourceNotServed",
    "UnknownTarget",
    "WatchError",
    "WatchEvent",
    "WatchItem",
    "counts",
    "diff",
    "numa_text",
    "plugin_sockets",
    "resolve_plugins",
    "socket_resources",
    "watch",
]
