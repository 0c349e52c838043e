"""Which sockets to follow, and which resource each serves.

The kubelet never says which socket serves which resource (Register's
endpoint is kept in memory only). ``plugin_sockets`` lists the candidates;
a socket is named from its own first device list (``name_from_ids``), which
the watch reads from the stream it keeps, so no socket waits for another.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Generic, TypeVar

from devctl.model import DEVICE_PLUGIN_TYPE, Device, NodePaths, NodeSnapshot, PluginProbe, PluginStatus, RegistryInfo
from devctl.node import sockets as node_sockets
from devctl.node.rpc import RpcFailure

log = logging.getLogger(__name__)

# socket path -> resource name (None when not known); see resolve_plugins.
Resolver = Callable[[], Awaitable[Mapping[str, str | None]]]
# (socket path, its first device list) -> the resource it serves, None when not known.
Namer = Callable[[str, Sequence[Device]], Awaitable[str | None]]


def plugin_sockets(plugins_dir: str, root: str | None = None) -> list[str]:
    """Every plugin socket of the plugins dir, as the file to dial (see devctl.node.sockets); [] when unreadable."""
    try:
        return [s.real for s in node_sockets.plugin_sockets(plugins_dir, root)]
    except OSError:
        return []


def device_sockets(plugins_dir: str, root: str | None, registered: Registered | None) -> dict[str, str]:
    """Every device-plugin socket to dial -> the name it is listed under, as ``devctl plugins`` shows it.

    The plugins dir's sockets (a symlink named as listed, dialled as its
    target) and those registered in ``plugins_registry/`` (named by their
    registration); [] when the plugins dir cannot be read.
    """
    try:
        found = {s.real: s.path for s in node_sockets.plugin_sockets(plugins_dir, root)}
    except OSError:
        found = {}
    if registered is not None:
        for dial, path in registered.named().items():
            found.setdefault(dial, path)
    return found


# How often the plugins dir is listed for new sockets when every socket is followed.
DISCOVERY_POLL = 0.5

# The sockets found at one look: each socket to dial -> its listed name (``device_sockets``).
Found = Callable[[dict[str, str]], None]


async def discover(
    plugins_dir: str,
    root: str | None,
    registered: Registered | None,
    found: Found,
    poll: float,
    *,
    scan_registry: bool = False,
) -> None:
    """The one loop that looks for device-plugin sockets (whole-node watch, the exporter): ``found`` every ``poll``.

    With ``scan_registry`` it also lists ``plugins_registry/`` for ``registered`` at each look, instead of a loop
    of its own (``Registered.run``) waking up as often: the exporter's idle cost.
    """
    while True:
        if scan_registry and registered is not None:
            registered.scan()
        found(device_sockets(plugins_dir, root, registered))
        await asyncio.sleep(poll)


# How often ``plugins_registry/`` is listed, and when a registration that did not answer is asked again.
REGISTRY_POLL = 0.5
REGISTRY_RETRY = 2.0


class _Asked:
    def __init__(self, inode: int | None):
        self.inode = inode
        self.info: RegistryInfo | None = None  # a device plugin's registration, once it answered
        self.dial: str | None = None  # the socket its endpoint names (under the root)
        self.retry_at: float | None = None  # for one that did not answer: when to ask again
        self.task: asyncio.Future[None] | None = None


def inode_of(path: str) -> int | None:
    """The inode of the socket at ``path`` (None when gone): a plugin that restarts binds a new one."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class Registered:
    """Device plugins registered through ``plugins_registry/``: the sockets their registrations name.

    A plugin may register with the plugin watcher instead of the kubelet's
    Registration socket (the upstream device-plugin stub does): a socket in
    ``plugins_registry/`` whose GetInfo says type ``DevicePlugin``, its name
    the resource and its endpoint the DevicePlugin socket, which need not be
    in the plugins dir. ``devctl plugins`` finds it through
    ``devctl.node.sockets``; so does the watch, with this. Each registry
    socket is asked once per file (a new inode is asked again), each on its
    own, so a hung one holds nobody up; one that does not answer is asked
    again later. An endpoint that cannot be dialled (outside the root, no
    path) is said once per registration, naming it once.
    """

    def __init__(self, paths: NodePaths, timeout: float, notice: Callable[[str], None] | None = None):
        self.paths = paths
        self.timeout = timeout
        self.notice = notice
        self.scanned = False
        self._asked: dict[str, _Asked] = {}  # listed registry socket -> what it said
        self._said: dict[str, str] = {}  # listed registry socket -> the last notice given about it

    def sockets(self) -> list[str]:
        """The DevicePlugin sockets that registrations name, each once."""
        return list(self.named())

    def named(self) -> dict[str, str]:
        """Each DevicePlugin socket that a registration names -> the registration's listed path (its first)."""
        named: dict[str, str] = {}
        for path, asked in self._asked.items():
            if asked.dial is not None:
                named.setdefault(asked.dial, path)
        return named

    def probes(self) -> list[PluginProbe]:
        """The registrations as ``devctl.node.sockets.name_sockets`` takes them (the one resolver)."""
        return [
            PluginProbe(socket=s, status=PluginStatus.SERVING, registry=a.info)
            for s, a in self._asked.items()
            if a.info is not None
        ]

    def settled(self) -> bool:
        """Every registry socket listed so far has answered, failed, or passed its deadline."""
        return self.scanned and all(a.task is None or a.task.done() for a in self._asked.values())

    def scan(self) -> None:
        try:
            listed = node_sockets.registry_sockets(self.paths.plugins_registry, self.paths.root)
        except OSError:
            listed = []  # no registry (yet): most nodes register their plugins with the kubelet
        now = time.monotonic()
        by_path = {s.path: s for s in listed}
        for gone in set(self._asked) - set(by_path):
            self._forget(gone)
        for path, s in by_path.items():
            inode = inode_of(s.real)
            asked = self._asked.get(path)
            if asked is not None and asked.inode == inode and (asked.retry_at is None or now < asked.retry_at):
                continue
            if asked is not None:
                self._forget(path)
            asked = self._asked[path] = _Asked(inode)
            asked.task = asyncio.ensure_future(self._ask(s, asked))
        self.scanned = True

    def _forget(self, path: str) -> None:
        asked = self._asked.pop(path)
        if asked.task is not None:
            asked.task.cancel()

    def _say(self, path: str, message: str) -> None:
        if self.notice is not None and self._said.get(path) != message:
            self._said[path] = message
            self.notice(message)

    async def _ask(self, s: node_sockets.SocketFile, asked: _Asked) -> None:
        from devctl.node.connect import check_socket
        from devctl.node.deviceplugin import registry_info

        try:
            await check_socket(s.real, self.timeout)
            info = await registry_info(s.real, self.timeout)
        except (RpcFailure, AttributeError, TypeError) as e:  # not answering (yet), or not a PluginInfo
            log.debug("registry socket %s: %s", s.path, e)
            asked.retry_at = time.monotonic() + REGISTRY_RETRY
            return
        if info.type != DEVICE_PLUGIN_TYPE:
            return  # a DRA or CSI driver: not a device plugin's socket
        asked.info = info
        try:
            asked.dial = node_sockets.registry_endpoint(self.paths, s.path, info)
        except node_sockets.OutsideRoot as e:  # the message names the registration once, and why
            self._say(s.path, str(e))
            return
        self._said.pop(s.path, None)

    async def settle(self) -> None:
        """List the registry and wait until each registration answered or passed its deadline."""
        self.scan()
        await asyncio.gather(*(a.task for a in self._asked.values() if a.task is not None), return_exceptions=True)

    async def run(self) -> None:
        try:
            while True:
                self.scan()
                await asyncio.sleep(REGISTRY_POLL)
        finally:
            self.stop()

    def stop(self) -> None:
        """Cancel the GetInfo calls under way."""
        for asked in self._asked.values():
            if asked.task is not None:
                asked.task.cancel()


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
    """Which resource each plugin socket serves, resolved as every view resolves it (devctl.core.collect)."""
    from devctl.core.collect import collect
    from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES

    return socket_resources(await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT}))


