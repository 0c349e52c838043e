"""``devctl hw`` and ``topo --pci`` against a red team's sysfs: an empty one, a FIFO for a ``class``, a
``numa_node`` that leads to /dev/zero. Nothing read is never "gone"; a function whose class cannot be read
is still shown, its class unknown, with one warning line; a NUMA node that cannot be read is null, not -1.
"""

from __future__ import annotations

import os
from pathlib import Path

from helpers import devctl

from devctl.analyze.pcie import listed
from devctl.analyze.physical import physical_view
from devctl.model import HostTopology, NodePaths, NodeSnapshot, PciDevice
from devctl.model.pcie import PciClass, PciFunction, PciTree
from devctl.node.pcitree import read_pci_tree

GPU = "0000:cb:00.0"  # a GPU of the default simulated node's PCIe tree
VF = "0000:3b:02.0"  # an SR-IOV VF ml/train-0 holds, by its ID


def test_hw_on_an_empty_sysfs_says_so_once_and_calls_nothing_gone(sim_node, tmp_path: Path) -> None:
    empty = tmp_path / "sys"
    empty.mkdir()
    r = devctl(sim_node.root, "--sysfs", str(empty), "hw", "-o", "json")
    assert not any("no longer lists" in e["message"] for e in r.json["errors"])
    assert len([e for e in r.json["errors"] if str(empty) in e["message"]]) == 1, r.json["errors"]
    table = devctl(sim_node.root, "--sysfs", str(empty), "hw")
    assert "no longer lists" not in table.stderr
    assert len([ln for ln in table.stderr.splitlines() if str(empty) in ln]) == 1, table.stderr
    vf = next(d for d in r.json["devices"] if d["pci"] == VF)
    assert vf["class"] is None and vf["numa_node"] is None  # unknown, not gone
    assert vf["logical"][0]["holders"][0]["pod"] == "train-0"


def test_a_view_of_no_pci_function_read_says_nothing_is_gone() -> None:
    """A snapshot whose sysfs listed no PCI function: the VF its ID names is not "gone"."""
    snap = NodeSnapshot(
        taken_at="2026-01-01T00:00:00Z",
        paths=NodePaths("/", "/k", "/k/dp", "/k/pr.sock", "/sys", "/logs"),
        topology=HostTopology(pci_devices=()),
    )
    view = physical_view(snap, functions=PciTree())
    assert view.gone == () and view.sysfs_read is False


def _function_dir(root: Path, address: str) -> Path:
    return Path(os.path.realpath(root / "sys" / "bus" / "pci" / "devices" / address))


def test_a_class_that_is_a_fifo_is_shown_unknown_with_one_line(sim_node) -> None:
    cls = _function_dir(sim_node.root, GPU) / "class"
    cls.unlink()
    os.mkfifo(cls)
    r = devctl(sim_node.root, "hw", GPU, "-o", "json")
    assert r.exit_code == 0, r.stderr
    [row] = r.json["devices"]
    assert row["pci"] == GPU and row["class"] is None and row["vendor_id"] == "0x10de"
    said = [e for e in r.json["errors"] if GPU in e["message"]]
    assert len(said) == 1 and "class" in said[0]["message"], r.json["errors"]
    table = devctl(sim_node.root, "hw", GPU)
    assert table.stdout.splitlines()[1].split()[:2] == [GPU, "<none>"]
    lines = [ln for ln in table.stderr.splitlines() if GPU in ln]
    assert len(lines) == 1 and lines[0].startswith("warning: pci-tree:") and "class" in lines[0], table.stderr

    topo = devctl(sim_node.root, "topo", "--pci", "-o", "json")
    shown = {d["pci"]: d for d in topo.json["pci"]["devices"]}
    assert GPU in shown and shown[GPU]["class"] is None
    assert GPU in topo.json["pci"]["matrix"]


def test_a_numa_node_that_cannot_be_read_is_null_and_minus_one_stays(sim_node) -> None:
    d = _function_dir(sim_node.root, GPU)
    (d / "numa_node").unlink()
    os.symlink("/dev/zero", d / "numa_node")
    r = devctl(sim_node.root, "hw", "-o", "json")
    rows = {x["pci"]: x for x in r.json["devices"]}
    assert rows[GPU]["numa_node"] is None
    assert rows[GPU]["class"] == "gpu"


def test_the_tree_reader_keeps_an_unreadable_class_and_says_so(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    fn = sysfs / "devices" / "pci0000:00" / "0000:00:01.0"
    fn.mkdir(parents=True)
    os.mkfifo(fn / "class")
    (fn / "vendor").write_text("0x10de\n")
    (fn / "device").write_text("0x2330\n")
    (fn / "numa_node").write_text("-1\n")
    (sysfs / "bus" / "pci" / "devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0", sysfs / "bus" / "pci" / "devices" / "0000:00:01.0")
    tree, errors = read_pci_tree(str(sysfs), names=False)
    [f] = tree.functions
    assert f.class_id == "" and f.numa_node == -1  # the kernel's -1 kept as it says it
    assert f in listed(tree)  # class unknown: it may be a GPU, so it is shown
    assert [e.subject for e in errors] == ["0000:00:01.0"] and "class" in errors[0].message


def test_a_kernel_minus_one_stays_minus_one_in_the_view() -> None:
    snap = NodeSnapshot(
        taken_at="2026-01-01T00:00:00Z",
        paths=NodePaths("/", "/k", "/k/dp", "/k/pr.sock", "/sys", "/logs"),
        topology=HostTopology(pci_devices=(PciDevice(GPU, -1, "0x10de", "0x2330", "0x030200"),)),
    )
    f = PciFunction(GPU, PciClass.GPU, "0x030200", "0x10de", "0x2330", "pci0000:c9", (), -1)
    assert physical_view(snap, functions=PciTree((f,))).devices[0].numa_node == -1
    g = PciFunction(GPU, PciClass.OTHER, "", "0x10de", "0x2330", "pci0000:c9", (), None)
    [row] = physical_view(snap, functions=PciTree((g,))).devices
    assert row.numa_node is None and row.class_ is None
