"""Doctor as one use-case for every face: the node's reading plus what only doctor asks for, diagnosed once.

`devctl doctor`, the exporter's `devctl_doctor_findings` and the TUI's findings must say the same of the same
node, so the extra readings doctor's checks take — the PCIe tree (gpu-nic-far), the allocations' device nodes
traced to PCI functions (the physical findings), the containers the runtime keeps from starting (their reason),
the node journal's last day (device history) — are gathered here, concurrently and under the deadline, never by
a face. A snapshot file (``--from``) has none of them: its findings are the snapshot's alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from devctl.analyze.doctor import diagnose
from devctl.analyze.doctor_pods import PodWaiting
from devctl.model import Finding, NodeSnapshot
from devctl.model.history import NodeEvent
from devctl.model.pcie import PcieMatrix

HISTORY = timedelta(days=1)  # how far back the device history findings look


@dataclass(frozen=True)
class DoctorExtras:
    """What doctor reads beside the snapshot; empty (no finding from it) where not read."""

    history: tuple[NodeEvent, ...] = ()
    pcie: tuple[PcieMatrix, frozenset[str]] | None = None
    host_nodes: Mapping[str, str | None] | None = None
    waiting: tuple[PodWaiting, ...] = ()


def _journal_events(snapshot: NodeSnapshot) -> tuple[NodeEvent, ...]:
    from devctl.core.history import read_events

    answer = read_events(snapshot.paths, since=datetime.now(timezone.utc) - HISTORY)
    return answer.events if answer.journal_found else ()


async def _history(snapshot: NodeSnapshot) -> tuple[NodeEvent, ...]:
    return await asyncio.to_thread(_journal_events, snapshot)


async def read_extras(snapshot: NodeSnapshot, timeout: float, *, history: bool = True) -> DoctorExtras:
    """Doctor's extra readings of the live node ``snapshot`` was read from, all at once, each under ``timeout``."""
    from devctl.core.doctor_pods import read_waiting
    from devctl.core.pci import read_pci
    from devctl.core.physical import read_host_nodes

    async def none() -> tuple[NodeEvent, ...]:
        return ()

    pci, host, waiting, events = await asyncio.gather(
        read_pci(snapshot.paths.sysfs, timeout),
        read_host_nodes(snapshot, timeout),
        read_waiting(snapshot, timeout),
        _history(snapshot) if history else none(),
    )
    return DoctorExtras(events, (pci.matrix, pci.rdma), host.nodes, waiting)


def diagnose_node(
    snapshot: NodeSnapshot, again: NodeSnapshot | None = None, extras: DoctorExtras | None = None
) -> tuple[Finding, ...]:
    """Every finding for ``snapshot`` (read ``again`` where doctor reads twice) with doctor's extra readings."""
    ex = extras or DoctorExtras()
    return diagnose(snapshot, again, ex.history, ex.pcie, ex.host_nodes, waiting=ex.waiting)


async def examine(snapshot: NodeSnapshot, timeout: float, *, live: bool) -> tuple[Finding, ...]:
    """``devctl doctor``: every finding of ``snapshot``; on a live node with the sockets in disagreement read
    again a moment later and doctor's extra readings, both at once (a snapshot file: its own findings alone)."""
    if not live:
        return diagnose_node(snapshot)
    from devctl.analyze.doctor import RECHECK_AFTER, recheck_sockets
    from devctl.core.collect import reread

    sockets = recheck_sockets(snapshot)

    async def again() -> NodeSnapshot | None:
        return await reread(snapshot, timeout, sockets, after=min(RECHECK_AFTER, timeout)) if sockets else None

    second, extras = await asyncio.gather(again(), read_extras(snapshot, timeout))
    return diagnose_node(snapshot, second, extras)


__all__ = ["DoctorExtras", "diagnose_node", "examine", "read_extras"]
