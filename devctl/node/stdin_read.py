"""A stream read to its end under a deadline and a bound: a manifest on stdin (``fit -f -``, ``why -f -``).

A pipe that is never closed (``cat | devctl fit -f -`` left open, a writer that stalls) must not hold a
command forever: ``read_within`` waits for each piece with ``poll`` until the deadline and reads at most
``limit`` bytes, never further. A stream with no descriptor (a test's in-memory stdin) cannot block and
is read as it is, to the same bound.
"""

from __future__ import annotations

import io
import os
import select
import time
from typing import BinaryIO

_PIECE = 1024 * 1024


def read_within(stream: BinaryIO, limit: int, timeout: float | None) -> tuple[bytes, bool]:
    """(the bytes read, whether the stream ended) after reading ``stream`` to its end, ``limit`` bytes or
    ``timeout`` seconds (None: no deadline), whichever comes first. ``ended`` is False when the deadline
    or the bound stopped the read."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return _read_plain(stream, limit)
    return _read_fd(fd, limit, timeout)


def _read_plain(stream: BinaryIO, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = stream.read(min(left, _PIECE))
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks), False


def _read_fd(fd: int, limit: int, timeout: float | None) -> tuple[bytes, bool]:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not poller.poll(None if wait is None else int(wait * 1000) + 1):
            return b"".join(chunks), False  # the deadline passed: nothing more came
        chunk = os.read(fd, min(left, _PIECE))
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks), False


__all__ = ["read_within"]
