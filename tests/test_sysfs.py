"""Host topology: the simulator's sysfs tree read back, the kernel's quirks, and udev's names for /sys alone."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import call_as_nobody
from namespaces import in_mount_namespace

from devctl.lab.sim.sysfs import write_topology
from devctl.model import HostTopology, Hugepages, NumaNode, PciDevice
from devctl.model.serial import from_plain, to_plain
from devctl.node.sysfs import (
    TopologyError,
    normalize_pci_address,
    numa_of_cpus,
    numa_of_pci,
    pci_index,
    read_topology,
)

NODES = (
    NumaNode(
        id=0,
        cpus=tuple(range(16)),
        memory_bytes=64 * 2**30,
        hugepages=(Hugepages(size_kb=2048, total=512, free=500), Hugepages(size_kb=1048576, total=4, free=2)),
    ),
    NumaNode(id=1, cpus=tuple(range(16, 32)), memory_bytes=32 * 2**30),
)
GPU = PciDevice("0000:3b:00.0", 0, "0x10de", "0x20b5", "0x030200", driver="nvidia")
NIC = PciDevice("0000:af:00.1", 1, "0x15b3", "0x101d", "0x020000", driver=None)
BRIDGE = PciDevice("0000:00:00.0", -1, "0x8086", "0x0d57", "0x060000", driver="pcieport")


def test_written_tree_reads_back_equal(short_root: Path) -> None:
    # GIVEN a scenario topology written as sysfs, with devices given out of address order
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES, [NIC, GPU, BRIDGE])

    # WHEN devctl reads it (udev allowed: a simulated root must still get no names)
    topo = read_topology(str(sysfs))

    # THEN it is the same topology, PCI devices sorted by address
    assert topo == HostTopology(numa_nodes=NODES, pci_devices=(BRIDGE, GPU, NIC))
    assert (sysfs / "devices/system/cpu/online").read_text() == "0-31\n"
    assert (sysfs / "bus/pci/devices/0000:3b:00.0/driver").resolve().name == "nvidia"

    # AND the tree still reads right where a debug pod mounts it, because its links are relative
    moved = short_root / "host" / "sys"
    moved.parent.mkdir()
    shutil.move(sysfs, moved)
    assert read_topology(str(moved)) == topo


def test_writing_again_replaces_the_previous_topology(short_root: Path) -> None:
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES, [GPU, NIC, BRIDGE])

    one_node = (dataclasses.replace(NODES[0], hugepages=(Hugepages(size_kb=2048, total=8, free=8),)),)
    unbound_gpu = dataclasses.replace(GPU, driver=None, numa_node=-1, class_id="")
    rebound_bridge = dataclasses.replace(BRIDGE, driver="vfio-pci")
    write_topology(sysfs, one_node, [unbound_gpu, rebound_bridge], online_cpus="0-7")

    topo = read_topology(str(sysfs))
    assert topo == HostTopology(numa_nodes=one_node, pci_devices=(rebound_bridge, unbound_gpu))
    assert sorted(p.name for p in (sysfs / "bus/pci/devices").iterdir()) == ["0000:00:00.0", "0000:3b:00.0"]
    assert not (sysfs / "devices/system/node/node1").exists()
    assert not (sysfs / "devices/pci0000:af/0000:af:00.1").exists()
    assert (sysfs / "devices/system/cpu/online").read_text() == "0-7\n"


def test_kernel_without_numa_is_one_node_of_the_online_cpus(short_root: Path) -> None:
    # GIVEN a tree with no devices/system/node, as CONFIG_NUMA=n kernels have, and global hugepages
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES)
    write_topology(sysfs, (), [GPU], online_cpus="0-3,6")
    pool = sysfs / "kernel/mm/hugepages/hugepages-2048kB"
    pool.mkdir(parents=True)
    (pool / "nr_hugepages").write_text("16\n")
    (pool / "free_hugepages").write_text("10\n")

    topo = read_topology(str(sysfs))

    assert not (sysfs / "devices/system/node").exists()
    assert topo.numa_nodes == (NumaNode(id=0, cpus=(0, 1, 2, 3, 6), hugepages=(Hugepages(2048, 16, 10),)),)
    assert topo.pci_devices == (GPU,)


def test_empty_sysfs_has_no_nodes_and_no_devices(short_root: Path) -> None:
    assert read_topology(str(short_root)) == HostTopology()


@pytest.mark.parametrize("name", ["missing", "a-file"])
def test_sysfs_that_is_not_a_directory_is_a_one_line_error(short_root: Path, name: str) -> None:
    (short_root / "a-file").write_text("x")
    with pytest.raises(TopologyError, match=f"cannot read sysfs at {short_root / name}") as err:
        read_topology(str(short_root / name))
    assert "\n" not in str(err.value)


def _as_nobody(fn: Callable[[], Any]) -> Any:
    """``fn()`` as user 65534, its result as plain data (see helpers.call_as_nobody)."""
    return call_as_nobody(lambda: to_plain(fn()))


def test_unreadable_sysfs_is_a_topology_error(short_root: Path) -> None:
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES, [GPU])
    short_root.chmod(0o755)
    sysfs.chmod(0o000)

    result = _as_nobody(lambda: read_topology(str(sysfs)))

    assert result == {"error": f"TopologyError: cannot read sysfs at {sysfs}: Permission denied"}


def test_unreadable_files_leave_out_their_values_only(short_root: Path) -> None:
    # GIVEN a tree where some files cannot be read by an unprivileged user
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES, [GPU, NIC])
    short_root.chmod(0o755)
    for rel in (
        "bus/pci/devices/0000:3b:00.0/vendor",
        "bus/pci/devices/0000:3b:00.0/numa_node",
        "devices/system/node/node1/cpulist",
        "devices/system/node/node0/meminfo",
        "devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages",
    ):
        (sysfs / rel).chmod(0o000)

    # WHEN it reads the tree
    result = _as_nobody(lambda: read_topology(str(sysfs)))

    # THEN every device and node is still there, without the values it could not read
    topo = from_plain(HostTopology, result["value"])
    assert topo.pci_devices == (dataclasses.replace(GPU, vendor_id="", numa_node=-1), NIC)
    assert topo.numa_nodes == (
        dataclasses.replace(NODES[0], memory_bytes=0, hugepages=(Hugepages(1048576, 4, 2),)),
        dataclasses.replace(NODES[1], cpus=()),
    )


def test_garbage_in_files_is_left_out(short_root: Path) -> None:
    sysfs = short_root / "sys"
    write_topology(sysfs, NODES[1:], [NIC])
    (sysfs / "devices/system/node/node1/cpulist").write_text("16-abc\n")
    (sysfs / "devices/system/node/node1/meminfo").write_text("nothing useful\n")
    (sysfs / "bus/pci/devices/0000:af:00.1/numa_node").write_bytes(b"\xff\xfe\n")
    (sysfs / "bus/pci/devices/0000:af:00.1/class").unlink()
    (sysfs / "bus/pci/devices/0000:af:00.1/class").mkdir()

    topo = read_topology(str(sysfs), use_udev=False)

    assert topo.numa_nodes == (NumaNode(id=1, cpus=(), memory_bytes=0),)
    assert topo.pci_devices == (dataclasses.replace(NIC, numa_node=-1, class_id=""),)


def test_writer_refuses_what_the_kernel_could_not_have_written(short_root: Path) -> None:
    # Checked before anything is written: a bad scenario leaves no half-written tree.
    with pytest.raises(ValueError, match="not a PCI address"):
        write_topology(short_root, NODES, [dataclasses.replace(GPU, address="../../etc")])
    with pytest.raises(ValueError, match="not a PCI address"):
        write_topology(short_root, NODES, [dataclasses.replace(GPU, address="3B:00.0")])
    with pytest.raises(ValueError, match="unique"):
        write_topology(short_root, (NODES[0], NODES[0]))
    with pytest.raises(ValueError, match="unique"):
        write_topology(short_root, NODES, [GPU, GPU])
    with pytest.raises(ValueError, match="not negative"):
        write_topology(short_root, (dataclasses.replace(NODES[0], id=-1),))
    assert list(short_root.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("0000:3b:00.0", "0000:3b:00.0"),
        ("00000000:3B:00.0", "0000:3b:00.0"),  # nvidia-smi
        ("3b:00.0", "0000:3b:00.0"),  # lspci
        (" 0001:AF:1f.7 ", "0001:af:1f.7"),
        ("10000:01:00.1", "10000:01:00.1"),  # VMD domains have five digits
        ("3b:00.8", None),
        ("GPU-0", None),
        ("", None),
    ],
)
def test_normalize_pci_address(text: str, address: str | None) -> None:
    assert normalize_pci_address(text) == address


def test_lookups_on_a_topology() -> None:
    topo = HostTopology(numa_nodes=NODES, pci_devices=(BRIDGE, GPU, NIC))

    assert numa_of_pci(topo, "00000000:3B:00.0") == 0
    assert numa_of_pci(topo, "af:00.1") == 1
    assert numa_of_pci(topo, "0000:00:00.0") == -1
    assert numa_of_pci(topo, "0000:99:00.0") == -1
    assert numa_of_pci(topo, "not an address") == -1
    assert pci_index(topo)["0000:3b:00.0"] is GPU
    cpu_node = numa_of_cpus(topo)
    assert (cpu_node[0], cpu_node[15], cpu_node[16], cpu_node[31]) == (0, 0, 1, 1)
    assert 32 not in cpu_node


# The names udevd's hwdb import would file for the GPU.
UDEV_NAMES = {GPU.address: ("NVIDIA Corporation", "GA100 [A100 PCIe 80GB]")}

READ_AS_THE_HOST = """
import json, shutil, sys
from devctl.node.sysfs import read_topology
from devctl.model.serial import to_plain

