"""Read-only by default: find a live plugin that already serves a resource before we register it.

When two plugins register the same resource the newer one takes it, and older
kubelets tear the newer one down when the older stream ends
(pkg/kubelet/cm/devicemanager/manager.go, registerEndpoint / markResourceUnhealthy).
A debugging plugin that registers over a real one therefore disturbs real
workloads, so ``devctl plugin serve`` refuses unless the person insists.

Plugin sockets do not say which resource they serve. The kubelet knows the
resource's healthy device IDs (pod-resources GetAllocatableResources, and the
checkpoint's RegisteredDevices); a live socket whose device list shares those
IDs serves the resource. A running devctl plugin also says so itself on its
control socket.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Collection

from devctl.model import NodePaths
from devctl.node.checkpoint import CheckpointError, read_checkpoint
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.podresources import PodResourcesClient
from devctl.node.rpc import RpcFailure
from devctl.plugin import control

log = logging.getLogger(__name__)


async def known_device_ids(resource: str, paths: NodePaths, timeout: float) -> set[str]:
    """The resource's device IDs as the kubelet knows them; empty when no source answers."""

    async def allocatable() -> set[str]:
        try:
            async with PodResourcesClient(paths.pod_resources, timeout) as client:
                got = await asyncio.wait_for(client.allocatable(), timeout)
        except (RpcFailure, asyncio.TimeoutError) as e:
            log.debug("guard: pod-resources not read: %s", getattr(e, "message", "timed out"))
            return set()
        return {i for d in got.devices if d.resource == resource for i in d.ids}

    async def registered() -> set[str]:
        try:
            checkpoint = await asyncio.to_thread(read_checkpoint, paths.checkpoint)
        except (OSError, CheckpointError) as e:
            log.debug("guard: checkpoint not read: %s", e)
            return set()
        return set(checkpoint.registered_devices.get(resource, ()))

    a, r = await asyncio.gather(allocatable(), registered())
    return a | r


def plugin_sockets(plugins_dir: str, exclude: Collection[str] = ()) -> list[str]:
    """Every unix socket in the plugins dir but the kubelet's own and those in ``exclude``."""
    try:
        entries = list(os.scandir(plugins_dir))
    except OSError:
        return []
    skip = _absolute(exclude)
    return sorted(
        e.path for e in entries if e.name != "kubelet.sock" and os.path.abspath(e.path) not in skip and _is_socket(e)
    )


def _absolute(paths: Collection[str]) -> set[str]:
    return {os.path.abspath(p) for p in paths}


def _is_socket(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return False


async def live_server_for(
    resource: str, paths: NodePaths, timeout: float, *, exclude: Collection[str] = (), control_dir: str | None = None
) -> str | None:
    """The socket path of a live plugin (not one in ``exclude``) already serving ``resource``, or None.

    Looks at a running devctl plugin's control socket first (``control_dir``),
    then matches the first ListAndWatch list of every live socket in the plugins
    dir, concurrently and under ``timeout``, with the IDs the kubelet knows.
    """
    skip = _absolute(exclude)
    if control_dir is not None:
        infos = await control.running(control_dir, timeout)
        served = [info.get("socket") for _, info in infos if info.get("resource") == resource]
        live = sorted(_absolute([s for s in served if isinstance(s, str)]) - skip)
        if live:
            return live[0]
    known = await known_device_ids(resource, paths, timeout)
    if not known:
        return None
    sockets = plugin_sockets(paths.plugins_dir, exclude)

    async def overlap(path: str) -> int:
        try:
            async with DevicePluginClient(path, timeout) as client:
                devices = await asyncio.wait_for(client.first_list(), timeout)
        except (RpcFailure, asyncio.TimeoutError):
            return 0  # stale, silent or forbidden: not serving anything now
        return len(known & {d.id for d in devices})

    counts = await asyncio.gather(*(overlap(p) for p in sockets))
    best = max(zip(counts, sockets, strict=True), key=lambda pair: pair[0], default=(0, ""))
    return best[1] if best[0] else None
