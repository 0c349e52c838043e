"""A Ctrl-C while the simulated node starts its DRA drivers leaves nothing of them behind.

A driver cancelled in the middle of its start (its socket bound, its server still starting) must still be
stopped: it was left out of the drivers to stop, so its ``plugins/<driver>/dra.sock`` and the root with it stayed
(tests/test_sim_cli.py's Ctrl-C test saw it under load). Here the start is held at exactly that moment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_sim_dra import SCENARIO

from devctl.base.waits import within
from devctl.lab import serving
from devctl.lab.sim.dranode import start_drivers
from devctl.node.paths import resolve_paths


async def test_a_driver_cancelled_while_its_server_starts_is_stopped_and_removed(
    short_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = resolve_paths(root=str(short_root), env={})
    socket = Path(paths.kubelet_dir, "plugins", "gpu.example.com", "dra.sock")
    _make(Path(paths.kubelet_dir))
    bound = asyncio.Event()

    async def held(server: object) -> None:  # the socket is bound (add_private_port); the start never ends
        bound.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(serving, "start_to_end", held)
    starting = asyncio.create_task(start_drivers(SCENARIO, paths, str(short_root / "ctl")))
    await within(bound.wait(), 10)
    assert _there(socket)  # bound: what a stop must take away
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert not _there(socket)
    assert not _there(socket.parent)


def _make(directory: Path) -> None:
    directory.mkdir(parents=True)


def _there(path: Path) -> bool:
    return path.exists()
