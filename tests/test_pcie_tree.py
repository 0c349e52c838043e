"""The PCIe tree read from fake sysfs trees under tmp_path, and the relationship of each pair (issue 33).

Each tree is built as the kernel lays one out: ``devices/pciDDDD:BB/<root port>/<switch up>/<switch down>/<fn>``
directories with ``class``, ``vendor``, ``device`` and ``numa_node`` files, and a relative symlink for every
function in ``bus/pci/devices``. The relationships follow ``nvidia-smi topo -m``'s legend (PIX, PXB, PHB, NODE,
SYS) by the rule of ../shared/testdata/pci/README.md; the cases are our own.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from devctl.analyze.pcie import listed, pci_answer, relationships
from devctl.model import ErrorKind
from devctl.model.pcie import PciClass, Relationship
from devctl.node import pcitree
from devctl.node.pcitree import read_pci_tree

GPU = "0x030200"
NIC = "0x020000"
BRIDGE = "0x060400"


def _function(directory: Path, cls: str, numa: int | None, vendor: str = "0x10de", device: str = "0x2330") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "class").write_text(cls + "\n")
    (directory / "vendor").write_text(vendor + "\n")
    (directory / "device").write_text(device + "\n")
    if numa is not None:
        (directory / "numa_node").write_text(f"{numa}\n")


def _link(sysfs: Path, address: str, target: Path) -> None:
    links = sysfs / "bus" / "pci" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    if not (links / address).is_symlink():
        (links / address).symlink_to(os.path.relpath(target, links))


def add(sysfs: Path, host: str, chain: Sequence[str], cls: str = GPU, numa: int | None = 0, **ids: str) -> None:
    """A function at the end of ``chain`` (addresses from the host bridge down), the bridges before it made too."""
    directory = sysfs / "devices" / host
    for bridge in chain[:-1]:
        directory = directory / bridge
        if not (directory / "class").exists():
            _function(directory, BRIDGE, numa, vendor="0x8086", device="0x2030")
            _link(sysfs, bridge, directory)
    directory = directory / chain[-1]
    _function(directory, cls, numa, **ids)
    _link(sysfs, chain[-1], directory)


def matrix_of(sysfs: Path) -> dict[str, dict[str, str | None]]:
    tree, errors = read_pci_tree(str(sysfs), names=False)
    assert errors == ()
    return relationships(tree).as_mapping()


# --- the relationships ------------------------------------------------------------------------------


def test_a_switch_with_two_gpus_and_a_nic_is_pix_between_each_pair(tmp_path: Path) -> None:
    """Behind one PCIe switch (upstream port 01:00.0, three downstream ports): the switch counts once."""
    up = ["0000:00:01.0", "0000:01:00.0"]
    add(tmp_path, "pci0000:00", [*up, "0000:02:00.0", "0000:03:00.0"], GPU)
    add(tmp_path, "pci0000:00", [*up, "0000:02:01.0", "0000:04:00.0"], GPU)
    add(tmp_path, "pci0000:00", [*up, "0000:02:02.0", "0000:05:00.0"], NIC)
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert errors == ()
    answer = pci_answer(relationships(tree))
    assert [(d["pci"], d["class"]) for d in answer["devices"]] == [
        ("0000:03:00.0", "gpu"),
        ("0000:04:00.0", "gpu"),
        ("0000:05:00.0", "nic"),
    ]
    assert answer["matrix"]["0000:03:00.0"] == {"0000:03:00.0": "X", "0000:04:00.0": "PIX", "0000:05:00.0": "PIX"}
    assert answer["matrix"]["0000:05:00.0"]["0000:04:00.0"] == "PIX"
    gpu = tree.function("0000:03:00.0")
    assert gpu is not None
    assert gpu.host_bridge == "pci0000:00"
    assert gpu.bridges == ("0000:02:00.0", "0000:01:00.0", "0000:00:01.0")  # nearest first


def test_two_switches_under_one_root_port_are_pxb(tmp_path: Path) -> None:
    """Each device two bridges (its switch's upstream and downstream port) below the root port they share."""
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"], GPU)
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.1", "0000:04:00.0", "0000:05:00.0"], NIC)
    assert matrix_of(tmp_path)["0000:03:00.0"]["0000:05:00.0"] == "PXB"


def test_two_switches_behind_a_third_are_pxb(tmp_path: Path) -> None:
    """A switch of switches: they meet at the top switch's upstream port, three bridges above each."""
    top = ["0000:00:01.0", "0000:01:00.0"]
    add(tmp_path, "pci0000:00", [*top, "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"], GPU)
    add(tmp_path, "pci0000:00", [*top, "0000:02:01.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"], NIC)
    assert matrix_of(tmp_path)["0000:05:00.0"]["0000:08:00.0"] == "PXB"


def test_a_device_on_the_root_port_and_one_behind_a_switch_under_it_are_pxb(tmp_path: Path) -> None:
    """The documented choice: two bridges (the switch's ports) on one side is deeper than PIX allows."""
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], NIC)
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.1", "0000:02:00.0", "0000:03:00.0"], GPU)
    assert matrix_of(tmp_path)["0000:01:00.0"]["0000:03:00.0"] == "PXB"


