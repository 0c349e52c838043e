"""devctl's PCIe matrix against hwloc's, on the sysfs trees of three real machines (issue 33, Correctness).

The trees are hwloc's own test inputs (open-mpi/hwloc ``tests/hwloc/linux/*.tar.bz2``, copied unchanged to
``../shared/testdata/pci``). For each: extract under tmp_path, run Debian's ``lstopo-no-graphics --input DIR
--whole-io --of xml -`` on it, derive each pair's relationship from hwloc's XML tree by the README's rule
(host bridges, bridges between, the NUMA node hwloc puts each host bridge under: our own walk below), and
compare with ``devctl.analyze.pcie.relationships`` over ``devctl.node.pcitree.read_pci_tree`` on every pair
hwloc decides. Pairs across host bridges are left out where hwloc puts a host bridge on no single NUMA node,
or where a device's sysfs ``numa_node`` is not hwloc's node (the README says why).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from devctl.analyze.pcie import listed, relationships
from devctl.model.pcie import PciClass, Relationship, pci_class_of
from devctl.node.pcitree import read_pci_tree
from tests.shared_data import shared

LSTOPO = shutil.which("lstopo-no-graphics")
NICS_AND_ACCELERATORS = {PciClass.GPU, PciClass.ACCELERATOR, PciClass.NIC}

# tarball -> the README's counts among its accelerators and NICs (classes gpu, accelerator, nic)
MACHINES = {
    "32intel64-2p8co2t+8ve.tar.bz2": {"PIX": 21, "NODE": 45},
    "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2": {"PIX": 1, "PHB": 3, "SYS": 6},
    "40intel64-2g2n4c+pcilocality.tar.bz2": {"PIX": 2, "PHB": 8},
}


@pytest.fixture(scope="module", params=sorted(MACHINES))
def machine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(tarball name, its extracted fsroot): extracted once for both tests."""
    tarball: str = request.param
    path = shared("pci", tarball)
    if not path.exists():
        pytest.skip(f"shared test data not found at {path} (a checkout without ../shared)")
    target = tmp_path_factory.mktemp("fsroot")
    with tarfile.open(path) as archive:
        archive.extractall(target, filter="data")
    (root,) = [p for p in target.iterdir() if p.is_dir()]
    return tarball, root


# --- hwloc's side: our own walk of its XML ------------------------------------------------------------


def _single_node(nodeset: str | None) -> int | None:
    """The one NUMA node of an hwloc nodeset (``0x00000002``, or ``0x...,0x...`` in 32-bit words); else None."""
    if not nodeset:
        return None
    words = nodeset.split(",")
    value = 0
    for word in words:
        value = (value << 32) | int(word, 16)
    if value == 0 or value & (value - 1):
        return None
    return value.bit_length() - 1


def _hwloc_devices(xml: str) -> dict[str, tuple[int, tuple[str, ...], int | None]]:
    """address -> (host bridge's id, bridges above it from the host bridge down, its host bridge's NUMA node)."""
    found: dict[str, tuple[int, tuple[str, ...], int | None]] = {}

    def walk(obj: ET.Element, nodeset: str | None, host: tuple[int, int | None] | None, chain: tuple[str, ...]) -> None:
        kind = obj.get("type")
        if kind == "Bridge" and (obj.get("bridge_type") or "").startswith("0-"):
            host, chain = (id(obj), _single_node(nodeset)), ()
        elif obj.get("pci_busid") and host is not None:
            busid = obj.get("pci_busid", "")
            if kind == "PCIDev":
                found[busid] = (host[0], chain, host[1])
            if kind == "Bridge":
                chain = (*chain, busid)
        if obj.get("nodeset") is not None and host is None:
            nodeset = obj.get("nodeset")
        for child in obj.findall("object"):
            walk(child, nodeset, host, chain)

    for top in ET.fromstring(xml).findall("object"):
        walk(top, None, None, ())
    return found


def _hwloc_relationship(
    a: tuple[int, tuple[str, ...], int | None], b: tuple[int, tuple[str, ...], int | None]
) -> Relationship | None:
    """The README's rule over hwloc's tree; None where hwloc does not decide."""
    if a[0] != b[0]:
        if a[2] is None or b[2] is None:
            return None
        return Relationship.NODE if a[2] == b[2] else Relationship.SYS
    common = 0
    for x, y in zip(a[1], b[1], strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return Relationship.PHB
    return Relationship.PIX if len(a[1]) - common <= 1 and len(b[1]) - common <= 1 else Relationship.PXB


def _pci_type_class(xml: str) -> dict[str, PciClass]:
    return {
        obj.get("pci_busid", ""): pci_class_of("0x" + (obj.get("pci_type") or "")[:4] + "00")
        for obj in ET.fromstring(xml).iter("object")
        if obj.get("type") == "PCIDev"
    }


# --- the comparison -----------------------------------------------------------------------------------


@pytest.mark.skipif(
    LSTOPO is None,
    reason="hwloc's lstopo-no-graphics is not installed (make test INSTALL_HWLOC=1, or apt-get install hwloc)",
)
def test_matrix_agrees_with_hwloc_on_every_pair_hwloc_decides(machine: tuple[str, Path]) -> None:
    tarball, root = machine
    assert LSTOPO is not None
    xml = subprocess.run(
        [LSTOPO, "--input", str(root), "--whole-io", "--of", "xml", "-"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    hwloc = _hwloc_devices(xml)
    classes = _pci_type_class(xml)
    tree, errors = read_pci_tree(str(root / "sys"), names=False)
    assert errors == ()
    devices = listed(tree)
    # The same devices on both sides: every listed class hwloc sees is listed by devctl, and no other.
    assert {d.address for d in devices} == {
        a for a, c in classes.items() if c in {PciClass.GPU, PciClass.ACCELERATOR, PciClass.NIC, PciClass.NVME}
    }
    matrix = relationships(tree)
    compared = 0
    disagreements = []
    for a in devices:
        for b in devices:
            if a.address >= b.address:
                continue
            ha, hb = hwloc[a.address], hwloc[b.address]
            theirs = _hwloc_relationship(ha, hb)
            if theirs is None:
                continue
            if ha[0] != hb[0] and (a.numa_node != ha[2] or b.numa_node != hb[2]):
                continue  # sysfs' numa_node is not hwloc's node (the NVMe added by hand, numa_node -1)
            compared += 1
            ours = matrix.between(a.address, b.address)
            if ours != theirs:
                disagreements.append(f"{a.address} {b.address}: devctl {ours}, hwloc {theirs}")
    assert disagreements == []
    assert compared >= sum(MACHINES[tarball].values())


def test_matrix_counts_are_the_readmes(machine: tuple[str, Path]) -> None:
    """The README's stated counts of each relationship among the machine's accelerators and NICs."""
    tarball, root = machine
    tree, errors = read_pci_tree(str(root / "sys"), names=False)
    assert errors == ()
    devices = [d for d in listed(tree) if d.pci_class in NICS_AND_ACCELERATORS]
    matrix = relationships(tree, devices)
    counts = Counter(str(matrix.cells[i][j]) for i in range(len(devices)) for j in range(i + 1, len(devices)))
    assert dict(counts) == MACHINES[tarball]
