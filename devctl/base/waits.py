"""Waiting on other tasks, where the waiter's own cancellation always wins.

Two asyncio idioms swallow a cancellation of the task that uses them, so the
cancelled task goes on, and whoever cancelled it (a watch ending, a node
stopping) waits for ever for it to end:

- ``asyncio.wait_for`` before Python 3.12, when the cancellation comes as
  the awaited thing finishes: the task gets the result instead. A
  ``devctl watch --count 2`` hung so, once in three runs, when it stopped
  its followers while another plugin's first list was arriving.
- ``task.cancel()`` then ``with suppress(CancelledError): await task``,
  when the waiter itself is cancelled while it waits.

Every deadline in devctl is :func:`within` (ruff bans ``asyncio.wait_for``),
and every stop of a task it started is :func:`cancel_and_wait`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``awaitable``'s result, or ``asyncio.TimeoutError`` after ``seconds`` (None: no deadline).

    The awaitable runs as its own task, cancelled and waited for when the
    deadline passes or the caller is cancelled. A cancellation of the caller
    is always raised, even when the awaitable finished in the same instant
    (its result is dropped: the caller asked to stop).
    """
    if seconds is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        await _ended(task)
        raise
    if not done:
        await _ended(task)
        raise asyncio.TimeoutError
    return task.result()


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel ``tasks`` and wait until each has ended; the first failure of one that was not cancelled is raised.

    A cancellation of the caller while it waits is raised too (the tasks go
    on ending by themselves), never taken for one of theirs.
    """
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    failures = [t.exception() for t in tasks if not t.cancelled()]  # each retrieved: none "never retrieved"
    for failure in failures:
        if failure is not None:
            raise failure


async def _ended(task: asyncio.Future[T]) -> None:
    """Cancel a task ``within`` started and let it unwind (its cleanup runs now, not after the caller went on)."""
    task.cancel()
    try:
        await asyncio.wait({task})
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: a failure while cancelling is not "never retrieved"