named = read_topology("/sys")
simulated = read_topology(sys.argv[1])  # the same tree at its own path
shutil.rmtree("/run/udev/data")  # a container without udev's database
print(json.dumps([to_plain(t) for t in (named, simulated, read_topology("/sys"))]))
"""


def write_udev_view(sysfs: Path, run: Path) -> None:
    """Make ``sysfs`` enumerable by libudev and give udev's database under ``run`` the names of UDEV_NAMES.

    libudev takes a device only with the ``uevent`` file and ``subsystem`` link the
    kernel writes beside it, and reads its properties from ``/run/udev/data/+pci:ADDRESS``
    (systemd src/libsystemd/sd-device/sd-device.c).
    """
    for device in (BRIDGE, GPU, NIC):
        path = (sysfs / "bus/pci/devices" / device.address).resolve()
        (path / "uevent").write_text(f"PCI_SLOT_NAME={device.address}\n")
        (path / "subsystem").symlink_to(os.path.relpath(sysfs / "bus/pci", path))
    data = run / "udev/data"
    data.mkdir(parents=True)
    for address, (vendor, model) in UDEV_NAMES.items():
        (data / f"+pci:{address}").write_text(f"E:ID_VENDOR_FROM_DATABASE={vendor}\nE:ID_MODEL_FROM_DATABASE={model}\n")


def test_the_real_sys_alone_gets_udev_names_and_nothing_else(short_root: Path) -> None:
    # GIVEN a host whose /sys (in a private mount namespace: the test's own tree) udev knows the GPU's names for
    sysfs, run = short_root / "sys", short_root / "run"
    write_topology(sysfs, NODES, [NIC, GPU, BRIDGE])
    write_udev_view(sysfs, run)

    # WHEN devctl reads /sys, the same tree elsewhere, and /sys once udev's database is gone
    named, simulated, without_udev = (
        from_plain(HostTopology, t)
        for t in in_mount_namespace(
            READ_AS_THE_HOST,
            {"/sys": sysfs, "/run": run},
            str(sysfs),
            # libudev checks that a device's path is on a real sysfs; systemd's documented switch for
            # test trees (docs/ENVIRONMENT.md) turns that check off.
            env={"SYSTEMD_DEVICE_VERIFY_SYSFS": "0"},
        )
    )

    # THEN udev adds the GPU's names to /sys and changes nothing else; a simulated root gets none
    vendor, model = UDEV_NAMES[GPU.address]
    plain = HostTopology(numa_nodes=NODES, pci_devices=(BRIDGE, GPU, NIC))
    named_gpu = dataclasses.replace(GPU, vendor_name=vendor, device_name=model)
    assert named == HostTopology(numa_nodes=NODES, pci_devices=(BRIDGE, named_gpu, NIC))
    assert simulated == plain
    # AND without udev's database the names are left out, nothing fails
    assert without_udev == plain
