"""``devctl why`` cites the node's history of the devices its pod holds (issue 32 item 4): the journal's events
about them by device ID or PCI address, newest last, at most 5, and an unhealthy device's story as the
verdict's second sentence (devctl.analyze.why, analyze.why_history)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from devctl.analyze.why import PodRef, WhyInputs, verdict
from devctl.analyze.why_history import device_events
from devctl.model import (
    ContainerDevices,
    ContainerResources,
    Device,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    PodResources,
)
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.runtime import ContainerState, PodRuntimeState, SandboxState

POD = PodRef("ml", "train-0")
PATHS = NodePaths("/", "/var/lib/kubelet", "/dp", "/pr.sock", "/sys", "/var/log/pods")
T0 = datetime(2026, 12, 3, 2, 47, 11, 600_000, tzinfo=timezone.utc)
PCI = "0000:3b:00.0"
HOLDER = (Holder("ml", "train-0", "main"),)


def _snap(health: str) -> NodeSnapshot:
    pod = PodResources(
        "ml", "train-0", (ContainerResources("main", (ContainerDevices("nvidia.com/gpu", ("GPU-0",)),)),)
    )
    gpu = PluginProbe(
        "/dp/gpu.sock",
        PluginStatus.SERVING,
        "nvidia.com/gpu",
        devices=(Device("GPU-0", health), Device("GPU-1", "Healthy")),
    )
    return NodeSnapshot(taken_at="2026-12-03T03:00:00Z", paths=PATHS, pods=(pod,), plugins=(gpu,))


def _running() -> PodRuntimeState:
    return PodRuntimeState(
        "/c.sock", (SandboxState("sb1", "u1", "ready"),), (ContainerState("c1", "sb1", "main", "running"),)
    )


def _xid(at: datetime) -> NodeEvent:
    return NodeEvent(
        at, EventSource.KERNEL, "xid", "nvidia.com/gpu", "GPU-0", PCI, HOLDER, "Xid 79: GPU has fallen off the bus"
    )


def _flip(at: datetime, device: str = "GPU-0") -> NodeEvent:
    return NodeEvent(at, EventSource.PLUGIN, "health", "nvidia.com/gpu", device, None, HOLDER, "Healthy -> Unhealthy")


def test_history_cited_in_order_with_the_story_line() -> None:
    """An Xid 0.4 s before the flip: both cited, oldest first; the story is the verdict's second sentence."""
    other = _flip(T0 + timedelta(seconds=1), "GPU-1")  # another device's event: not cited
    events = (_xid(T0), _flip(T0 + timedelta(milliseconds=400)), other)
    a = verdict(POD, _snap("Unhealthy"), WhyInputs(runtime=_running(), history=events))
    assert a.code == "device-unhealthy"
    assert a.verdict == (
        "a device the pod holds is unhealthy (nvidia.com/gpu GPU-0). "
        f"GPU-0: unhealthy since 02:47:12, 0.4 s after Xid 79: GPU has fallen off the bus on {PCI}"
    )
    cited = [(e.source, e.time, e.what) for e in a.evidence if e.source in ("kernel", "plugin")]
    assert cited == [
        ("kernel", "2026-12-03T02:47:11Z", "nvidia.com/gpu GPU-0: Xid 79: GPU has fallen off the bus"),
        ("plugin", "2026-12-03T02:47:12Z", "nvidia.com/gpu GPU-0: Healthy -> Unhealthy"),
    ]
    assert a.evidence[-1].source == "plugins"  # in time order: the node's word now, after the history (full-HD)


def test_at_most_five_newest_last_and_a_running_pod_still_cites_them() -> None:
    events = tuple(_xid(T0 + timedelta(minutes=i)) for i in range(8))
    a = verdict(POD, _snap("Healthy"), WhyInputs(runtime=_running(), history=events))
    assert a.code == "running"
    times = [e.time for e in a.evidence if e.source == "kernel"]
    assert times == [f"2026-12-03T02:{50 + i}:11Z" for i in range(5)]


def test_a_kernel_line_joined_only_by_its_pci_address() -> None:
    """A kernel line naming the PCI function alone is the pod's device's when the snapshot joins the address."""
    bare = NodeEvent(T0, EventSource.KERNEL, "aer", None, None, PCI, (), "AER: Uncorrected (Fatal) error")
    elsewhere = NodeEvent(T0, EventSource.KERNEL, "aer", None, None, "0000:5e:00.0", (), "AER: Corrected error")
    found = device_events((bare, elsewhere), [("nvidia.com/gpu", "GPU-0")], {("nvidia.com/gpu", "GPU-0"): PCI})
    assert found == (bare,)


def test_no_history_no_second_sentence() -> None:
    a = verdict(POD, _snap("Unhealthy"), WhyInputs(runtime=_running()))
    assert a.verdict == "a device the pod holds is unhealthy (nvidia.com/gpu GPU-0)"
    assert {e.source for e in a.evidence} == {"plugins"}
