"""Read-only by default: find a live plugin that already serves a resource before we register it.

When two plugins register the same resource the newer one takes it, and older
kubelets tear the newer one down when the older stream ends
(pkg/kubelet/cm/devicemanager/manager.go, registerEndpoint / markResourceUnhealthy).
A debugging plugin that registers over a real one therefore disturbs real
workloads, so ``devctl plugin serve`` refuses unless the person insists.

Which socket serves the resource is answered exactly as the views answer it
(``devctl.core.collect`` and the resolver in ``devctl.node.sockets``): registry
sockets and symlinks count, a device list of any health counts, and an empty
list counts when a registration names it. A guard weaker than ``devctl ls``
is how a person takes a resource over at the moment its plugin reports every
device unhealthy, which is when they reach for a debugging plugin.

One case cannot be decided from the node: a plugin that neither devctl nor a
registration names, whose every device is unhealthy and held by nobody (or
that lists none). The kubelet reports healthy devices only, so it may serve
any resource; the guard counts it as a possible server and says so.

The guard fails closed: it lets a resource be taken only when it can prove
nobody serves it. Whatever it cannot read is "may serve", refused without
--force: the plugin sockets' directories that cannot be listed, a live socket
that did not answer in time (or refused devctl, or answered something else),
a registration whose endpoint cannot be resolved (a hostile string: a NUL,
``..`` out of the root, a ``unix:`` target), and, when neither the kubelet's
allocatable list nor its checkpoint could be read, a live plugin that cannot
be tied to its resource, and a resource the kubelet lists healthy devices of
that no socket devctl sees serves (a registration's endpoint in a
subdirectory, a socket unlinked while its stream runs). Only what proves nobody listens is "nobody": a
missing socket, a stale one, a file that is not a socket. A socket whose
registration names another resource cannot serve this one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from devctl.model import (
    CHECKPOINT,
    DEVICE_PLUGIN_TYPE,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
    ErrorKind,
    NodePaths,
    NodeSnapshot,
    PluginStatus,
    Source,
)
from devctl.node.sockets import (
    dial_path,
    real_path,
    serving_sockets,
    shown,
    unnamed_sockets,
)

# What proves that nothing listens on a socket: it cannot serve anything.
_NOBODY = frozenset({ErrorKind.MISSING, ErrorKind.STALE, ErrorKind.NOT_A_SOCKET})
# The errors of the plugin sockets' own source (a socket's failure is in its probe too).
_PLUGIN_SOURCES = frozenset({PLUGINS, PLUGINS_DIR_SOURCE, Source.REGISTRY, Source.PLUGIN})


@dataclass(frozen=True)
class LiveServer:
    """A live plugin that serves the resource (``certain``), or may (``why`` says why it cannot be told)."""

    where: str | None  # the live socket, and the socket that leads to it when that differs; None: not known
    certain: bool = True
    why: str | None = None

    def refusal(self, resource: str, doing: str) -> str:
        """The one line that refuses ``doing`` (e.g. "registering it again") without --force."""
        if self.where is None:
            return (
                f"{resource} may already be served by a live plugin ({self.why}); {doing} "
                "would take it from that plugin if there is one (use --force to do it anyway)"
            )
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
    from devctl.core.collect import collect

    snapshot = await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT})
    skip = {real_path(None, p) for p in exclude}
    for probe, dial in serving_sockets(paths, snapshot.plugins, resource):
        if dial in skip or _real(probe.socket) in skip:
            continue
        return LiveServer(dial if dial == probe.socket else f"{dial} (through {probe.socket})")
    for probe, dial in unnamed_sockets(paths, snapshot.plugins):
        if dial in skip or _real(probe.socket) in skip:
            continue
        where = dial if dial == probe.socket else f"{dial} (through {probe.socket})"
        what = f"all {len(probe.devices)} of its devices are unhealthy" if probe.devices else "it lists no devices"
        return LiveServer(where, certain=False, why=f"{what}, and the kubelet names healthy devices only")
    return _unproven(resource, paths, snapshot, skip)


def _unproven(resource: str, paths: NodePaths, snapshot: NodeSnapshot, skip: Collection[str]) -> LiveServer | None:
    """What the snapshot could not read that may serve ``resource``: fail closed, never open."""
    for e in snapshot.errors:
        # The sockets' directories (or the whole source) unread: any socket in them may serve it. A socket's own
        # failure has the socket as subject, and is its probe's, weighed below.
        if e.source in _PLUGIN_SOURCES and e.subject is None and e.kind != ErrorKind.MISSING:
            return LiveServer(None, certain=False, why=f"the plugin sockets could not be read: {shown(e.message)}")
    for p in snapshot.plugins:
        if p.status == PluginStatus.SERVING or p.error_kind in _NOBODY or p.status == PluginStatus.STALE:
            continue
        if p.registry is not None and p.registry.type != DEVICE_PLUGIN_TYPE:
            continue  # a DRA or CSI driver serves no extended resource
        if p.resource is not None and p.resource != resource:
            continue  # registered (or claimed) as another resource
        dial = dial_path(paths, p)
        if (dial is not None and dial in skip) or _real(p.socket) in skip:
            continue
        if p.status == PluginStatus.TIMEOUT:
            why = "it did not answer within the timeout"
        elif dial is None and p.registry is not None:
            why = "its registration's endpoint cannot be resolved"
        else:
            why = "it could not be read"
        return LiveServer(p.socket, certain=False, why=f"{why}: {shown(p.error or p.status.value)}")
    return _unseen_server(resource, snapshot) or _unnamed_unknown(snapshot, paths, skip)


def _unseen_server(resource: str, snapshot: NodeSnapshot) -> LiveServer | None:
    """The kubelet lists healthy devices of ``resource`` that no socket devctl reads serves.

    The kubelet marks a plugin's devices unhealthy the moment its stream ends, so healthy allocatable
    devices mean a live stream: a plugin whose socket devctl cannot see (registered with an endpoint in a
    subdirectory, or unlinked while its stream runs) serves them.
    """
    if snapshot.allocatable is None:
        return None
    ids = {i for d in snapshot.allocatable.devices if d.resource == resource for i in d.ids}
    ids -= {d.id for p in snapshot.plugins for d in p.devices}  # listed by a socket devctl reads (ours too)
    if not ids:
        return None
    why = f"the kubelet lists {len(ids)} healthy device(s) of it that no socket devctl can see lists"
    return LiveServer(None, certain=False, why=why)


def _unnamed_unknown(snapshot: NodeSnapshot, paths: NodePaths, skip: Collection[str]) -> LiveServer | None:
    """A live plugin of unknown resource when the kubelet's lists of devices could not be read at all."""
    if snapshot.allocatable is not None or snapshot.checkpoint is not None:
        return None  # the kubelet's healthy devices are known: an unnamed plugin is not registered
    unread = [
        e
        for e in snapshot.errors
        if e.source in (POD_RESOURCES, CHECKPOINT) and e.kind not in (ErrorKind.MISSING, ErrorKind.STALE)
    ]
    if not unread:
        return None  # no kubelet (nothing there, or nothing listening): nothing is registered
    for p in snapshot.plugins:
        if p.resource is not None or p.status != PluginStatus.SERVING or not p.is_device_plugin:
            continue
        dial = dial_path(paths, p)
        if dial is None or dial in skip or _real(p.socket) in skip:
            continue
        why = f"the kubelet's devices could not be read to tell its resource: {shown(unread[0].message)}"
        return LiveServer(dial if dial == p.socket else f"{dial} (through {p.socket})", certain=False, why=why)
    return None


def _real(path: str) -> str | None:
    try:
        return real_path(None, path)
    except ValueError:  # NotAPath: a listed socket's name is always a path, but never fail open on one
        return None
