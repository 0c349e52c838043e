"""The one module that changes interpreter-wide settings: the garbage collector, the thread switch interval,
a loop's default executor and Ctrl-C while the command starts. Nothing is changed at import; each setting is
made by the entry point or the face that needs it, through a function here, for a reason measured below.

Start-up. Ctrl-C while the ``devctl`` command is still importing exits quietly with 130
(``guard_start_up``, undone by ``release_interrupt`` once the imports are done). A command's imports and its
answer live until the end and are nearly all acyclic, so a command runs with a young-generation threshold of
``GC_THRESHOLD`` (``for_a_command``) and its answer with the collector paused (``without_cyclic_gc``).

The TUI. The thread switch interval. The rebuild thread (an analysis of 10,000 devices,
a few hundred milliseconds of pure Python) and the event loop share one
interpreter lock. Each time the loop lets the lock go (every ``select``, every
write to the terminal) it then waits for the rebuild thread to hand it back,
which Python asks for only after the switch interval, 5 ms by default: a view
switch that lands during a rebuild waits that long many times over
(bench/bench_tui.py shows such switches apart). At 1 ms the loop gets the lock
back five times sooner; the rebuild loses a little to more frequent switches.

The cyclic garbage collector. A full collection walks every object the
collector tracks and holds the interpreter lock while it does. With 10,000 devices the app tracks about
150,000 objects (textual's widgets, functions and caches, and the rows of the
views alive at that moment), and each rebuild makes tens of thousands of new
ones, so Python's defaults started a full collection every two seconds or so,
taking 100-500 ms each on a loaded 2-CPU machine (bench/bench_tui.py counts
them): a key that arrived meanwhile waited for all of it.

Two changes to it, for as long as the app runs:

- once the first view is on screen, everything alive then (modules, classes,
  textual's widgets and styles) is frozen out of every later collection
  (``gc.freeze``): it lives as long as the app, and a full collection then walks
  only what came since, mostly the rows of the current view. Frozen objects are
  still freed by their reference counts when they go;
- a full collection comes after 100 collections of the younger generations
  instead of 10: ten times rarer; the younger generations are collected as
  often as before. Cyclic garbage waits longer, and an app with little to do
  grew its memory faster for it (bench/bench_soak.py, 4 minutes: +5.6 % RSS
  against +3.3 % with Python's defaults), so a full collection also comes
  whenever none came for 30 s (``FullCollections``).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
from collections.abc import Iterator

# Collections of the middle generation between two full collections (Python's default: 10).
FULL_EVERY = 100
# A full collection at least this often (seconds), whatever the thresholds say.
FULL_AT_LEAST_EVERY = 30.0
# Seconds a thread holding the interpreter lock runs before it is asked to let another have it (default 0.005).
SWITCH_INTERVAL = 0.001


@contextlib.contextmanager
def tuned_for_keys() -> Iterator[None]:
    """While the app runs: a shorter switch interval, full collections ten times rarer; Python's settings after."""
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(threshold[0], threshold[1], FULL_EVERY)
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)
        gc.unfreeze()


def settle() -> None:
    """Keep what is alive now (the app, its widgets, its first view) out of every later collection."""
    gc.collect()  # once, the garbage of the start-up first: frozen, its cycles would never be collected
    gc.freeze()


def full_collections() -> int:
    """How many full collections this process has made so far."""
    return int(gc.get_stats()[2]["collections"])


class FullCollections:
    """Makes sure a full collection comes at least every ``FULL_AT_LEAST_EVERY`` seconds (``due`` at that pace)."""

    def __init__(self) -> None:
        self._seen = full_collections()

    def due(self) -> None:
        """A full collection now, unless one came since the last call."""
        if full_collections() == self._seen:
            gc.collect()
        self._seen = full_collections()


# --- start-up: Ctrl-C and the collector for one command ---------------------------------------------------------

# The youngest generation's collection threshold (CPython's default: 700 allocations). See for_a_command. 50,000 rather
# than 20,000: the imports of `claims` (the CDI reader, the claims view) crossed 20,000 and started a collection
# of 10 to 15 ms over the modules just loaded; a long `watch` still collects, each time over at most 50,000
# young objects (a few ms).
GC_THRESHOLD = 50_000


def quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the ``devctl`` command is still importing: a quiet exit 130, not a traceback from an import."""
    raise SystemExit(130)


def guard_start_up() -> None:
    """For the ``devctl`` command alone (its entry point calls this first): Ctrl-C during the imports exits 130."""
    signal.signal(signal.SIGINT, quiet_interrupt)


def release_interrupt() -> None:
    """The imports are done: Ctrl-C is KeyboardInterrupt again (each command handles it as it says)."""
    if signal.getsignal(signal.SIGINT) is quiet_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def for_a_command() -> Iterator[None]:
    """While a command runs: the young generation collected every GC_THRESHOLD allocations; frozen at its end.

    A command's imports and its snapshot (1,000 claims are tens of thousands of objects) live until the end, and
    are nearly all acyclic: with the default threshold the collector walks them again and again (a tenth of `ls`
    on a node with many claims, docs/dra.md). At the end the interpreter's last collection would walk the whole
    heap once more for nothing; frozen objects are left out of it.
    """
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        yield
    finally:
        gc.freeze()


@contextlib.contextmanager
def without_cyclic_gc(*, last: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while one answer is read and printed.

    An answer is model objects and rows (frozen dataclasses, tuples, strings:
    no reference cycles) built by the hundred thousand on a large node; each
    few hundred of them would start a collection that walks the young objects,
    and the growing heap is walked whole again and again, freeing nothing. A
    List of 50,000 pods made a third of `devctl pods`'s CPU time so. The pause
    ends with the answer: a watch collects between its reads as before.

    With ``last`` (the command ends with this answer) what it made is frozen
    before the collector is enabled again: the first allocation after
    ``gc.enable()`` would otherwise start a collection that walks every object
    of the answer once more, freeing nearly nothing, just before the process
    exits (30 to 55 ms of `ls` on a node with 1,000 DRA claims, docs/dra.md).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if last:
            gc.freeze()
        gc.enable()


# --- a loop's default executor ----------------------------------------------------------------------------------


def use_started_pool(size: int, name: str) -> None:
    """Make a started pool the running loop's default executor (``asyncio.to_thread``, ``run_in_executor(None)``).

    Set before the loop's first blocking job, when it has no default executor
    of its own yet; ``asyncio.run`` shuts it down with the loop.
    """
    import asyncio  # only the TUI sets an executor: a command that answers at once does not import asyncio here

    from devctl.fast.pools import started_pool

    asyncio.get_running_loop().set_default_executor(started_pool(size, name))
