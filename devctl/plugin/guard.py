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

One case cannot be decided from the node: a plugin that neither devctl nor a
registration names, whose every device is unhealthy and held by nobody (or
that lists none). The kubelet reports healthy devices only, so it may serve
any resource; the guard counts it as a possible server and says so.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from devctl.model import CHECKPOINT, PLUGINS, POD_RESOURCES, NodePaths
from devctl.node.sockets import real_path, serving_sockets, unnamed_sockets


@dataclass(frozen=True)
class LiveServer:
    """A live plugin that serves the resource (``certain``), or may (``why`` says why it cannot be told)."""

    where: str  # the live socket, and the socket that leads to it when that differs
    certain: bool = True
    why: str | None = None

    def refusal(self, resource: str, doing: str) -> str:
        """The one line that refuses ``doing`` (e.g. "registering it again") without --force."""
        if self.certain:
            return (
                f"{resource} is already served by the live plugin at {self.where}; {doing} "
                "would take it from that plugin (use --force to do it anyway)"
            )
        return (
            f"{resource} may already be served by the live plugin at {self.where} ({self.why}); {doing} "
            "would take it from that plugin if it does (use --force to do it anyway)"
        )


async def live_server_for(
    resource: str, paths: NodePaths, timeout: float, *, exclude: Collection[str] = ()
) -> LiveServer | None:
    """A live plugin (not one in ``exclude``) that serves ``resource`` or may; None when none can."""
    from devctl.collect import collect

    snapshot = await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT})
    skip = {real_path(None, p) for p in exclude}
    for probe, dial in serving_sockets(paths, snapshot.plugins, resource):
        if dial in skip or real_path(None, probe.socket) in skip:
            continue
        return LiveServer(dial if dial == probe.socket else f"{dial} (through {probe.socket})")
    for probe, dial in unnamed_sockets(paths, snapshot.plugins):
        if dial in skip or real_path(None, probe.socket) in skip:
            continue
        where = dial if dial == probe.socket else f"{dial} (through {probe.socket})"
        what = f"all {len(probe.devices)} of its devices are unhealthy" if probe.devices else "it lists no devices"
        return LiveServer(where, certain=False, why=f"{what}, and the kubelet names healthy devices only")
    return None
