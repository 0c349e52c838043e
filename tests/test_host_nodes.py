"""Host paths an allocation names, traced to PCI functions by stat alone (node/hostnodes, core/physical; issue 33).

The fake node is a root under tmp_path: ``dev/nvidia3`` a character device 195:3 (mknod needs root: skipped
otherwise), ``sys/dev/char/195:3`` linking into the GPU's PCI function, as the kernel lays it out. Nothing
under /dev, /sys or /proc is touched.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from pathlib import Path

import pytest

from devctl.analyze.physical import physical_view
from devctl.core.physical import allocation_paths, physical
from devctl.model import (
    Allocation,
    Checkpoint,
    CheckpointEntry,
    ContainerDevices,
    ContainerResources,
    Device,
    DeviceNode,
    ErrorKind,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    PciDevice,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
)
from devctl.node.hostnodes import trace_host_nodes

GPU = "nvidia.com/gpu"
PCI = "0000:3b:00.0"


def fake_node(root: Path, char_nodes: bool = True) -> Path:
    """``<root>/sys`` with the GPU's function and its dev/char links; ``<root>/dev`` with its nodes."""
    sysfs = root / "sys"
    function = sysfs / "devices/pci0000:3a/0000:3a:00.0" / PCI
    function.mkdir(parents=True)
    (function / "numa_node").write_text("1\n")
    caps = sysfs / "devices/virtual/nvidia-caps/nvidiactl"
    caps.mkdir(parents=True)
    chars = sysfs / "dev/char"
    chars.mkdir(parents=True)
    (chars / "195:3").symlink_to(os.path.relpath(function, chars))
    (chars / "195:255").symlink_to(os.path.relpath(caps, chars))
    (root / "dev").mkdir()
    if char_nodes:
        try:
            os.mknod(root / "dev/nvidia3", stat.S_IFCHR | 0o600, os.makedev(195, 3))
            os.mknod(root / "dev/nvidiactl", stat.S_IFCHR | 0o600, os.makedev(195, 255))
        except PermissionError:
            pytest.skip("mknod needs root (CAP_MKNOD)")
    return sysfs


def test_a_char_device_leads_to_its_pci_function_and_a_control_node_to_none(tmp_path):
    sysfs = fake_node(tmp_path)
    (tmp_path / "dev/link").symlink_to("/dev/nvidia3")  # absolute: read under the root, as the node would
    traced = trace_host_nodes(str(tmp_path), str(sysfs), ["/dev/nvidia3", "/dev/nvidiactl", "/dev/link", "/dev/gone"])
    assert traced.nodes == {"/dev/nvidia3": PCI, "/dev/nvidiactl": None, "/dev/link": PCI}  # gone: unknown
    assert traced.errors == ()


def test_a_fifo_is_stat_not_opened_and_the_trace_finishes(tmp_path, monkeypatch):
    """An open of a FIFO with no writer blocks forever; stat does not. The trace must finish and open nothing
    under <root>/dev (node/files' rule: never open a device, FIFO or socket)."""
    sysfs = fake_node(tmp_path, char_nodes=False)
    os.mkfifo(tmp_path / "dev/nvidia3")
    (tmp_path / "dev/sock").touch()
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    out: list[object] = []
    worker = threading.Thread(
        target=lambda: out.append(trace_host_nodes(str(tmp_path), str(sysfs), ["/dev/nvidia3", "/dev/sock"])),
        daemon=True,
    )
    worker.start()
    worker.join(30)  # generous: it does not hang
    assert not worker.is_alive(), "the trace blocked on the FIFO"
    (traced,) = out
    assert traced.nodes == {}  # neither is a character device
    assert not [p for p in opened if p.startswith(str(tmp_path / "dev"))]


def test_a_path_climbing_out_of_the_root_and_too_many_paths(tmp_path):
    sysfs = fake_node(tmp_path)
    (tmp_path / "dev/out").symlink_to("../../../../../../dev/null")
    traced = trace_host_nodes(str(tmp_path), str(sysfs), ["/dev/out", "relative", "/dev/nvidia3"])
    assert traced.nodes == {"/dev/nvidia3": PCI}  # /dev/out leads above the root: refused, not the host's
    many = trace_host_nodes(str(tmp_path), str(sysfs), ["/dev/nvidia3", "/dev/nvidiactl", "/dev/x"], limit=2)
    assert many.nodes == {"/dev/nvidia3": PCI, "/dev/nvidiactl": None}
    ((kind, message),) = [(e.kind, e.message) for e in many.errors]
    assert kind is ErrorKind.TOO_LARGE and message.startswith("1 host paths not traced")


def snapshot(root: Path) -> NodeSnapshot:
    """A device plugin's GPU-3 allocated with device specs (/dev/nvidiactl, /dev/nvidia3) and no CDI spec."""
    paths = NodePaths(str(root), f"{root}/k", f"{root}/k/dp", f"{root}/k/pr.sock", f"{root}/sys", f"{root}/logs")
    reply = Allocation(
        devices=(DeviceNode("/dev/nvidiactl", "/dev/nvidiactl"), DeviceNode("/dev/nvidia3", "/dev/nvidia3"))
    )
    entry = CheckpointEntry("uid-a", "main", GPU, {"1": ("GPU-3",)}, reply)
    probe = PluginProbe(f"{root}/k/dp/gpu.sock", PluginStatus.SERVING, GPU, PluginOptions(), (Device("GPU-3"),), 0.5)
    held = PodResources("ml", "a", (ContainerResources("main", (ContainerDevices(GPU, ("GPU-3",)),)),))
    return NodeSnapshot(
        taken_at="2026-01-01T00:00:00.000Z",
        paths=paths,
        plugins=(probe,),
        pods=(held,),
        checkpoint=Checkpoint(f"{root}/k/cp", "v2", True, 1, 1, {}, (entry,)),
        topology=HostTopology(pci_devices=(PciDevice(PCI, 1, "0x10de", "0x20b5", "0x030200", "nvidia"),)),
    )


def test_core_feeds_the_traced_paths_to_the_view_on_a_live_node_only(tmp_path):
    fake_node(tmp_path)
    snap = snapshot(tmp_path)
    assert allocation_paths(snap) == ["/dev/nvidiactl", "/dev/nvidia3"]
    view, traced = asyncio.run(physical(snap, 5.0, live=True))
    assert traced.nodes == {"/dev/nvidiactl": None, "/dev/nvidia3": PCI}
    (gpu,) = view.devices
    assert (gpu.pci, [(d.id, [h.pod for h in d.holders or ()]) for d in gpu.logical]) == (PCI, [("GPU-3", ["a"])])
    assert view.unresolved == ()
    # A snapshot file is another node's: nothing is traced, GPU-3 leads nowhere.
    cold, none = asyncio.run(physical(snap, 5.0, live=False))
    assert none.nodes == {} and [u.logical.id for u in cold.unresolved] == ["GPU-3"]
    assert cold == physical_view(snap)


def test_devices_rows_name_the_function_a_traced_host_path_leads_to(tmp_path):
    from devctl.analyze.hardware import with_hardware
    from devctl.analyze.inventory import devices_view

    fake_node(tmp_path)
    snap = snapshot(tmp_path)
    _, traced = asyncio.run(physical(snap, 5.0, live=True))
    (row,) = with_hardware(devices_view(snap), snap, traced.nodes)
    assert row.pci is not None and (row.pci.address, row.pci.vendor_id, row.pci.driver) == (PCI, "0x10de", "nvidia")
    (cold,) = with_hardware(devices_view(snap), snap)  # no trace: nothing leads there
    assert cold.pci is None
