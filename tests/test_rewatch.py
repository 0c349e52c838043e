"""``-w`` on ls, devices and pods: the answer at once, then again whenever it changes (as ``kubectl get -w``)."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time

from helpers import DEVCTL, devctl_env

from devctl.lab.sim.thread import SimHandle

GPU = "nvidia.com/gpu"


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str]:
    got: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            got.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return got


def _until(got: queue.Queue[str], wanted, seen: list[str], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not wanted(seen):
        seen.append(got.get(timeout=max(0.01, deadline - time.monotonic())))


def test_ls_w_prints_again_when_a_device_turns_unhealthy_and_ends_0_on_ctrl_c(sim_node: SimHandle) -> None:
    p = subprocess.Popen(
        [*DEVCTL, "ls", GPU, "-w", "--no-headers"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(sim_node.root),
    )
    try:
        seen: list[str] = []
        got = _lines(p)
        _until(got, lambda s: any(x.startswith(GPU) for x in s), seen)
        first = [x for x in seen if x.startswith(GPU)]
        assert first[0].split()[-1] == "1"  # BAD: one unhealthy GPU
        # WHEN another device turns unhealthy THEN a new table comes, and nothing while nothing changes
        sim_node.set_health(GPU, "GPU-7", "Unhealthy")
        _until(got, lambda s: any(x.startswith(GPU) and x.split()[-1] == "2" for x in s), seen)
        assert len([x for x in seen if x.startswith(GPU)]) == 2
    finally:
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=20)
    assert code == 0
    assert "Traceback" not in (p.stderr.read() if p.stderr else "")
