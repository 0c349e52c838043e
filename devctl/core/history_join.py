"""The live kernel log's lines joined to their device and its holders at that moment, for ``devctl events``.

``read_join`` reads one snapshot of the node, only what the join needs and all at once under ``timeout``: the
sources the recorder builds its index from (``INDEX_SOURCES``: pod-resources, CDI specs, both checkpoints; the
same ``node_index`` and ``from_kernel``, so a line in the journal and the same line read live show the same
device) and the CRI runtime's creation times (``node.cri_times``), by which ``analyze.history.held_then`` keeps
only the holders that already held the device when the line was written. A source that fails is a
``SourceError``; the lines still appear, joined as far as what was read allows. ``Rejoin`` keeps a join fresh
for ``events -w``: read again at most every ``REFRESH`` seconds, never per line.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from devctl.analyze.history import INDEX_SOURCES, NodeIndex, from_kernel, held_then, node_index
from devctl.base.errors import ErrorKind
from devctl.base.waits import within
from devctl.core.collect import collect
from devctl.core.readings import UNDECODABLE, undecodable
from devctl.model import POD_LIST, POD_RESOURCES, RUNTIME, NodePaths, SourceError
from devctl.model.history import NodeEvent
from devctl.model.kernel import KernelRecord
from devctl.node.connect import RpcFailure, check_socket
from devctl.node.cri_times import PodTimes, read_pod_times
from devctl.node.paths import socket_of

REFRESH = 5.0  # seconds: events -w reads the node again at most this often
NO_HOLDERS = "kernel lines shown without holders"


@dataclass(frozen=True)
class LiveJoin:
    """One read of the node for joining kernel lines: its index, the runtime's creation times, what failed.

    ``runtime`` is None when the runtime was not read: then no holder is shown (``held_then``).
    """

    index: NodeIndex
    runtime: PodTimes | None
    errors: tuple[SourceError, ...] = ()

    def kernel(self, record: KernelRecord, *, now: bool = False) -> NodeEvent | None:
        """``record`` as an event: its device as the recorder joins it, the holders it had at the line's time
        (``now``: a line just written, whose holders are those of now)."""
        event = from_kernel(record, self.index)
        return None if event is None else held_then(event, self.runtime, now=now)


UNJOINED = LiveJoin(NodeIndex(), None)


def _absent(path: str) -> bool:
    """No file at ``path``: a node without that socket (no kubelet, no runtime here), whatever a connect would say
    (a path too long for a socket fails before the file is looked for)."""
    return not os.path.lexists(path)


async def _runtime(paths: NodePaths, timeout: float) -> PodTimes | SourceError:
    path = socket_of(paths.runtime_endpoint)
    if _absent(path):
        return SourceError(RUNTIME, f"{path}: no such socket: {NO_HOLDERS}", ErrorKind.MISSING)
    try:
        await check_socket(path, timeout)
        return await read_pod_times(paths.runtime_endpoint, timeout)
    except RpcFailure as e:
        return SourceError(RUNTIME, f"{e.message}: {NO_HOLDERS}", e.kind)
    except UNDECODABLE:
        return SourceError(RUNTIME, undecodable(f"{paths.runtime_endpoint} (CRI)"), ErrorKind.WRONG_API)


async def read_join(paths: NodePaths, timeout: float) -> LiveJoin:
    """The node read once for the join, its sources concurrently, the whole within ``timeout`` (and a little)."""
    bound = timeout + 1.0  # each source keeps its own deadline; this only stops a read that ignores it
    snapshot, runtime = await asyncio.gather(
        within(collect(paths, timeout, want=INDEX_SOURCES), bound),
        within(_runtime(paths, timeout), bound),
        return_exceptions=True,
    )
    errors: list[SourceError] = []
    index = NodeIndex()
    if isinstance(snapshot, BaseException):
        if not isinstance(snapshot, asyncio.TimeoutError):
            raise snapshot
        message = f"the kubelet's files and sockets were not read within {timeout:g} s: kernel lines not joined"
        errors.append(SourceError(POD_RESOURCES, message, ErrorKind.TIMEOUT))
    else:
        index = node_index(snapshot)
        # A missing checkpoint or CDI directory is a node without them, nothing to join to; the kubelet's
        # pod-resources socket is where the holders come from, and any other failure is one too.
        for e in snapshot.errors:
            if e.source in (POD_RESOURCES, POD_LIST):
                kind = ErrorKind.MISSING if _absent(paths.pod_resources) else e.kind
                errors.append(replace(e, message=f"{e.message}: {NO_HOLDERS}", kind=kind))
            elif e.kind != ErrorKind.MISSING:
                errors.append(e)
    times: PodTimes | None = None
    if isinstance(runtime, BaseException):
        if not isinstance(runtime, asyncio.TimeoutError):
            raise runtime
        message = f"the CRI runtime did not answer within {timeout:g} s: {NO_HOLDERS}"
        errors.append(SourceError(RUNTIME, message, ErrorKind.TIMEOUT))
    elif isinstance(runtime, SourceError):
        errors.append(runtime)
    else:
        times = runtime
    return LiveJoin(index, times, tuple(errors))


class Rejoin:
    """A ``LiveJoin`` kept fresh for lines arriving now: read again when older than ``every`` seconds.

    ``errors`` of a read are handed to ``on_error`` once each (by message), not once per line.
    """

    def __init__(
        self,
        paths: NodePaths,
        timeout: float,
        on_error: Callable[[SourceError], None],
        *,
        every: float = REFRESH,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.paths, self.timeout, self.every, self.clock = paths, timeout, every, clock
        self.on_error = on_error
        self.join = UNJOINED
        self._read_at: float | None = None
        self._said: set[str] = set()

    async def current(self) -> LiveJoin:
        """The join, read again first when it is older than ``every`` seconds."""
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.every:
            self._read_at = now
            self.join = await read_join(self.paths, self.timeout)
            for error in self.join.errors:
                if error.message not in self._said:
                    self._said.add(error.message)
                    self.on_error(error)
        return self.join
