"""Waiting with a deadline, where a cancellation always wins.

``asyncio.wait_for`` before Python 3.12 swallows a cancellation that comes
while the awaited thing finishes: the task that was cancelled gets the result
instead, goes on, and the code that cancelled it waits for ever for it to end.
A ``devctl watch --count 2`` hung so, once in three runs, when it stopped its
followers while another plugin's first list was arriving. Every deadline in
devctl is :func:`within` instead (ruff bans ``asyncio.wait_for``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

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
        task.cancel()
        await _settled(task)
        raise
    if not done:
        task.cancel()
        await _settled(task)
        raise asyncio.TimeoutError
    return task.result()


async def _settled(task: asyncio.Future[T]) -> None:
    """Let a cancelled task unwind (its own cleanup runs now, not after the caller has gone on)."""
    try:
        await asyncio.wait({task})
    finally:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: a failure while cancelling is not "never retrieved"