def test_two_root_ports_of_one_host_bridge_are_phb(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU)
    add(tmp_path, "pci0000:00", ["0000:00:02.0", "0000:02:00.0"], NIC)
    assert matrix_of(tmp_path)["0000:02:00.0"]["0000:01:00.0"] == "PHB"


def test_two_host_bridges_of_one_numa_node_are_node(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU, numa=1)
    add(tmp_path, "pci0000:40", ["0000:40:01.0", "0000:41:00.0"], NIC, numa=1)
    assert matrix_of(tmp_path)["0000:01:00.0"]["0000:41:00.0"] == "NODE"


def test_host_bridges_of_different_numa_nodes_are_sys(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU, numa=0)
    add(tmp_path, "pci0000:80", ["0000:80:01.0", "0000:81:00.0"], NIC, numa=1)
    assert matrix_of(tmp_path)["0000:81:00.0"]["0000:01:00.0"] == "SYS"


def test_numa_minus_one_across_host_bridges_is_null_and_kept_as_minus_one(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU, numa=-1)
    add(tmp_path, "pci0000:80", ["0000:80:01.0", "0000:81:00.0"], NIC, numa=1)
    add(tmp_path, "pci0000:00", ["0000:00:02.0", "0000:02:00.0"], NIC, numa=-1)
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert errors == ()
    answer = pci_answer(relationships(tree))
    assert {d["pci"]: d["numa_node"] for d in answer["devices"]}["0000:01:00.0"] == -1
    assert answer["matrix"]["0000:01:00.0"]["0000:81:00.0"] is None
    # the same host bridge is still told, -1 or not
    assert answer["matrix"]["0000:01:00.0"]["0000:02:00.0"] == "PHB"


def test_a_missing_numa_node_file_is_unknown_not_zero(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU, numa=None)
    add(tmp_path, "pci0000:80", ["0000:80:01.0", "0000:81:00.0"], NIC, numa=0)
    tree, _ = read_pci_tree(str(tmp_path), names=False)
    assert [d.numa_node for d in listed(tree)] == [None, 0]
    assert relationships(tree).between("0000:01:00.0", "0000:81:00.0") is None


def test_two_functions_of_one_device_are_pix(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:03.0", "0000:3b:00.0"], NIC)
    add(tmp_path, "pci0000:00", ["0000:00:03.0", "0000:3b:00.1"], NIC)
    assert matrix_of(tmp_path)["0000:3b:00.0"]["0000:3b:00.1"] == "PIX"


def test_listed_are_gpus_accelerators_nics_and_nvme_not_bridges_or_others(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], "0x0b4000")
    add(tmp_path, "pci0000:00", ["0000:00:02.0", "0000:02:00.0"], "0x120000")
    add(tmp_path, "pci0000:00", ["0000:00:03.0", "0000:03:00.0"], "0x010802")
    add(tmp_path, "pci0000:00", ["0000:00:04.0", "0000:04:00.0"], "0x0c0330")  # a USB controller
    tree, _ = read_pci_tree(str(tmp_path), names=False)
    assert [(f.address, f.pci_class) for f in listed(tree)] == [
        ("0000:01:00.0", PciClass.ACCELERATOR),
        ("0000:02:00.0", PciClass.ACCELERATOR),
        ("0000:03:00.0", PciClass.NVME),
    ]
    assert len(tree.functions) == 8  # the root ports and the USB controller are read, not listed


