"""``devctl events`` joins the live kernel log's lines (not in the journal) to their device and its holders then.

On the default simulated node, with no journal: GPU-0 (PCI 0000:17:00.0) is held by ml/train-0's trainer, whose
container the simulated CRI runtime says was made when the node started. A line written now names both; a line
dated before that container was made names the device and no holder (it did not hold it then); a runtime that
cannot be read gives the device, no holder and one line saying why. The "at that moment" rule itself
(``analyze.history.held_then``) is checked on values at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from badservers import stale_socket
from helpers import BOUND, DEVCTL, devctl_env, invoke, run_devctl

from devctl.analyze.history import from_kernel, held_then, node_index
from devctl.core.recorder import _node as recorder_snapshot
from devctl.lab.sim.kmsg import KernelLine, format_record
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.runtime import ContainerState, PodRuntimeState, SandboxState
from devctl.node.kmsg import read_kmsg

GPU0 = "0000:17:00.0"
GPU1 = "0000:31:00.0"
TRAIN0 = {"namespace": "ml", "pod": "train-0", "container": "trainer"}


def xid(bus: str, number: int = 79) -> str:
    return f"NVRM: Xid (PCI:0000:{bus}:00): {number}, pid=4242, name=python, GPU has fallen off the bus."


def plant_at(sim_node: Any, text: str, when: datetime) -> None:
    """Append a kernel record stamped ``when`` (the sim's own writer stamps now), next in sequence."""

    async def write(node: Any) -> None:
        usec = int((when.timestamp() - node.kmsg.boot) * 1_000_000)
        fd = os.open(node.kmsg.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, format_record(node.kmsg.seq, usec, KernelLine(text, level=3)))
        finally:
            os.close(fd)
        node.kmsg.seq += 1

    sim_node.call(write)


def events_json(root: Path, *args: str, before: tuple[str, ...] = ()) -> tuple[int, dict[str, Any], str]:
    result = invoke("--root", str(root), *before, "events", "-o", "json", *args)
    assert result.stdout, result.stderr
    return result.exit_code, json.loads(result.stdout), result.stderr


def on(doc: dict[str, Any], pci: str) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["source"] == "kernel" and e["pci"] == pci]


def test_a_live_xid_without_a_journal_names_gpu0_and_its_holder_ml_train0(sim_node: Any) -> None:
    planted = run_devctl("--root", str(sim_node.root), "sim", "kmsg", xid("17"), "--level", "3")
    assert planted.exit_code == 0, planted.stderr
    code, doc, err = events_json(sim_node.root)
    assert code == 0, err
    assert "no journal at" in err  # the kernel log alone, joined all the same
    [event] = on(doc, GPU0)
    assert (event["kind"], event["resource"], event["device"]) == ("xid", "nvidia.com/gpu", "GPU-0")
    assert event["holders"] == [TRAIN0]
    assert doc["errors"] == []
    # SUBJECT narrows by the holder too, now that the live line has one.
    code, doc, _ = events_json(sim_node.root, "ml/train-0")
    assert code == 0 and [e["pci"] for e in doc["events"]] == [GPU0]


def test_a_line_from_before_the_holders_container_was_made_names_the_device_and_no_holder(sim_node: Any) -> None:
    # The simulated node "booted" an hour before it started and its scenario's pods were created half an hour
    # before it started (lab/sim/cri.py): 45 minutes ago the node was up and ml/train-0 did not exist yet.
    before = datetime.now(timezone.utc) - timedelta(minutes=45)
    plant_at(sim_node, xid("17", 48), before)
    plant_at(sim_node, xid("17", 79), datetime.now(timezone.utc))
    code, doc, err = events_json(sim_node.root)
    assert code == 0, err
    old, new = on(doc, GPU0)
    assert old["what"].startswith("Xid 48") and new["what"].startswith("Xid 79")
    # ml/train-0 did not hold it then, and who did is not known (a pod gone since may have): said, not guessed.
    assert (old["device"], old["holders"], old["holders_known"]) == ("GPU-0", [], False)
    assert "holders_known" not in new
    assert (new["device"], new["holders"]) == ("GPU-0", [TRAIN0])
    assert doc["errors"] == []


