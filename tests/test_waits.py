"""devctl.base.waits.within: a deadline that never swallows the caller's cancellation.

The first test is the race that hung `devctl watch --count 2` once in three
runs on Python 3.11: the watch cancelled a follower in the instant its
plugin's first list arrived, ``asyncio.wait_for`` handed the follower the
list instead of the cancellation, and the watch waited for ever for it.
"""

from __future__ import annotations

import asyncio

import pytest

from devctl.base.waits import cancel_and_wait, within


async def test_a_cancellation_as_the_awaited_thing_finishes_is_raised() -> None:
    arrived: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiter = asyncio.ensure_future(within(arrived, 10))
    await asyncio.sleep(0)  # the waiter is now waiting
    arrived.set_result("first list")
    waiter.cancel()  # in the same instant
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def test_the_result_within_the_deadline_and_without_one() -> None:
    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 42

    assert await within(answer(), 5) == 42
    assert await within(answer(), None) == 42


async def test_past_the_deadline_the_awaited_thing_has_unwound_before_the_timeout_is_raised() -> None:
    cleaned: list[str] = []

    async def hung() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("closed")

    with pytest.raises(asyncio.TimeoutError):
        await within(hung(), 0.05)
    assert cleaned == ["closed"]


async def test_a_cancelled_caller_waits_for_the_awaited_thing_to_unwind() -> None:
    cleaned: list[str] = []
    started = asyncio.Event()

    async def hung() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.01)  # a cleanup that itself awaits (closing a channel)
            cleaned.append("closed")

    caller = asyncio.ensure_future(within(hung(), 10))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert cleaned == ["closed"]


async def test_a_failure_of_the_awaited_thing_is_raised_as_itself() -> None:
    async def fails() -> None:
        raise ConnectionRefusedError("nothing listens")

    with pytest.raises(ConnectionRefusedError, match="nothing listens"):
        await within(fails(), 5)


async def test_cancel_and_wait_ends_the_tasks_and_keeps_the_callers_own_cancellation() -> None:
    ended: list[str] = []

    async def stream(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.05)  # closing its channel takes a moment
            ended.append(name)

    streams = [asyncio.ensure_future(stream(n)) for n in ("gpu", "nic")]
    await asyncio.sleep(0)
    stopping = asyncio.ensure_future(cancel_and_wait(*streams))
    await asyncio.sleep(0.01)  # the stop waits for the streams to close
    stopping.cancel()  # and is itself stopped meanwhile (a node's stop past its patience)
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await asyncio.wait(streams)
    assert sorted(ended) == ["gpu", "nic"] and all(s.cancelled() for s in streams)


async def test_cancel_and_wait_raises_a_failure_that_is_not_a_cancellation() -> None:
    async def fails_on_close() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise OSError("socket already gone")

    async def ends() -> None:
        await asyncio.Event().wait()

    tasks = [asyncio.ensure_future(ends()), asyncio.ensure_future(fails_on_close())]
    await asyncio.sleep(0)
    with pytest.raises(OSError, match="already gone"):
        await cancel_and_wait(*tasks)
    await cancel_and_wait()  # nothing to stop is no error