def test_names_come_from_the_pci_ids_database(tmp_path: Path) -> None:
    ids = tmp_path / "pci.ids"
    ids.write_text("# test\n10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n")
    add(tmp_path / "sys", "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU)
    tree, _ = read_pci_tree(str(tmp_path / "sys"), pci_ids=str(ids))
    (gpu,) = listed(tree)
    assert (gpu.vendor, gpu.model) == ("NVIDIA Corporation", "GH100 [H100 SXM5 80GB]")
    bare, _ = read_pci_tree(str(tmp_path / "sys"), names=False)
    assert pci_answer(relationships(bare))["devices"][0]["vendor"] is None


# --- bad input: bounded, one line per problem, the rest still read ------------------------------------


def _chain(depth: int, first_bus: int) -> list[str]:
    return [f"0000:{first_bus + i:02x}:00.0" for i in range(depth)]


def test_a_tree_twenty_levels_deep_is_read_whole(tmp_path: Path) -> None:
    deep = _chain(20, 1)
    add(tmp_path, "pci0000:00", [*deep, "0000:40:00.0"], GPU)
    add(tmp_path, "pci0000:00", [*deep, "0000:40:00.1"], GPU)
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert errors == ()
    gpu = tree.function("0000:40:00.0")
    assert gpu is not None and len(gpu.bridges) == 20
    assert relationships(tree).between("0000:40:00.0", "0000:40:00.1") == Relationship.PIX


def test_a_function_deeper_than_the_bound_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", [*_chain(pcitree.MAX_DEPTH + 1, 1), "0000:f0:00.0"], GPU)
    add(tmp_path, "pci0000:80", ["0000:80:01.0", "0000:81:00.0"], NIC)
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert [(e.subject, e.kind) for e in errors] == [("0000:f0:00.0", ErrorKind.TOO_LARGE)]
    assert [f.address for f in listed(tree)] == ["0000:81:00.0"]


def test_a_symlink_loop_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU)
    links = tmp_path / "bus" / "pci" / "devices"
    (links / "0000:09:00.0").symlink_to("0000:0a:00.0")
    (links / "0000:0a:00.0").symlink_to("0000:09:00.0")
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert sorted(e.subject or "" for e in errors) == ["0000:09:00.0", "0000:0a:00.0"]
    assert all("loops" in e.message and "\n" not in e.message for e in errors)
    assert [f.address for f in listed(tree)] == ["0000:01:00.0"]


def test_a_device_removed_mid_read_is_one_line_and_the_rest_is_read(tmp_path: Path) -> None:
    """A removed device leaves its link dangling for a moment: simulated by a dangling symlink."""
    add(tmp_path, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU)
    add(tmp_path, "pci0000:00", ["0000:00:02.0", "0000:02:00.0"], NIC)
    shutil.rmtree(tmp_path / "devices" / "pci0000:00" / "0000:00:02.0" / "0000:02:00.0")
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert [(e.subject, e.kind) for e in errors] == [("0000:02:00.0", ErrorKind.MISSING)]
    assert [f.address for f in listed(tree)] == ["0000:01:00.0"]


def test_a_link_leading_outside_sysfs_is_refused(tmp_path: Path) -> None:
    sysfs = tmp_path / "root" / "sys"
    add(sysfs, "pci0000:00", ["0000:00:01.0", "0000:01:00.0"], GPU)
    outside = tmp_path / "elsewhere" / "devices" / "pci0000:00" / "0000:07:00.0"
    _function(outside, GPU, 0)
    _link(sysfs, "0000:07:00.0", outside)
    tree, errors = read_pci_tree(str(sysfs), names=False)
    assert [(e.subject, "outside" in e.message) for e in errors] == [("0000:07:00.0", True)]
    assert [f.address for f in listed(tree)] == ["0000:01:00.0"]


def test_more_functions_than_the_bound_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pcitree, "MAX_FUNCTIONS", 6)
    for i in range(8):
        add(tmp_path, "pci0000:00", [f"0000:00:{i:02x}.0"], GPU)
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    assert [e.kind for e in errors] == [ErrorKind.TOO_LARGE]
    assert len(tree.functions) == 6


def test_512_functions_are_all_listed_and_do_not_hang(tmp_path: Path) -> None:
    for switch in range(16):
        up = [f"0000:00:{switch:02x}.0", f"0000:{switch * 16 + 1:02x}:00.0"]
        for port in range(4):
            for fn in range(8):
                bus = switch * 16 + 2 + port
                add(tmp_path, "pci0000:00", [*up, f"0000:{bus:02x}:{port:02x}.0", f"0000:{bus:02x}:1f.{fn}"], GPU)
    started = time.monotonic()
    tree, errors = read_pci_tree(str(tmp_path), names=False)
    matrix = relationships(tree)
    assert time.monotonic() - started < 120  # does not hang; the bench has the figure
    assert errors == ()
    assert len(matrix.devices) == 512
    assert matrix.between("0000:02:1f.0", "0000:03:1f.7") == Relationship.PIX  # one switch
    assert matrix.between("0000:02:1f.0", "0000:12:1f.0") == Relationship.PHB  # two root ports