# How old a resolution may be when it did not know a socket asked about: it is asked again sooner.
MISS_TTL = 0.05

T = TypeVar("T")


class Recent(Generic[T]):
    """The one cache of what names sockets: a value read again only once it is ``ttl`` seconds old, one read
    shared by every follower asking at that moment.

    What names a socket comes from pod-resources, whose rate limit is shared by every client of the node
    (kubelet-contract.md), and from probing sockets: ask rarely. A failed read is ``empty`` ("not known
    yet") until the next one, never a crash.
    """

    def __init__(self, read: Callable[[], Awaitable[T]], empty: T, ttl: float, what: str):
        self._read = read
        self._empty = empty
        self._ttl = ttl
        self._what = what
        self._lock = asyncio.Lock()
        self._at = -1e9
        self._value = empty

    async def get(self, ttl: float | None = None) -> T:
        """The value, read again first when it is older than ``ttl`` (the cache's own when None)."""
        async with self._lock:
            if time.monotonic() - self._at > (self._ttl if ttl is None else ttl):
                try:
                    self._value = await self._read()
                except Exception as e:
                    log.debug("%s failed: %s", self._what, e)
                    self._value = self._empty
                self._at = time.monotonic()
            return self._value


class CachedResolver:
    """Names sockets by a resolver's mapping (the TUI's last poll, a test's), read through the one cache."""

    def __init__(self, resolve: Resolver, ttl: float = 0.5):
        self._recent: Recent[Mapping[str, str | None]] = Recent(resolve, {}, ttl, "resolving plugin sockets")

    async def resource_of(self, socket: str) -> str | None:
        name = (await self._recent.get()).get(socket)
        if name is None:  # not known a moment ago: maybe by now (the first poll was still going on)
            name = (await self._recent.get(ttl=MISS_TTL)).get(socket)
        return name