def test_an_unreadable_runtime_gives_the_device_no_holder_and_one_line(sim_node: Any) -> None:
    dead = stale_socket(str(sim_node.root / "dead.sock"))
    assert run_devctl("--root", str(sim_node.root), "sim", "kmsg", xid("17")).exit_code == 0
    code, doc, err = events_json(sim_node.root, before=("--runtime-endpoint", dead))
    assert code == 0, err
    [event] = on(doc, GPU0)
    assert (event["device"], event["holders"]) == ("GPU-0", [])  # the creation times are unknown: no holder
    assert [e["source"] for e in doc["errors"]] == ["runtime"]
    assert len([line for line in err.splitlines() if "dead.sock" in line]) == 1
    assert "without holders" in doc["errors"][0]["message"]


def test_the_live_join_shows_the_device_the_recorder_writes_for_the_same_line(sim_node: Any) -> None:
    """One conversion (``from_kernel``) over the recorder's own index: a journal line and a live one read the same."""
    assert run_devctl("--root", str(sim_node.root), "sim", "kmsg", xid("31")).exit_code == 0
    record = read_kmsg(str(sim_node.root / "dev" / "kmsg"), proc=str(sim_node.root / "proc")).records[-1]
    recorded = from_kernel(record, node_index(asyncio.run(recorder_snapshot(sim_node.paths, 10.0))))
    assert recorded is not None
    _, doc, _ = events_json(sim_node.root)
    [live] = on(doc, GPU1)
    assert (live["resource"], live["device"], live["driver"]) == (recorded.resource, recorded.device, recorded.driver)
    assert live["device"] == "GPU-1"


