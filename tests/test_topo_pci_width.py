"""``devctl topo --pci`` at 80 columns on a real-sized node: a PF's VFs folded into it, the matrix in blocks.

cli.md: "The table fits 80 columns for up to 8 devices"; past 8 it must still be read at 80x24. The JSON
keeps every function and every pair (tests/test_topo_pci_cli.py checks its shape).
"""

from __future__ import annotations

from helpers import devctl

from devctl.analyze.pcie import relationships
from devctl.lab.sim.thread import SimHandle
from devctl.model.pcie import PciClass, PciFunction, PciTree
from devctl.render.pcie import labels, pci_matrix_table
from devctl.render.table import TableStyle


def _fn(
    address: str, cls: PciClass, device_id: str = "0x2330", numa: int | None = 0, class_id: str = "x"
) -> PciFunction:
    bus = address.split(":")[1]
    return PciFunction(
        address=address,
        pci_class=cls,
        class_id="0x030200" if class_id == "x" else class_id,
        vendor_id="0x10de" if cls is not PciClass.NIC else "0x8086",
        device_id=device_id,
        host_bridge="pci0000:00" if int(bus, 16) < 0x80 else "pci0000:80",
        bridges=(f"0000:00:{int(bus, 16) % 0x80:02x}.0",),
        numa_node=numa,
    )


def _table(devices: list[PciFunction], style: TableStyle | None = None) -> str:
    return pci_matrix_table(relationships(PciTree(tuple(devices)), devices), style or TableStyle())


def _headers(text: str) -> list[list[str]]:
    """The column labels of each block of the matrix (its lines that end in NUMA)."""
    return [line.split()[:-1] for line in text.splitlines() if line.split()[-1:] == ["NUMA"]]


def test_a_4_device_node_keeps_one_matrix() -> None:
    devices = [_fn(f"0000:{b:02x}:00.0", PciClass.GPU) for b in (0x05, 0x06)]
    devices += [_fn(f"0000:{b:02x}:00.0", PciClass.NIC, "0x159b", numa=1) for b in (0x85, 0x86)]
    text = _table(devices)
    assert _headers(text) == [["GPU0", "GPU1", "NIC0", "NIC1"]]
    assert text.splitlines()[1].split() == ["GPU0", "X", "PHB", "SYS", "SYS", "0"]


def test_a_pf_shows_its_vfs_as_a_count_and_many_devices_come_in_blocks_of_8_columns() -> None:
    # a PF at 3b:00.0 with 4 VFs at 3b:02.0-3 (another device ID, as iavf's 0x1889 under ice's 0x159b)
    nic = [_fn("0000:3b:00.0", PciClass.NIC, "0x159b")]
    nic += [_fn(f"0000:3b:02.{f}", PciClass.NIC, "0x1889") for f in range(4)]
    # 14 GPUs of one model on one bus, each its own device number: distinct devices, never folded
    gpus = [_fn(f"0000:d0:{d:02x}.0", PciClass.GPU, numa=d % 2) for d in range(14)]
    text = _table(nic + gpus)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    blocks = _headers(text)
    assert len(blocks) > 1 and all(len(b) <= 8 for b in blocks)
    shown = [label for b in blocks for label in b]
    assert shown == ["NIC0", *(f"GPU{i}" for i in range(14))]  # every device a column, once
    (legend,) = [line for line in lines if line.startswith("NIC0 ") and "0000:" in line]
    assert "0000:3b:00.0" in legend and "+4 VFs" in legend
    assert "0000:3b:02.0" not in text  # a VF is counted, not a row
    # every block has a row per device, the NIC's relation to GPU0 (both on NUMA 0, another host bridge)
    rows = [line.split() for line in lines if line.startswith("NIC0 ") and "0000:" not in line]
    assert len(rows) == len(blocks) and rows[0][:3] == ["NIC0", "X", "NODE"]


def test_the_groups_keep_every_function() -> None:
    from devctl.render.pcie import device_groups

    devices = [_fn("0000:3b:00.0", PciClass.NIC, "0x159b"), _fn("0000:3b:00.1", PciClass.NIC, "0x159b")]
    devices += [_fn("0000:3b:02.0", PciClass.NIC, "0x1889"), _fn("0000:d0:00.0", PciClass.GPU)]
    assert device_groups(devices) == [(0, (1, 2)), (3, ())]  # a second function of 3b:00 and a VF fold in
    assert "+1 VF, +1 function" in _table(devices)


def test_an_unreadable_class_reads_question_mark_in_the_legend() -> None:
    devices = [_fn("0000:05:00.0", PciClass.GPU), _fn("0000:06:00.0", PciClass.OTHER, class_id="")]
    assert labels(devices) == ["GPU0", "PCI0"]
    (legend,) = [line for line in _table(devices).splitlines() if line.startswith("PCI0 ") and "0000:" in line]
    assert legend.split()[:3] == ["PCI0", "0000:06:00.0", "?"]


def test_the_default_sims_topo_pci_fits_80_columns_and_lists_every_device(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "topo", "--pci")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    legend = [line.split()[0] for line in lines if len(line.split()) > 1 and line.split()[1].startswith("0000:")]
    columns = [label for b in _headers(result.stdout) for label in b]
    assert len(legend) > 8 and sorted(columns) == sorted(legend)  # each shown device a column, once
    # the JSON still holds every function, the folded VFs too
    body = devctl(sim_node.root, "topo", "--pci", "-o", "json").json
    assert len(body["pci"]["devices"]) >= len(legend)