def by_resolver(resolver: CachedResolver) -> Namer:
    """A namer that asks a resolver (the TUI's last poll, a test's mapping) and ignores the list."""

    async def name(socket: str, devices: Sequence[Device]) -> str | None:
        return await resolver.resource_of(socket)

    return name


class FromKnownIds:
    """Names a socket from its first list by the one resolver every view uses (``devctl.node.sockets``).

    A registration in ``plugins_registry/`` (``registered``) or a running devctl
    plugin's control socket names its socket; else the list is
    matched with the device IDs the kubelet knows. Both come from the kubelet's
    sources and devctl's own control sockets only, never from probing the
    other plugin sockets, so one hung plugin delays nobody's name. They are
    read again at most every ``ttl`` seconds: pod-resources' rate limit is
    shared by every client of the node (kubelet-contract.md).
    """

    def __init__(self, paths: NodePaths, timeout: float, ttl: float = 1.0, registered: Registered | None = None):
        self._paths = paths
        self._registered = registered
        self._timeout = timeout
        self._recent: Recent[tuple[Mapping[str, set[str]], Mapping[str, str]]] = Recent(
            self._read, ({}, {}), ttl, "reading the kubelet's device IDs"
        )

    async def _read(self) -> tuple[Mapping[str, set[str]], Mapping[str, str]]:
        from devctl.core.collect import claimed_sockets, collect
        from devctl.model import CHECKPOINT, POD_RESOURCES

        s, claimed = await asyncio.gather(
            collect(self._paths, self._timeout, want={POD_RESOURCES, CHECKPOINT}),
            claimed_sockets(self._paths, self._timeout),
        )
        return node_sockets.known_ids(s.allocatable, s.pods, s.checkpoint), claimed

    async def prime(self) -> None:
        """Read the kubelet's IDs now, while the sockets are dialled, so naming the first of them waits less."""
        await self._recent.get()

    async def __call__(self, socket: str, devices: Sequence[Device]) -> str | None:
        known, claimed = await self._recent.get()
        probe = PluginProbe(socket=socket, status=PluginStatus.SERVING, devices=tuple(devices))
        registrations = self._registered.probes() if self._registered is not None else []
        return node_sockets.name_sockets(self._paths, [probe, *registrations], known, claimed)[0].resource