def test_watch_joins_a_line_written_after_it_started(sim_node: Any) -> None:
    proc = subprocess.Popen(
        [*DEVCTL, "events", "-w", "-o", "json"],
        env=devctl_env(sim_node.root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()

    def until(found: str) -> str:
        text = ""
        deadline = time.monotonic() + BOUND
        while found not in text:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"devctl ended; stdout so far: {text!r}"
            text += line
        return text

    try:
        until('"errors"')  # the answer so far; from here it follows the kernel log's end
        assert run_devctl("--root", str(sim_node.root), "sim", "kmsg", xid("31")).exit_code == 0
        event = json.loads(until(GPU1).splitlines()[-1])
        assert (event["source"], event["device"], event["pci"]) == ("kernel", "GPU-1", GPU1)
        assert event["holders"] == [TRAIN0]
    finally:
        proc.send_signal(2)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0


# --- the "at that moment" rule on values -------------------------------------------------------------

T = datetime(2026, 12, 3, 2, 47, 12, tzinfo=timezone.utc)
HOLDER = Holder("ml", "train-0", "trainer")


def line(*holders: Holder, resource: str | None = "nvidia.com/gpu") -> NodeEvent:
    return NodeEvent(T, EventSource.KERNEL, "xid", resource, "GPU-0", GPU0, holders, "Xid 79", driver="nvidia")


def pod(
    *sandboxes: tuple[str, str, str, str | None], containers: tuple[tuple[str, str, str | None], ...] = ()
) -> PodRuntimeState:
    """Sandboxes (id, uid, state, created) newest first; containers (sandbox id, name, created)."""
    return PodRuntimeState(
        "cri.sock",
        tuple(SandboxState(i, u, s, c) for i, u, s, c in sandboxes),
        tuple(ContainerState(f"c-{n}-{sb}", sb, n, "running", created_at=c) for sb, n, c in containers),
    )


def test_a_holder_is_kept_only_when_its_container_was_made_at_or_before_the_line() -> None:
    made_at = pod(
        ("s1", "u1", "ready", "2026-12-03T02:40:00Z"), containers=(("s1", "trainer", "2026-12-03T02:47:12Z"),)
    )
    made_after = pod(
        ("s1", "u1", "ready", "2026-12-03T02:40:00Z"), containers=(("s1", "trainer", "2026-12-03T02:47:12.000001Z"),)
    )
    assert held_then(line(HOLDER), {("ml", "train-0"): made_at}).holders == (HOLDER,)
    assert held_then(line(HOLDER), {("ml", "train-0"): made_after}).holders == ()


def test_a_restarted_container_counts_from_its_first_attempt_but_a_new_pod_of_that_name_does_not() -> None:
    # The kubelet keeps a device plugin's devices by pod UID and container name across container restarts.
    restarted = pod(
        ("s2", "u1", "ready", "2026-12-03T03:00:00Z"),
        ("s1", "u1", "notready", "2026-12-03T02:00:00Z"),
        containers=(("s2", "trainer", "2026-12-03T03:00:01Z"), ("s1", "trainer", "2026-12-03T02:00:01Z")),
    )
    assert held_then(line(HOLDER), {("ml", "train-0"): restarted}).holders == (HOLDER,)
    # ml/train-0 deleted and made again (another UID): the old pod's container says nothing of the new one.
    recreated = pod(
        ("s2", "u2", "ready", "2026-12-03T03:00:00Z"),
        ("s1", "u1", "notready", "2026-12-03T02:00:00Z"),
        containers=(("s2", "trainer", "2026-12-03T03:00:01Z"), ("s1", "trainer", "2026-12-03T02:00:01Z")),
    )
    assert held_then(line(HOLDER), {("ml", "train-0"): recreated}).holders == ()


def test_a_dra_holder_counts_from_its_pod_sandbox() -> None:
    sandbox_before = pod(("s1", "u1", "ready", "2026-12-03T02:47:00Z"), containers=(("s1", "trainer", None),))
    dra_line = line(HOLDER, resource=None)
    assert held_then(dra_line, {("ml", "train-0"): sandbox_before}).holders == (HOLDER,)
    # The same runtime for a device plugin's line: the container's time is unknown, so no holder.
    assert held_then(line(HOLDER), {("ml", "train-0"): sandbox_before}).holders == ()


def test_unknown_times_keep_no_holder() -> None:
    assert held_then(line(HOLDER), None).holders == ()  # the runtime was not read
    assert held_then(line(HOLDER), {}).holders == ()  # the runtime does not know the pod
    unknown = pod(("s1", "u1", "ready", None), containers=(("s1", "trainer", None),))
    assert held_then(line(HOLDER), {("ml", "train-0"): unknown}).holders == ()
    # A past line of a device nobody can be shown to have held then: unknown, not free (a pod gone since may have).
    for unknown_holders in (held_then(line(HOLDER), None), held_then(line(), None), held_then(line(), {})):
        assert (unknown_holders.holders, unknown_holders.holders_known) == ((), False)
    # A line written now (events -w) has the holders of now; a line of no device has none to know.
    assert held_then(line(HOLDER), None, now=True) == line(HOLDER)
    loose = NodeEvent(T, EventSource.KERNEL, "pci", pci="0000:99:00.0", what="a line of no device", driver="mlx5_core")
    assert held_then(loose, None) == loose  # the kernel driver that wrote it is no device to have holders


def test_the_scenario_s_start_up_xid_names_the_pod_that_held_its_dra_gpu(sim_node: Any) -> None:
    """The default scenario's story: the DRA GPU gpu-3 (0000:e0:01.0), held by ml/train-1, fell off the bus just
    before the node was looked at. Its pods were running before that (lab/sim/cri.py dates them half an hour
    before the start), so the kernel's start-up lines name ml/train-1, read live without a journal."""
    code, doc, err = events_json(sim_node.root)
    assert code == 0, err
    fell = [e for e in on(doc, "0000:e0:01.0") if e["kind"] == "xid"]
    assert fell and all([h["pod"] for h in e["holders"]] == ["train-1"] for e in fell), fell
