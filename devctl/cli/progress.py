"""One line on a terminal's stderr saying what a read command still waits for, and for how long.

A hung plugin socket holds ``ls`` up to ``--timeout`` (its answer can change
the table). Past half a second a person deserves to know why the prompt has
not come back: ``devctl: waiting for hung.sock… 3 s``, updated in place and
erased once the answer is in. Nothing is written when stderr is not a
terminal: scripts and logs get only the output they asked for.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from devctl.core.collect import Progress
    from devctl.model import NodePaths, NodeSnapshot

# Said only past this: most commands finish well before it.
DELAY = 0.5
EVERY = 0.1
# Back to the start of the line, and clear it.
_ERASE = "\r\x1b[K"


def waiting_text(names: list[str], seconds: float, width: int) -> str:
    """``devctl: waiting for A, B and 2 more… 3 s``, cut to ``width``: a wrapped line cannot be erased."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    # A file name is outside devctl's control: nothing in it may move the cursor.
    shown = "".join(c if c.isprintable() else "?" for c in shown)
    text = f"devctl: waiting for {shown}… {seconds:.0f} s"
    return text[: max(width - 1, 10)]


class Waiting:
    """The waiting line of one command: ``update`` with what is pending, ``run`` while waiting, ``clear`` at the end."""

    def __init__(self, stream: IO[str], clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.clock = clock
        self.enabled = stream.isatty()
        self.pending: list[str] = []
        self._shown = False
        self._start = clock()

    def update(self, progress: Progress) -> None:
        self.pending = progress.names()

    async def run(self) -> None:
        await asyncio.sleep(DELAY)
        while True:
            self._draw()
            await asyncio.sleep(EVERY)

    def _draw(self) -> None:
        if not self.pending:
            self.clear()
            return
        width = shutil.get_terminal_size((80, 24)).columns
        self.stream.write(_ERASE + waiting_text(self.pending, self.clock() - self._start, width))
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write(_ERASE)
            self.stream.flush()
            self._shown = False


async def collect_saying_what_waits(paths: NodePaths, timeout: float, want: set[str]) -> NodeSnapshot:
    """``collect``, with the waiting line on stderr when it is a terminal."""
    from devctl.core.collect import collect

    waiting = Waiting(sys.stderr)
    if not waiting.enabled:
        return await collect(paths, timeout, want=want)
    shower = asyncio.ensure_future(waiting.run())
    try:
        return await collect(paths, timeout, want=want, progress=waiting.update)
    finally:
        shower.cancel()
        waiting.clear()
