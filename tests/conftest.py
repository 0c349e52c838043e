"""Shared fixtures: short roots (a socket path has at most 107 bytes), a simulated node, background servers."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import BOUND

if TYPE_CHECKING:
    from devctl.lab.sim.thread import SimHandle


def pytest_configure(config: pytest.Config) -> None:
    """End the run on SIGTERM as on Ctrl-C, so fixtures still stop their nodes and remove their roots.

    A cancelled CI job or `timeout` sends SIGTERM (to the controller and to each
    xdist worker), which would otherwise kill the process on the spot and leave
    its /tmp/dc* roots behind.
    """
    signal.signal(signal.SIGTERM, signal.default_int_handler)


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
    from devctl.lab.sim.scenario import default_scenario
    from devctl.lab.sim.thread import running_sim

    with running_sim(short_root, default_scenario()) as handle:
        yield handle


@pytest.fixture
def background() -> Iterator[Callable[[AbstractAsyncContextManager[Any]], None]]:
    """Start async context managers (misbehaving servers) on a loop of their own, for in-process commands.

    Request it after the fixture that makes the servers' directory, so that they stop before it goes.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    stack = contextlib.AsyncExitStack()

    def enter(cm: AbstractAsyncContextManager[Any]) -> None:
        asyncio.run_coroutine_threadsafe(stack.enter_async_context(cm), loop).result(BOUND)

    yield enter
    asyncio.run_coroutine_threadsafe(stack.aclose(), loop).result(BOUND)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
