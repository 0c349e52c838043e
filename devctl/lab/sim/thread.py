"""A simulated node on its own event loop in a background thread.

Tests and tools that call ``asyncio.run`` themselves (typer's CliRunner, the
CLI run in-process) cannot share a loop with the simulator, so the node gets
its own: ``running_sim`` returns once the node is ready and stops it on exit.
The handle's methods may be called from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from devctl.lab.sim.node import SimNode
from devctl.lab.sim.scenario import Scenario
from devctl.model import Device, NodePaths, PodResources

T = TypeVar("T")

START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0


class SimHandle:
    """A running simulated node, seen from another thread."""

    def __init__(self, node: SimNode, loop: asyncio.AbstractEventLoop):
        self.node = node  # touch only through call(): it lives on the simulator's loop
        self.loop = loop
        self.root: Path = node.root
        self.paths: NodePaths = node.paths
        self.scenario: Scenario = node.scenario

    def call(self, fn: Callable[[SimNode], Awaitable[T]], timeout: float = CALL_TIMEOUT) -> T:
        """Run ``fn(node)`` on the simulator's loop and return its result (or raise its exception)."""

        async def run() -> T:
            return await fn(self.node)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def set_health(self, resource: str, device_id: str, health: str) -> None:
        """Flip a device of an in-process plugin; every open ListAndWatch stream sees it."""
        self._sync(lambda node: node.plugins[resource].set_health(device_id, health))

    def add_device(self, resource: str, device: Device) -> None:
        self._sync(lambda node: node.plugins[resource].add(device))

    def remove_device(self, resource: str, device_id: str) -> None:
        self._sync(lambda node: node.plugins[resource].remove(device_id))

    def restart_kubelet(self, wait: bool = True, timeout: float = 10.0) -> None:
        """Restart the simulated kubelet; with ``wait``, return once every plugin has registered again."""

        async def restart(node: SimNode) -> None:
            await node.restart_kubelet()
            if wait:
                await node.wait_registered(timeout)

        self.call(restart, timeout + CALL_TIMEOUT)

    def pods(self) -> tuple[PodResources, ...]:
        """What pod-resources List answers right now (without spending a rate-limit token)."""
        return self._sync(lambda node: node.device_manager.pods())

    def _sync(self, fn: Callable[[SimNode], T]) -> T:
        async def run(node: SimNode) -> T:
            return fn(node)

        return self.call(run)


@contextmanager
def running_sim(
    root: Path, scenario: Scenario, *, ready_timeout: float = START_TIMEOUT, **kw: Any
) -> Iterator[SimHandle]:
    """Run ``SimNode(root, scenario, **kw)`` in a background thread; ready when this yields, stopped after."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="devctl-sim", daemon=True)
    thread.start()
    node = SimNode(root, scenario, **kw)

    async def start() -> None:
        await node.start()
        await node.ready(ready_timeout)

    async def shutdown() -> None:
        await node.stop()
        # Whatever else still runs on the loop (gRPC's own tasks) ends before the loop closes.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_asyncgens()

    try:
        asyncio.run_coroutine_threadsafe(start(), loop).result(ready_timeout + START_TIMEOUT)
        yield SimHandle(node, loop)
    finally:
        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(START_TIMEOUT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(START_TIMEOUT)
            loop.close()
