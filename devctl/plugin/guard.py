"""Read-only by default: find a live plugin that already serves a resource before we register it.

When two plugins register the same resource the newer one takes it, and older
kubelets tear the newer one down when the older stream ends
(pkg/kubelet/cm/devicemanager/manager.go, registerEndpoint / markResourceUnhealthy).
A debugging plugin that registers over a real one therefore disturbs real
workloads, so ``devctl plugin serve`` refuses unless the person insists.

Which socket serves the resource is answered exactly as the views answer it
(``devctl.collect`` and the resolver in ``devctl.node.sockets``): registry
sockets and symlinks count, a device list of any health counts, and an empty
list counts when a registration names it. A guard weaker than ``devctl ls``
is how a person takes a resource over at the moment its plugin reports every
device unhealthy, which is when they reach for a debugging plugin.
"""

from __future__ import annotations

from collections.abc import Collection

from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES, NodePaths
from devctl.node.sockets import real_path, serving_sockets


async def live_server_for(
    resource: str, paths: NodePaths, timeout: float, *, exclude: Collection[str] = ()
) -> str | None:
    """Where a live plugin (not one in ``exclude``) already serves ``resource``, as one phrase; None when none does.

    The phrase is the live socket, and the socket that leads to it when that
    differs (a symlink in the plugins dir, or a registry socket).
    """
    from devctl.collect import collect

    snapshot = await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT})
    skip = {real_path(None, p) for p in exclude}
    for probe, dial in serving_sockets(paths, snapshot.plugins, resource):
        if dial in skip or real_path(None, probe.socket) in skip:
            continue
        return dial if dial == probe.socket else f"{dial} (through {probe.socket})"
    return None
