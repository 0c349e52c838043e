"""The PCIe relationship of every pair of devices (``devctl topo --pci``): pure functions over the tree's values.

The rule, the one ``../shared/testdata/pci/README.md`` states and hwloc's tree agrees with:

- ``X`` on the diagonal;
- same host bridge: take the lowest bridge above both (the longest common top of their bridge chains).
  ``PIX`` when each device is at most one bridge below it, ``PXB`` when either is deeper, ``PHB`` when
  there is no bridge above both (they meet only at the host bridge);
- different host bridges: ``NODE`` when both have the same known NUMA node, ``SYS`` when their known nodes
  differ, None (``null``: sysfs cannot tell) when either node is ``-1`` or unreadable.

How a PCIe switch counts: a switch is an upstream port (a bridge) with one downstream port (a bridge) per
slot under it. Two devices behind two downstream ports of one switch meet at its upstream port, each one
bridge (its downstream port) below it: ``PIX``, the switch counted ONCE, as ``nvidia-smi topo -m`` counts it.
Two functions of one device meet at the bridge above the device, zero bridges below: ``PIX``. Devices behind
two switches under one root port meet at the root port, two bridges (upstream and downstream port) below
it: ``PXB``. Devices under two root ports of one host bridge: ``PHB``. A device directly on a root port and
one behind a switch under the same root port: ``PXB`` (two bridges on the second's side), as hwloc's tree
reads by the same rule.

Which devices are listed (``listed``): every function of class gpu (0x03), accelerator (0x0b40, 0x12),
nic (0x02) and nvme (0x0108), and every function whose class cannot be read (``class`` null in JSON), sorted
by address; bridges and other functions are not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from devctl.model.pcie import PciClass, PcieMatrix, PciFunction, PciTree, Relationship, pci_class_of

LISTED_CLASSES = frozenset({PciClass.GPU, PciClass.ACCELERATOR, PciClass.NIC, PciClass.NVME})


def listed(tree: PciTree) -> tuple[PciFunction, ...]:
    """The functions ``topo --pci`` shows: accelerators, GPUs, NICs and NVMe drives, by address."""
    return tuple(sorted((f for f in tree.functions if shown_class(f.class_id)), key=lambda f: f.address))


def shown_class(class_id: str) -> bool:
    """Whether a function whose sysfs ``class`` reads ``class_id`` is listed: a listed class, or unknown
    (``""``: unreadable, so it may be a GPU)."""
    return not class_id or pci_class_of(class_id) in LISTED_CLASSES


def relationship(a: PciFunction, b: PciFunction) -> Relationship | None:
    """How ``a`` and ``b`` are connected; None when sysfs cannot tell."""
    if a.address == b.address:
        return Relationship.X
    if a.host_bridge != b.host_bridge:
        if a.numa_node is None or b.numa_node is None or a.numa_node < 0 or b.numa_node < 0:
            return None
        return Relationship.NODE if a.numa_node == b.numa_node else Relationship.SYS
    down_a = a.bridges[::-1]  # from the host bridge down
    down_b = b.bridges[::-1]
    common = 0
    for x, y in zip(down_a, down_b, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return Relationship.PHB
    if len(down_a) - common <= 1 and len(down_b) - common <= 1:
        return Relationship.PIX
    return Relationship.PXB


def relationships(tree: PciTree, devices: Iterable[PciFunction] | None = None) -> PcieMatrix:
    """The matrix of ``devices`` (``listed(tree)`` when None): every pair, both ways."""
    chosen = listed(tree) if devices is None else tuple(devices)
    n = len(chosen)
    rows: list[list[Relationship | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        rows[i][i] = Relationship.X
        for j in range(i + 1, n):
            rows[i][j] = rows[j][i] = relationship(chosen[i], chosen[j])
    return PcieMatrix(devices=chosen, cells=tuple(tuple(row) for row in rows))


def pci_answer(matrix: PcieMatrix) -> dict[str, Any]:
    """The ``"pci"`` value of ``devctl topo --pci -o json`` (cli.md): the devices and the matrix."""
    return {
        "devices": [
            {
                "pci": d.address,
                "class": d.pci_class.value if d.class_id else None,  # null: its class could not be read
                "vendor_id": d.vendor_id or None,
                "device_id": d.device_id or None,
                "vendor": d.vendor,
                "model": d.model,
                "numa_node": d.numa_node,
            }
            for d in matrix.devices
        ],
        "matrix": matrix.as_mapping(),
    }
