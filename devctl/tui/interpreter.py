"""The interpreter's settings while the app runs, so that its other threads do not stand between a key and its frame.

The thread switch interval. The rebuild thread (an analysis of 10,000 devices,
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
