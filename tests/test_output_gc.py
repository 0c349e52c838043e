"""A one-shot read command ends without the garbage collector walking its answer once more.

The collector is paused while an answer is read and printed (devctl/cli/output.py,
``without_cyclic_gc``, for every read command that answers once). When it came back on, the next allocation started a
collection over every object of the answer, just before the process exited:
30 to 55 ms of `devctl ls` on a node with 1,000 DRA claims. The command runs in
a child process, as a user runs it, with a collector callback that records
each collection and the moment the answer was first written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import gc, json, sys, time
events = []
def collected(phase, info):
    if phase == "start":
        events.append(("gc", time.perf_counter(), info["generation"]))
gc.callbacks.append(collected)
write = sys.stdout.write
def first_write(text):
    if not any(e[0] == "out" for e in events):
        events.append(("out", time.perf_counter(), gc.isenabled()))
    return write(text)
sys.stdout.write = first_write
sys.argv = ["devctl", *sys.argv[1:]]
from devctl.cli.start import main
try:
    main()
except SystemExit:
    pass
finally:
    sys.stdout.flush()
    sys.stderr.write(json.dumps(events) + "\n")
"""


@pytest.mark.parametrize(
    "command",
    [["ls"], ["devices", "-o", "json"], ["claims"], ["doctor"], ["cdi"], ["topo"], ["who"], ["snapshot"], ["plugins"]],
)
def test_no_collection_walks_the_answer_after_it_is_printed(sim_node, command) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVCTL_")} | {"NO_COLOR": "1"}
    r = subprocess.run(
        [sys.executable, "-c", PROBE, "--root", str(sim_node.root), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    events = json.loads(r.stderr.strip().splitlines()[-1])
    ((printed, collector_on),) = [(t, on) for kind, t, on in events if kind == "out"]
    # THEN the command answered with the collector paused, and no collection started once it was writing
    assert collector_on is False, r.stderr
    assert [g for kind, t, g in events if kind == "gc" and t > printed] == []
