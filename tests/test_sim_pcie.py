"""The simulated node's PCIe tree (scenario ``pcie:``): what devctl reads from it, and that hwloc reads the same.

The tree is written as ``devctl sim`` writes it (lab/sim/node.py's ``_prepare_root``: the scenario's functions,
then one per simulated device, and the ``/sys/dev/char`` links), under tmp_path, without starting the node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devctl.analyze.pcie import relationships
from devctl.core.pci import read_pci_sync
from devctl.lab.sim.drasysfs import char_devices, write_char_links
from devctl.lab.sim.scenario import Scenario, ScenarioError, default_scenario, parse_scenario
from devctl.lab.sim.sysfs import write_topology
from devctl.model.pcie import Relationship
from devctl.node.pcitree import read_pci_tree
from tests.test_pcie_hwloc import _hwloc_devices, _hwloc_relationship

LSTOPO = shutil.which("lstopo-no-graphics")


def written(root: Path, scenario: Scenario) -> Path:
    """``root`` laid out as the simulator lays out its sysfs for ``scenario``; returns ``<root>/sys``."""
    chars = char_devices(scenario.dra, scenario.resources, scenario.pci_devices)
    listed = set(scenario.pci_devices)
    pci = scenario.pci_devices + tuple(dict.fromkeys(d for d in chars.values() if d not in listed))
    sysfs = root / "sys"
    write_topology(sysfs, scenario.numa_nodes, pci)
    write_char_links(sysfs, chars)
    (root / "proc").mkdir(exist_ok=True)  # lstopo --input takes a directory with proc/ and sys/ as a machine
    return sysfs


def test_default_node_has_switches_on_two_numa_nodes(tmp_path: Path) -> None:
    sysfs = written(tmp_path, default_scenario())
    answer = read_pci_sync(str(sysfs), names=False)
    assert answer.errors == ()
    m = answer.matrix
    # a GPU and the NIC's VF behind one switch; two GPUs behind two switches of one socket; across sockets
    assert m.between("0000:17:00.0", "0000:3b:02.0") is Relationship.PIX
    assert m.between("0000:31:00.0", "0000:3b:00.0") is Relationship.PIX
    assert m.between("0000:17:00.0", "0000:4b:00.0") is Relationship.NODE
    assert m.between("0000:17:00.0", "0000:98:00.0") is Relationship.SYS
    assert m.between("0000:98:00.0", "0000:af:02.1") is Relationship.PIX
    assert m.between("0000:3b:02.0", "0000:af:02.0") is Relationship.SYS
    # the NICs' physical functions can do RDMA (infiniband/ under them); the VFs are not said to
    assert answer.rdma == {"0000:3b:00.0", "0000:af:00.0"}
    # the VF's /sys/dev/char link leads to the function under its switch, as bus/pci/devices does
    vf = Path(os.path.realpath(sysfs / "bus" / "pci" / "devices" / "0000:3b:02.0"))
    assert vf.parent.name == "0000:16:02.0" and vf.parent.parent.name == "0000:15:00.0"
    links = {os.path.realpath(p) for p in (sysfs / "dev" / "char").iterdir()}
    assert str(vf) in links


@pytest.mark.skipif(
    LSTOPO is None,
    reason="hwloc's lstopo-no-graphics is not installed (make test INSTALL_HWLOC=1, or apt-get install hwloc)",
)
def test_hwloc_reads_the_simulated_tree_as_devctl_does(tmp_path: Path) -> None:
    """hwloc builds its tree from bus numbers (config) and localities (local_cpus), devctl from the nesting."""
    sysfs = written(tmp_path, default_scenario())
    assert LSTOPO is not None
    xml = subprocess.run(
        [LSTOPO, "--input", str(tmp_path), "--whole-io", "--of", "xml", "-"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    hwloc = _hwloc_devices(xml)
    tree, errors = read_pci_tree(str(sysfs), names=False)
    assert errors == ()
    matrix = relationships(tree)
    assert {d.address for d in matrix.devices} <= set(hwloc)
    # every function sits on its host bridge's NUMA node, as hwloc places the bridge (no bridge spans two nodes)
    placed = {d.address: (d.numa_node, hwloc[d.address][2]) for d in matrix.devices}
    assert {a: p for a, p in placed.items() if p[0] != p[1]} == {}
    compared, disagreements, decided = 0, [], set()
    for a in matrix.devices:
        for b in matrix.devices:
            if a.address >= b.address:
                continue
            theirs = _hwloc_relationship(hwloc[a.address], hwloc[b.address])
            if theirs is None:
                continue
            compared += 1
            decided |= {a.address, b.address}
            ours = matrix.between(a.address, b.address)
            if ours != theirs:
                disagreements.append(f"{a.address} {b.address}: devctl {ours}, hwloc {theirs}")
    assert disagreements == []
    # the DRA GPUs are among the compared, on their own nodes' bridges (d0: NUMA 0, e0: NUMA 1)
    assert {"0000:d0:00.0", "0000:d0:01.0", "0000:e0:00.0", "0000:e0:01.0"} <= decided
    assert matrix.between("0000:d0:00.0", "0000:e0:00.0") is Relationship.SYS
    assert matrix.between("0000:17:00.0", "0000:d0:00.0") is Relationship.NODE
    assert compared == len(matrix.devices) * (len(matrix.devices) - 1) // 2  # hwloc decides every pair


FLAT = {
    "numa_nodes": [{"id": 0, "cpus": "0-3"}],
    "pci_devices": [{"address": "0000:17:00.0", "numa_node": 0, "class": "0x030200", "vendor": "0x10de"}],
}


def test_an_old_flat_pci_devices_list_still_loads_and_is_written_on_its_root_bus(tmp_path: Path) -> None:
    scenario = parse_scenario(FLAT)
    sysfs = written(tmp_path, scenario)
    function = Path(os.path.realpath(sysfs / "bus" / "pci" / "devices" / "0000:17:00.0"))
    assert function.parent.name == "pci0000:17"
    tree, errors = read_pci_tree(str(sysfs), names=False)
    assert errors == () and [f.bridges for f in tree.functions] == [()]


def test_devices_right_on_root_ports_and_a_switch(tmp_path: Path) -> None:
    scenario = parse_scenario(
        {
            "numa_nodes": [{"id": 0, "cpus": "0-3"}],
            "pcie": [
                {
                    "host_bridge": "0000:00",
                    "numa_node": 0,
                    "switches": [{"devices": [{"address": "0000:05:00.0", "class": "0x030200"}]}],
                    "devices": [{"address": "0000:10:00.0", "class": "0x020700"}],  # InfiniBand
                }
            ],
        }
    )
    answer = read_pci_sync(str(written(tmp_path, scenario)), names=False)
    assert answer.errors == ()
    assert answer.matrix.between("0000:05:00.0", "0000:10:00.0") is Relationship.PHB
    assert answer.rdma == {"0000:10:00.0"}


@pytest.mark.parametrize(
    ("pcie", "words"),
    [
        ([{"host_bridge": "14", "numa_node": 0}], "pcie[0].host_bridge: '14' is not a domain and root bus"),
        ([{"host_bridge": "0000:14", "switches": [{"devices": [{"address": "0000:15:00.0"}]}]}], "leaves no bus"),
        ([{"host_bridge": "0000:14", "bus": 3}], "pcie[0]: unknown field 'bus'"),
        (
            [{"host_bridge": "0000:00", "switches": [{"devices": [{"address": "0001:05:00.0"}]}]}],
            "not in the host bridge's domain",
        ),
    ],
)
def test_a_tree_that_cannot_be_laid_out_is_one_line_naming_the_field(pcie: list[object], words: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "pcie": pcie})
    assert words in str(caught.value) and "\n" not in str(caught.value)
