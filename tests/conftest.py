"""Shared fixtures: short temporary roots, because a unix socket path has at most 107 bytes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from devctl.sim.thread import SimHandle

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
TESTDATA = SHARED / "testdata"


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A fresh node root under /tmp with a short name; pytest's tmp_path is too long for sockets."""
    path = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sim_node(short_root: Path) -> Iterator[SimHandle]:
    """The default scenario's simulated node, running in a background thread under ``short_root``.

    Ready when the test starts (every plugin registered, every pod admitted);
    stopped after it. Point commands at it with ``DEVCTL_ROOT=str(sim_node.root)``
    or ``--root``; flip devices with ``sim_node.set_health(resource, id, health)``
    and restart its kubelet with ``sim_node.restart_kubelet()`` from the test's thread.
    """
    from devctl.sim.scenario import default_scenario
    from devctl.sim.thread import running_sim

    with running_sim(short_root, default_scenario()) as handle:
        yield handle
