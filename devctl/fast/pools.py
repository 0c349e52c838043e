"""Thread pools whose every thread is started at once: a TUI left running holds as many after a day as after a minute.

Each event loop of the TUI runs blocking work on its default executor: the
app's loop runs textual's thread workers there (the poll and watch loops, each
rebuild of the view, each diagnosis), and the poll loop runs collect's file
reads (``asyncio.to_thread``). A ``ThreadPoolExecutor`` starts a thread only
when a job arrives and it cannot claim an idle one; a thread that has just
finished a job marks itself idle a moment after its result is delivered, so a
job submitted in answer to that result (the next rebuild, the next read of a
sequence) now and then finds no idle thread and starts another. One at a time,
hours apart, the pool creeps up to its bound (``bench/bench_soak.py`` saw the
TUI one thread up after 30 minutes; ``docs/performance-soak.md``). Started
full, it has nothing left to start.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


def started_pool(size: int, name: str) -> ThreadPoolExecutor:
    """A pool of ``size`` threads named ``name_N``, all of them running when it is returned.

    Each of ``size`` first jobs waits for all the others to have begun, so no
    thread can take two of them: the pool has to start every one of its threads.
    """
    pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)
    everyone = threading.Barrier(size)
    try:
        started = [pool.submit(everyone.wait) for _ in range(size)]
    except RuntimeError:  # a thread could not be started: free the ones waiting for it
        everyone.abort()
        pool.shutdown(wait=False)
        raise
    for job in started:
        job.result()
    return pool
