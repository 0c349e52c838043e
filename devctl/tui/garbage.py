"""Python's cyclic garbage collector, tuned so that its pauses do not stand between a key and its frame.

A full collection walks every object the collector tracks and holds the
interpreter lock while it does. With 10,000 devices the app tracks about
150,000 objects (textual's widgets, functions and caches, and the rows of the
views alive at that moment), and each rebuild makes tens of thousands of new
ones, so Python's defaults started a full collection every two seconds or so,
taking 100-500 ms each on a loaded 2-CPU machine (bench/bench_tui.py counts
them): a key that arrived meanwhile waited for all of it.

Two changes, for as long as the app runs:

- once the first view is on screen, everything alive then (modules, classes,
  textual's widgets and styles) is frozen out of every later collection
  (``gc.freeze``): it lives as long as the app, and a full collection then walks
  only what came since, mostly the rows of the current view. Frozen objects are
  still freed by their reference counts when they go;
- a full collection comes after 100 collections of the younger generations
  instead of 10: ten times rarer. Cyclic garbage lives a little longer; the
  younger generations are collected as often as before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Collections of the middle generation between two full collections (Python's default: 10).
FULL_EVERY = 100


@contextlib.contextmanager
def fewer_full_collections() -> Iterator[None]:
    """While the app runs: full collections ten times rarer; on the way out, Python's settings again."""
    saved = gc.get_threshold()
    gc.set_threshold(saved[0], saved[1], FULL_EVERY)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()


def settle() -> None:
    """Keep what is alive now (the app, its widgets, its first view) out of every later collection."""
    gc.collect()  # once, the garbage of the start-up first: frozen, its cycles would never be collected
    gc.freeze()
