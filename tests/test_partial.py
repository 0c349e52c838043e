"""A snapshot taken while a socket is still awaited says nothing is absent that the socket may serve.

The TUI shows the node as far as it answered while the first read waits for a
hung socket (devctl.core.collect's Progress). Plugins and DRA drivers that have not
answered yet are not missing: a partial snapshot that called them so put a
`dra-driver-missing` error and `no-plugin` findings on the first screen of a
healthy node for as long as the hung socket was awaited.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from devctl.analyze.claim_state import DRIVER_MISSING
from devctl.analyze.claims import claims_view
from devctl.analyze.doctor import diagnose
from devctl.analyze.inventory import resources_view
from devctl.analyze.rows import WAITING
from devctl.core.collect import Progress, collect
from devctl.lab.sim.thread import SimHandle
from devctl.model import NodeSnapshot, PluginStatus

DRIVER = "gpu.example.com"
TIMEOUT = 1.0


@pytest.fixture
def hung_driver(sim_node: SimHandle) -> Iterator[str]:
    """The DRA driver's registration socket moved out of plugins_registry and a hung one put in its place."""
    registry = Path(sim_node.paths.plugins_registry)
    (real,) = [p for p in registry.iterdir() if p.name.startswith(DRIVER)]
    os.rename(real, sim_node.root / "driver-aside.sock")
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(str(real))
    hung.listen(64)
    try:
        yield str(real)
    finally:
        hung.close()


def _absences(snap: NodeSnapshot) -> list[str]:
    said = [f"claim {r.namespace}/{r.name}" for r in claims_view(snap) if r.state == DRIVER_MISSING]
    said += [f"{r.name} {r.status}" for r in resources_view(snap) if r.status in (DRIVER_MISSING, "no-plugin")]
    said += [f"{f.code} {f.subject}" for f in diagnose(snap) if f.code in ("dra-driver-missing", "no-plugin")]
    return said


async def test_a_partial_snapshot_calls_nothing_missing_that_a_pending_socket_may_serve(
    sim_node: SimHandle, hung_driver: str
) -> None:
    # GIVEN the default node whose DRA driver's registration socket hangs, with claims of it in the checkpoint
    partials: list[NodeSnapshot] = []

    def heard(progress: Progress) -> None:
        if hung_driver in progress.pending:
            partials.append(progress.snapshot())

    # WHEN the node is read with progress, as the TUI's first screen reads it
    full = await collect(sim_node.paths, TIMEOUT, progress=heard)
    # THEN while the socket was awaited nothing was called missing: the driver's row is waiting, its claims unknown
    assert partials
    answered = [p for p in partials if p.dra_checkpoint is not None and p.pods is not None]
    assert answered, "no partial snapshot had the claims and the pods to judge"
    for snap in partials:
        assert snap.plugins_incomplete
        assert _absences(snap) == []
    rows = {r.name: r.status for r in resources_view(answered[-1])}
    assert rows[DRIVER] == WAITING
    assert {r.state for r in claims_view(answered[-1])} == {None}
    # ... and once the read is complete the driver that never answered is missing, with its claims
    assert not full.plugins_incomplete and full.pending == ()
    assert any(f.code == "dra-driver-missing" and f.subject == DRIVER for f in diagnose(full))
    assert {r.name: r.status for r in resources_view(full)}[DRIVER] == DRIVER_MISSING
    assert any(p.status == PluginStatus.TIMEOUT for p in full.plugins if p.socket == hung_driver)
