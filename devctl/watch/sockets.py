"""Which sockets to follow, and which resource each serves.

The kubelet never says which socket serves which resource (Register's
endpoint is kept in memory only). ``plugin_sockets`` lists the candidates;
a socket is named from its own first device list (``name_from_ids``), which
the watch reads from the stream it keeps, so no socket waits for another.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from devctl.model import Device, NodePaths, NodeSnapshot, PluginProbe, PluginStatus
from devctl.node import sockets as node_sockets

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


# How old a resolution may be when it did not know a socket asked about: it is asked again sooner.
MISS_TTL = 0.05


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

    async def __call__(self, ttl: float | None = None) -> Mapping[str, str | None]:
        async with self._lock:
            if time.monotonic() - self._at > (self._ttl if ttl is None else ttl):
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
        name = (await self()).get(socket)
        if name is None:  # not known a moment ago: maybe by now (the first poll was still going on)
            name = (await self(ttl=MISS_TTL)).get(socket)
        return name


def by_resolver(resolver: _CachedResolver) -> Namer:
    """A namer that asks a resolver (the TUI's last poll, a test's mapping) and ignores the list."""

    async def name(socket: str, devices: Sequence[Device]) -> str | None:
        return await resolver.resource_of(socket)

    return name


class FromKnownIds:
    """Names a socket from its first list by the one resolver every view uses (``devctl.node.sockets``).

    A running devctl plugin's control socket names its socket; else the list is
    matched with the device IDs the kubelet knows. Both come from the kubelet's
    sources and devctl's own control sockets only, never from probing the
    other plugin sockets, so one hung plugin delays nobody's name. They are
    read again at most every ``ttl`` seconds: pod-resources' rate limit is
    shared by every client of the node (kubelet-contract.md).
    """

    def __init__(self, paths: NodePaths, timeout: float, ttl: float = 1.0):
        self._paths = paths
        self._timeout = timeout
        self._ttl = ttl
        self._lock = asyncio.Lock()
        self._at = -1e9
        self._known: Mapping[str, set[str]] = {}
        self._claimed: Mapping[str, str] = {}

    async def _ids(self) -> tuple[Mapping[str, set[str]], Mapping[str, str]]:
        from devctl.collect import claimed_sockets, collect
        from devctl.model import CHECKPOINT, POD_RESOURCES

        async with self._lock:
            if time.monotonic() - self._at > self._ttl:
                try:
                    s, self._claimed = await asyncio.gather(
                        collect(self._paths, self._timeout, want={POD_RESOURCES, CHECKPOINT}),
                        claimed_sockets(self._paths, self._timeout),
                    )
                    self._known = node_sockets.known_ids(s.allocatable, s.pods, s.checkpoint)
                except Exception as e:  # a failed read means "not known yet", never a crash
                    log.debug("reading the kubelet's device IDs failed: %s", e)
                    self._known, self._claimed = {}, {}
                self._at = time.monotonic()
            return self._known, self._claimed

    async def prime(self) -> None:
        """Read the kubelet's IDs now, while the sockets are dialled, so naming the first of them waits less."""
        await self._ids()

    async def __call__(self, socket: str, devices: Sequence[Device]) -> str | None:
        known, claimed = await self._ids()
        probe = PluginProbe(socket=socket, status=PluginStatus.SERVING, devices=tuple(devices))
        return node_sockets.name_sockets(self._paths, [probe], known, claimed)[0].resource
