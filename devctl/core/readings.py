"""What collect's concurrent readers hand back before the snapshot is assembled, and what it still awaits.

``Readings`` is filled by every reader (devctl.core.collect, sources_plugins, sources_files); ``Pending``
tells a face what is still awaited (``Progress``); the one-line words of an undecodable reply or a failed
read are here, said the same way by every reader.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from devctl.model import (
    PLUGINS,
    AllocatableResources,
    CdiState,
    Checkpoint,
    DraCheckpoint,
    HostTopology,
    KubeletState,
    NodeSnapshot,
    PluginProbe,
    PodIdentity,
    PodResources,
    ProcScan,
    RuntimeState,
    SocketStatus,
    SourceError,
)

T = TypeVar("T")


@dataclass
class Readings:
    """What the concurrent readers hand back before the snapshot is assembled."""

    pods: tuple[PodResources, ...] | None = None
    allocatable: AllocatableResources | None = None
    plugins: list[PluginProbe] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    topology: HostTopology | None = None
    identities: tuple[PodIdentity, ...] = ()
    kubelet_socket: SocketStatus | None = None
    dra_checkpoint: DraCheckpoint | None = None
    cdi: CdiState | None = None
    errors: list[SourceError] = field(default_factory=list)
    procs: ProcScan | None = None
    runtime: RuntimeState | None = None
    kubelet_state: KubeletState | None = None
    # socket (real path) -> resource, from running devctl plugins' control sockets
    claimed: dict[str, str] = field(default_factory=dict)
    answered: list[PluginProbe] = field(default_factory=list)  # probes done so far, in the order they answered
    node_name: str | None = None


@dataclass(frozen=True)
class Progress:
    """What ``collect`` still waits for, and the node as far as it has answered.

    ``pending`` holds source names (``pod-resources``, ``checkpoint`` …) and
    the path of each plugin socket not answered yet.
    """

    pending: frozenset[str]
    _partial: Callable[[], NodeSnapshot]

    def names(self) -> list[str]:
        """What is pending as a person names it: sockets by file name, ``plugins`` left out while its sockets are."""
        names = sorted(os.path.basename(p) if "/" in p else p for p in self.pending)
        if any("/" in p for p in self.pending):
            names = [n for n in names if n != PLUGINS]
        return names

    def snapshot(self) -> NodeSnapshot:
        """What has answered by now: a source still pending is absent (None, or no plugin of it), not an error."""
        return self._partial()


# grpc.aio hands back None for a reply it cannot decode (it only logs the error), and
# the clients then fail on that None: such a socket speaks something else.
UNDECODABLE = (AttributeError, TypeError)


def undecodable(what: str) -> str:
    return f"{what}: the reply could not be decoded (not the API devctl expects)"


def oserror_line(path: str, err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(err, PermissionError):
        return f"{path}: permission denied"
    return f"{path}: {err.strerror or err}"


class Pending:
    """What collect still waits for (source names, and each plugin socket's path), told to ``report`` as it changes."""

    def __init__(self, report: Callable[[Progress], None], partial: Callable[[], NodeSnapshot]):
        self._report = report
        self._partial = partial
        self._items: set[str] = set()

    @property
    def items(self) -> frozenset[str]:
        return frozenset(self._items)

    def add(self, item: str) -> None:
        self._items.add(item)
        self._report(Progress(self.items, self._partial))

    def done(self, item: str) -> None:
        self._items.discard(item)
        self._report(Progress(self.items, self._partial))


async def tracked(pending: Pending | None, item: str, coro: Awaitable[T]) -> T:
    if pending is None:
        return await coro
    pending.add(item)
    try:
        return await coro
    finally:
        pending.done(item)


async def answered(
    pending: Pending | None, out: Readings, socket: str, probe_it: Callable[[], Awaitable[PluginProbe]]
) -> PluginProbe:
    # The probe's coroutine is made here, inside the task gather made: see _guard.
    async def probed() -> PluginProbe:
        probe = await probe_it()
        out.answered.append(probe)  # before the socket leaves ``pending``: a partial snapshot then has it
        return probe

    return await tracked(pending, socket, probed())
