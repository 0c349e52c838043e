"""Which sockets to follow, and which resource each serves.

The kubelet never says which socket serves which resource (Register's
endpoint is kept in memory only). ``plugin_sockets`` lists the candidates;
a socket is named from its own first device list (``name_from_ids``), which
the watch reads from the stream it keeps, so no socket waits for another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from devctl.model import Device, NodePaths, PluginStatus

log = logging.getLogger(__name__)

# socket path -> resource name (None when not known); see resolve_plugins.
Resolver = Callable[[], Awaitable[Mapping[str, str | None]]]
# (socket path, its first device list) -> the resource it serves, None when not known.
Namer = Callable[[str, Sequence[Device]], Awaitable[str | None]]


def plugin_sockets(plugins_dir: str) -> list[str]:
    """Every unix socket in the plugins dir except the kubelet's own ``kubelet.sock``."""
    out = []
    try:
        entries = list(os.scandir(plugins_dir))
    except OSError:
        return out
    for entry in entries:
        if entry.name == "kubelet.sock":
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                out.append(os.path.abspath(entry.path))
    return sorted(out)


async def resolve_plugins(paths: NodePaths, timeout: float) -> dict[str, str | None]:
    """Which resource each plugin socket serves, as ``devctl plugins`` infers it (devctl.collect).

    The kubelet never says which socket serves which resource; collect matches
    each socket's device IDs with those pod-resources and the checkpoint name.
    """
    from devctl.collect import collect
    from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES

    snapshot = await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT})
    return {_absolute(p.socket): p.resource for p in snapshot.plugins if p.status == PluginStatus.SERVING}


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


def _absolute(path: str) -> str:
    return os.path.abspath(path)


def by_resolver(resolver: _CachedResolver) -> Namer:
    """A namer that asks a resolver (the TUI's last poll, a test's mapping) and ignores the list."""

    async def name(socket: str, devices: Sequence[Device]) -> str | None:
        return await resolver.resource_of(socket)

    return name


class FromKnownIds:
    """Names a socket by matching its first list with the device IDs the kubelet knows (``infer_resource``).

    Those come from pod-resources and the checkpoint only, never from probing
    the other plugin sockets, so one hung plugin delays nobody's name. They are
    read again at most every ``ttl`` seconds: pod-resources' rate limit is
    shared by every client of the node (kubelet-contract.md).
    """

    def __init__(self, paths: NodePaths, timeout: float, ttl: float = 1.0):
        self._paths = paths
        self._timeout = timeout
        self._ttl = ttl
        self._lock = asyncio.Lock()
        self._at = -1e9
        self._known: dict[str, set[str]] = {}

    async def _ids(self) -> dict[str, set[str]]:
        from devctl.collect import collect, known_device_ids
        from devctl.model import CHECKPOINT, POD_RESOURCES

        async with self._lock:
            if time.monotonic() - self._at > self._ttl:
                try:
                    s = await collect(self._paths, self._timeout, want={POD_RESOURCES, CHECKPOINT})
                    self._known = known_device_ids(s.allocatable, s.pods, s.checkpoint)
                except Exception as e:  # a failed read means "not known yet", never a crash
                    log.debug("reading the kubelet's device IDs failed: %s", e)
                    self._known = {}
                self._at = time.monotonic()
            return self._known

    async def prime(self) -> None:
        """Read the kubelet's IDs now, while the sockets are dialled, so naming the first of them waits less."""
        await self._ids()

    async def __call__(self, socket: str, devices: Sequence[Device]) -> str | None:
        from devctl.collect import infer_resource

        return infer_resource((d.id for d in devices), await self._ids())
