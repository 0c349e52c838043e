"""Doctor's findings from the journal (devctl.analyze.doctor_history) on the default simulated node's snapshot.

There, GPU-5 of nvidia.com/gpu is unhealthy from the start and gpu.example.com's sim-node/gpu-3 (0000:e0:01.0,
held by ml/train-1) is unhealthy too.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from devctl.analyze.doctor_history import history_findings
from devctl.core.collect import collect
from devctl.model import NodeSnapshot, Severity
from devctl.model.history import EventSource, NodeEvent

GPU, DRA = "nvidia.com/gpu", "gpu.example.com"


@pytest.fixture(scope="module")
def snapshot() -> NodeSnapshot:
    import shutil
    import tempfile
    from pathlib import Path

    from devctl.lab.sim.scenario import default_scenario
    from devctl.lab.sim.thread import running_sim

    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, default_scenario()) as handle:
            return asyncio.run(collect(handle.paths, timeout=10.0))
    finally:
        shutil.rmtree(root, ignore_errors=True)


NOW = datetime.now(timezone.utc).replace(microsecond=0)


def plugin_start(at: datetime, resource: str = GPU) -> NodeEvent:
    source = EventSource.PLUGIN if "/" in resource else EventSource.DRA
    name, driver = (resource, None) if "/" in resource else (None, resource)
    return NodeEvent(at, source, "reconnected", name, what="reconnected, 8 devices, 7 healthy", driver=driver)


def flip(at: datetime, device: str, to: str, resource: str = GPU, frm: str = "Healthy") -> NodeEvent:
    source = EventSource.PLUGIN if "/" in resource else EventSource.DRA
    name, driver = (resource, None) if "/" in resource else (None, resource)
    return NodeEvent(at, source, "health", name, device, what=f"{frm} -> {to}", driver=driver)


def codes(findings) -> dict[tuple[str, str], object]:
    return {(f.code, f.subject): f for f in findings}


def test_no_journal_no_findings(snapshot: NodeSnapshot) -> None:
    assert history_findings(snapshot, (), NOW) == []


def test_unhealthy_now_says_since_when_and_the_xid_just_before(snapshot: NodeSnapshot) -> None:
    at = NOW - timedelta(minutes=20)
    xid = NodeEvent(at, EventSource.KERNEL, "xid", None, "sim-node/gpu-3", "0000:e0:01.0", driver=DRA,
                    what="Xid 79: GPU has fallen off the bus")  # fmt: skip
    events = [
        plugin_start(NOW - timedelta(hours=3), DRA),
        xid,
        flip(at + timedelta(seconds=0.4), "sim-node/gpu-3", "Unhealthy", DRA),
    ]
    found = codes(history_findings(snapshot, events, NOW))
    finding = found[("device-unhealthy-since", f"{DRA} sim-node/gpu-3")]
    assert finding.severity == Severity.INFO
    assert finding.message == (
        f"sim-node/gpu-3: unhealthy since {at + timedelta(seconds=0.4):%H:%M:%S}, "
        "0.4 s after Xid 79: GPU has fallen off the bus on 0000:e0:01.0"
    )
    assert "0000:e0:01.0" in finding.hint


def test_unhealthy_since_its_plugin_started_and_never_re_evaluated(snapshot: NodeSnapshot) -> None:
    start = NOW - timedelta(hours=5)
    events = [plugin_start(start), flip(NOW - timedelta(hours=1), "GPU-1", "Unhealthy"),
              flip(NOW - timedelta(minutes=59), "GPU-1", "Healthy", frm="Unhealthy")]  # fmt: skip
    found = codes(history_findings(snapshot, events, NOW))
    finding = found[("unhealthy-since-start", f"{GPU} GPU-5")]
    assert finding.severity == Severity.WARNING and f"started at {start:%H:%M:%S}" in finding.message
    assert ("device-unhealthy-since", f"{GPU} GPU-5") not in found
    # After a flip of GPU-5 itself it was evaluated again: not since start any more.
    again = codes(history_findings(snapshot, [*events, flip(NOW - timedelta(minutes=1), "GPU-5", "Unhealthy")], NOW))
    assert ("unhealthy-since-start", f"{GPU} GPU-5") not in again
    assert ("device-unhealthy-since", f"{GPU} GPU-5") in again


@pytest.mark.parametrize(("changes", "flapping"), [(6, True), (5, False)])
def test_flapping_more_than_five_changes_in_the_hour(snapshot: NodeSnapshot, changes: int, flapping: bool) -> None:
    """Changes older than the hour do not count: ten of them 90 minutes ago, then ``changes`` within it."""
    events = [plugin_start(NOW - timedelta(hours=2))]
    health = "Healthy"
    for start, count in ((NOW - timedelta(minutes=90), 10), (NOW - timedelta(minutes=40), changes)):
        for i in range(count):
            health, before = ("Unhealthy" if health == "Healthy" else "Healthy"), health
            events.append(flip(start + timedelta(seconds=30 * i), "GPU-2", health, frm=before))
    found = codes(history_findings(snapshot, events, NOW))
    assert (("device-flapping", f"{GPU} GPU-2") in found) is flapping
    if flapping:
        assert found[("device-flapping", f"{GPU} GPU-2")].message == "GPU-2 changed health 6 times in the last hour"
