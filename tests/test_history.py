"""The node's history joined (devctl.analyze.history): kernel lines to devices and pods, SUBJECTs, a device's story."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from devctl.analyze.hardware import with_hardware
from devctl.analyze.history import from_kernel, from_udev, from_watch, matches, story
from devctl.analyze.inventory import devices_view
from devctl.core.collect import collect
from devctl.core.events import WatchEvent
from devctl.model import ContainerDevices, ContainerResources, NodePaths, NodeSnapshot, PodResources
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.model.kernel import KernelRecord
from devctl.model.udev import KernelEvent

T0 = datetime(2026, 12, 3, 2, 47, 0, tzinfo=timezone.utc)
VF = "intel.com/sriov_netdevice"


def record(text: str, at: datetime = T0, seq: int = 1) -> KernelRecord:
    return KernelRecord(seq=seq, usec=seq * 1000, time=at, level=4, facility=0, text=text)


def vf_snapshot() -> NodeSnapshot:
    """ml/train-0 holds the VF 0000:3b:02.1 (an SR-IOV plugin lists VFs by their PCI address)."""
    paths = NodePaths("/", "/k", "/k/dp", "/k/pr.sock", "/sys", "/var/log/pods")
    pod = PodResources("ml", "train-0", (ContainerResources("trainer", (ContainerDevices(VF, ("0000:3b:02.1",)),)),))
    return NodeSnapshot(taken_at=T0.isoformat(), paths=paths, pods=(pod,))


def test_driver_line_on_a_vf_joins_the_device_and_its_pod() -> None:
    event = from_kernel(record("iavf 0000:3b:02.1: Reset warning received from the PF"), vf_snapshot())
    assert event is not None
    assert (event.source, event.kind, event.pci) == (EventSource.KERNEL, "pci", "0000:3b:02.1")
    assert (event.resource, event.device) == (VF, "0000:3b:02.1")
    assert event.holders == (Holder("ml", "train-0", "trainer"),)


def test_a_line_on_a_function_no_device_is_on_keeps_the_device_unknown() -> None:
    event = from_kernel(record("NVRM: Xid (PCI:0000:5e:00): 79, pid=1, GPU has fallen off the bus."), vf_snapshot())
    assert event is not None and event.kind == "xid" and event.pci == "0000:5e:00.0"
    assert event.device is None and event.resource is None and event.holders == ()
    assert event.what == "Xid 79: GPU has fallen off the bus"


def test_unrecognised_lines_and_lines_without_a_time_are_no_events() -> None:
    assert from_kernel(record("EXT4-fs (sda1): mounted filesystem"), vf_snapshot()) is None
    untimed = KernelRecord(seq=1, usec=1, time=None, level=4, facility=0, text="NVRM: Xid (PCI:0000:3b:00): 79, x")
    assert from_kernel(untimed, None) is None


def test_udev_event_finds_the_function_in_its_devpath() -> None:
    udev = KernelEvent(T0, "remove", "net", "eth3", "/devices/pci0000:3a/0000:3a:00.0/0000:3b:02.1/net/eth3", "iavf")
    event = from_udev(udev, vf_snapshot())
    assert event is not None and event.pci == "0000:3b:02.1" and event.device == "0000:3b:02.1"
    assert event.holders == (Holder("ml", "train-0", "trainer"),) and event.kind == "remove"


def test_watch_health_event_carries_message_pci_and_holders() -> None:
    watch = WatchEvent(
        T0, VF, "/k/dp/sriov.sock", "health", "0000:3b:02.1", "Healthy", "Unhealthy", message="link down"
    )
    event = from_watch(watch, vf_snapshot())
    assert event is not None and event.source == EventSource.PLUGIN and event.kind == "health"
    assert event.what == "Healthy -> Unhealthy: link down" and event.pci == "0000:3b:02.1"
    assert event.holders == (Holder("ml", "train-0", "trainer"),)
    dra = from_watch(WatchEvent(T0, "gpu.example.com", None, "health", "sim-node/gpu-3", "Healthy", "Unhealthy"), None)
    assert (
        dra is not None and dra.source == EventSource.DRA and dra.driver == "gpu.example.com" and dra.resource is None
    )


def test_subject_matching_every_spelling() -> None:
    event = NodeEvent(
        T0, EventSource.KERNEL, "xid", "nvidia.com/gpu", "GPU-3", "0000:3b:00.0", (Holder("ml", "train-0", "c"),)
    )
    for subject in ("nvidia.com/gpu", "GPU-3", "3b:00.0", "0000:3b:00.0", "00000000:3B:00.0", "ml/train-0", "train-0"):
        assert matches(event, subject), subject
    for subject in ("nvidia.com/gp", "GPU-30", "3b:00.1", "other/train-0", "train", "", "ml"):
        assert not matches(event, subject), subject
    dra = NodeEvent(T0, EventSource.DRA, "health", None, "sim-node/gpu-3", driver="gpu.example.com")
    assert matches(dra, "gpu.example.com") and matches(dra, "gpu-3") and matches(dra, "sim-node/gpu-3")
    assert not matches(dra, "gpu-2")


def health(at: datetime, to: str, frm: str = "Healthy", device: str = "GPU-3", pci: str | None = None) -> NodeEvent:
    return NodeEvent(at, EventSource.PLUGIN, "health", "nvidia.com/gpu", device, pci, what=f"{frm} -> {to}")


def started(at: datetime) -> NodeEvent:
    return NodeEvent(at, EventSource.PLUGIN, "reconnected", "nvidia.com/gpu", what="reconnected, 8 devices, 7 healthy")


def xid(at: datetime, pci: str = "0000:3b:00.0") -> NodeEvent:
    return NodeEvent(at, EventSource.KERNEL, "xid", None, None, pci, what="Xid 79: GPU has fallen off the bus")


def test_story_line_names_the_kernel_event_just_before_the_flip() -> None:
    flip = T0 + timedelta(seconds=12.4)
    events = [
        started(T0 - timedelta(hours=2)),
        xid(T0 + timedelta(seconds=12)),
        health(flip, "Unhealthy", pci="0000:3b:00.0"),
    ]
    told = story(events, "nvidia.com/gpu", "GPU-3", T0 + timedelta(minutes=5))
    assert told.unhealthy_since == flip and not told.since_start
    assert told.line == "unhealthy since 02:47:12, 0.4 s after Xid 79: GPU has fallen off the bus on 0000:3b:00.0"


def test_story_ignores_an_event_more_than_a_minute_before_and_other_functions() -> None:
    flip = T0 + timedelta(seconds=90)
    events = [
        xid(T0),
        xid(T0 + timedelta(seconds=80), pci="0000:5e:00.0"),
        health(flip, "Unhealthy", pci="0000:3b:00.0"),
    ]
    told = story(events, "nvidia.com/gpu", "GPU-3", flip + timedelta(seconds=1))
    assert told.before is None and told.line == "unhealthy since 02:48:30"


def test_story_of_a_healthy_device_has_no_line_but_counts_flips_within_the_hour() -> None:
    now = T0 + timedelta(hours=2)
    old = [health(T0, "Unhealthy"), health(T0 + timedelta(seconds=1), "Healthy", "Unhealthy")]  # over an hour ago
    recent = []
    for i in range(6):
        at = now - timedelta(minutes=30) + timedelta(seconds=10 * i)
        recent += [health(at, "Unhealthy"), health(at + timedelta(seconds=5), "Healthy", "Unhealthy")]
    told = story([*old, *recent], "nvidia.com/gpu", "GPU-3", now)
    assert told.line is None and told.flips == 12
    assert story([*old, *recent], "nvidia.com/gpu", "GPU-2", now).flips == 0


def test_story_unhealthy_since_the_plugin_started_and_never_re_evaluated() -> None:
    start = T0 - timedelta(hours=3)
    events = [started(start), health(T0, "Unhealthy", device="GPU-1")]  # another device flipped, not GPU-5
    told = story(events, "nvidia.com/gpu", "GPU-5", T0, unhealthy=True)
    assert told.since_start and told.unhealthy_since == start
    assert told.line == "unhealthy since 23:47:00 (since its plugin started, never re-evaluated)"
    # A flip after the start is a re-evaluation: not since start.
    flipped = story([*events, health(T0, "Unhealthy", device="GPU-5")], "nvidia.com/gpu", "GPU-5", T0, unhealthy=True)
    assert not flipped.since_start and flipped.unhealthy_since == T0


def test_xid_on_a_held_gpus_address_on_the_simulated_node_joins_gpu_and_pod(sim_node) -> None:
    """The real join: the GPU's function found through its CDI name's device node, its pod through pod-resources.

    On the default node the DRA GPUs have functions (their claims' CDI specs name device nodes); the
    unhealthy gpu-3 is held by ml/train-1.
    """
    snapshot = asyncio.run(collect(sim_node.paths, timeout=10.0))
    rows = [r for r in with_hardware(devices_view(snapshot), snapshot) if r.kind == "dra" and r.pci]
    held = next(r for r in rows if r.allocated_to and r.health == "Unhealthy")
    address = held.pci.address if held.pci else ""
    text = f"NVRM: Xid (PCI:{address.rsplit('.', 1)[0]}): 79, pid=1234, name=python, GPU has fallen off the bus."
    event = from_kernel(record(text), snapshot)
    assert event is not None and event.kind == "xid" and event.pci == address
    assert (event.driver, event.device, event.resource) == ("gpu.example.com", held.id, None)
    assert event.holders == (Holder("ml", "train-1", "trainer"),)
    assert matches(event, held.id) and matches(event, address) and matches(event, "ml/train-1")
    assert matches(event, "gpu.example.com") and not matches(event, "ml/train-0")
