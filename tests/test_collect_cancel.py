"""A Ctrl-C at any step of collect() leaves no coroutine that was never awaited (Python's RuntimeWarning on exit)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings

from devctl.core.collect import collect
from devctl.node.paths import resolve_paths


def test_cancelling_collect_at_any_step_leaves_no_coroutine_unawaited(sim_node) -> None:
    paths = resolve_paths(root=str(sim_node.root), env={})

    async def cancelled_after(steps: int) -> None:
        task = asyncio.ensure_future(collect(paths, 2.0))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for steps in range(12):
            asyncio.run(cancelled_after(steps))
            gc.collect()
    unawaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert unawaited == []
