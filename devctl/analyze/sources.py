"""Which sources a snapshot holds: their names, what each gave, and the errors met on the way.

``collect`` names the sources it reads with these constants and a command asks
for the ones it shows, so that the CLI can exit 3 when none of them answered.
"""

from __future__ import annotations

from dataclasses import replace

from devctl.model import (
    ALL_SOURCES,
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    DRA_DRIVERS,
    IDENTITIES,
    KUBELET_STATE,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_LIST,
    POD_RESOURCES,
    PROCS,
    RUNTIME,
    TOPOLOGY,
    ErrorKind,
    NodeSnapshot,
    PluginStatus,
    Source,
    SourceError,
)

__all__ = [
    "ALL_SOURCES",
    "CDI",
    "CHECKPOINT",
    "DRA_CHECKPOINT",
    "DRA_DRIVERS",
    "IDENTITIES",
    "KUBELET_SOURCES",
    "KUBELET_STATE",
    "PLUGINS",
    "PLUGINS_DIR_SOURCE",
    "POD_LIST",
    "POD_RESOURCES",
    "PROCS",
    "RUNTIME",
    "TOPOLOGY",
    "errors_of",
    "no_plugins_dir",
    "only_sources",
    "refused",
    "source_of",
    "sources_read",
]

# The sources only the kubelet's side of the node holds (its sockets, the plugins'
# sockets, its checkpoint): root's alone on a real node.
KUBELET_SOURCES = frozenset({POD_RESOURCES, PLUGINS, CHECKPOINT})
# What any Linux host gives, kubelet or not: alone, they answer no node question.
HOST_ONLY_SOURCES = frozenset({TOPOLOGY, PROCS})

# Sockets that told nothing: devctl may not open them, or they never answered.
# A stale socket does tell something (its plugin is gone); these only say that
# devctl could not look, so a directory of them is no answer.
_UNANSWERED = frozenset({PluginStatus.PERMISSION_DENIED, PluginStatus.TIMEOUT})


def sources_read(snapshot: NodeSnapshot) -> frozenset[str]:
    """The sources that gave something: the CLI exits 3 when none that a command shows did."""
    read = set()
    if snapshot.pods is not None or snapshot.allocatable is not None:
        read.add(POD_RESOURCES)
    listed = not any(e.source == PLUGINS_DIR_SOURCE for e in snapshot.errors)
    answered = (p.status not in _UNANSWERED for p in snapshot.plugins)
    if any(p.status == PluginStatus.SERVING for p in snapshot.plugins) or (listed and any(answered)):
        read.add(PLUGINS)
    if snapshot.checkpoint is not None:
        read.add(CHECKPOINT)
    if snapshot.topology is not None:
        read.add(TOPOLOGY)
    if snapshot.pod_identities:
        read.add(IDENTITIES)
    if snapshot.procs is not None:
        read.add(PROCS)
    if snapshot.runtime is not None:
        read.add(RUNTIME)
    if snapshot.kubelet_state is not None:
        read.add(KUBELET_STATE)
    if snapshot.dra_checkpoint is not None:
        read.add(DRA_CHECKPOINT)
    if snapshot.cdi is not None and snapshot.cdi.specs:
        read.add(CDI)  # empty or absent spec dirs are the default of a node without CDI: nothing was read
    return frozenset(read)


def errors_of(snapshot: NodeSnapshot) -> tuple[SourceError, ...]:
    """The snapshot's source errors, each once, in the order they were found."""
    return tuple(dict.fromkeys(snapshot.errors))


# The source behind each ``SourceError.source`` name that ``collect`` gives (a
# reader that fails outright is named by its source; a pod-identity directory
# by its path, hence the default).
_ERROR_SOURCES = {
    POD_RESOURCES: POD_RESOURCES,
    PLUGINS: PLUGINS,
    Source.PLUGIN: PLUGINS,
    Source.REGISTRY: PLUGINS,
    Source.DRA: PLUGINS,  # a DRA driver's endpoint or health stream
    DRA_DRIVERS: PLUGINS,
    DRA_CHECKPOINT: DRA_CHECKPOINT,
    CDI: CDI,
    PLUGINS_DIR_SOURCE: PLUGINS,
    CHECKPOINT: CHECKPOINT,
    TOPOLOGY: TOPOLOGY,
    "sysfs": TOPOLOGY,
    IDENTITIES: IDENTITIES,
    PROCS: PROCS,
    RUNTIME: RUNTIME,
    KUBELET_STATE: KUBELET_STATE,
}


def no_plugins_dir(snapshot: NodeSnapshot) -> bool:
    """Whether the snapshot says its node had no device-plugins dir (a ``plugins-dir`` error of kind missing):
    then a missing socket most likely means a wrong ``--root``, not a kubelet that is down."""
    return any(e.source == PLUGINS_DIR_SOURCE and e.kind == ErrorKind.MISSING for e in snapshot.errors)


def source_of(error: SourceError) -> str:
    """The source (``POD_RESOURCES``, ``PLUGINS``, ...) that a source error belongs to."""
    return _ERROR_SOURCES.get(error.source, IDENTITIES)


def refused(snapshot: NodeSnapshot, shown: set[str] | frozenset[str]) -> bool:
    """Whether devctl lacked the rights to read the node: of the kubelet's sources among ``shown``
    none gave anything, and at least one refused devctl (permission denied).

    Then a command has nothing to show and says "run as root" once (exit 3),
    instead of one warning per socket and a table of unknowns.
    """
    kubelet = KUBELET_SOURCES & shown
    if not kubelet or sources_read(snapshot) & kubelet:
        return False
    return any(e.kind == ErrorKind.PERMISSION_DENIED and source_of(e) in kubelet for e in snapshot.errors)


# The errors a read of the DRA drivers alone (DRA_DRIVERS, a part of PLUGINS) meets: registrations, endpoints.
_DRA_DRIVER_ERRORS = frozenset({Source.REGISTRY, Source.DRA, DRA_DRIVERS})


def only_sources(snapshot: NodeSnapshot, sources: set[str] | frozenset[str]) -> NodeSnapshot:
    """The snapshot with the errors of ``sources`` only: what a live read of just those would have met.

    A ``--from`` file holds every source; a command that reads a few on the
    live node must warn about those few, as it would there.
    """
    drivers = _DRA_DRIVER_ERRORS if DRA_DRIVERS in sources else frozenset()
    if POD_LIST in sources:  # the List's errors are pod-resources' (the file cannot tell them from the rest)
        sources = sources | {POD_RESOURCES}
    errors = tuple(e for e in snapshot.errors if source_of(e) in sources or e.source in drivers)
    return snapshot if errors == snapshot.errors else replace(snapshot, errors=errors)
