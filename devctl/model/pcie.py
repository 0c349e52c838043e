"""The PCIe tree as sysfs nests it, and the relationship of each pair of devices on it (``devctl topo --pci``).

Values only: ``node/pcitree`` reads them, ``analyze/pcie`` decides the relationships. A function's place in
the tree is its host bridge (the ``pciDDDD:BB`` directory under ``<sysfs>/devices``) and the chain of PCI
bridges between it and that host bridge, nearest first: the directory nesting of sysfs, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from devctl.base.errors import Word


class PciClass(Word):
    """What a PCI function is, by its class code (the ``class`` of the CLI contract)."""

    GPU = "gpu"  # 0x03: display controllers
    ACCELERATOR = "accelerator"  # 0x0b40 co-processors, 0x12 processing accelerators
    NIC = "nic"  # 0x02: network controllers (Ethernet, InfiniBand, ...)
    NVME = "nvme"  # 0x0108: non-volatile memory controllers
    OTHER = "other"


def pci_class_of(class_id: str) -> PciClass:
    """The class of a function whose sysfs ``class`` reads ``class_id`` (``0x030200``); OTHER when unreadable."""
    text = class_id.strip().lower()
    text = text[2:] if text.startswith("0x") else text
    if len(text) != 6 or any(c not in "0123456789abcdef" for c in text):
        return PciClass.OTHER
    if text.startswith("03"):
        return PciClass.GPU
    if text.startswith(("0b40", "12")):
        return PciClass.ACCELERATOR
    if text.startswith("02"):
        return PciClass.NIC
    if text.startswith("0108"):
        return PciClass.NVME
    return PciClass.OTHER


class Relationship(Word):
    """How two PCI functions are connected, in ``nvidia-smi topo -m``'s words."""

    X = "X"  # the function itself
    PIX = "PIX"  # at most one PCIe switch between them (behind one switch, or two functions of one device)
    PXB = "PXB"  # several bridges (switches) between them, not the host bridge
    PHB = "PHB"  # they meet only at their PCIe host bridge
    NODE = "NODE"  # different host bridges of one NUMA node
    SYS = "SYS"  # different NUMA nodes


@dataclass(frozen=True)
class PciFunction:
    """One PCI function and its place in the tree."""

    address: str  # 0000:3b:00.0, as the kernel spells it
    pci_class: PciClass
    class_id: str  # sysfs' ``class``: 0x030200; "" when unreadable
    vendor_id: str  # 0x10de; "" when unreadable
    device_id: str  # 0x2330; "" when unreadable
    host_bridge: str  # pci0000:3a: the root directory under <sysfs>/devices
    bridges: tuple[str, ...] = ()  # addresses of the bridges above it up to the host bridge, nearest first
    numa_node: int | None = None  # sysfs' numa_node, -1 kept as the kernel says it; None when unreadable
    vendor: str | None = None  # names from the PCI IDs database, None when unknown
    model: str | None = None


@dataclass(frozen=True)
class PciTree:
    """Every PCI function read, sorted by address."""

    functions: tuple[PciFunction, ...] = ()

    def function(self, address: str) -> PciFunction | None:
        """The function at ``address`` (the kernel's spelling), or None."""
        return next((f for f in self.functions if f.address == address), None)


@dataclass(frozen=True)
class PcieMatrix:
    """The relationship of every pair of ``devices``; ``cells[i][j]`` is None where sysfs cannot tell."""

    devices: tuple[PciFunction, ...] = ()
    cells: tuple[tuple[Relationship | None, ...], ...] = ()

    def between(self, a: str, b: str) -> Relationship | None:
        """The relationship of the devices at addresses ``a`` and ``b``; KeyError when one is not in the matrix."""
        index = {d.address: i for i, d in enumerate(self.devices)}
        return self.cells[index[a]][index[b]]

    def as_mapping(self) -> dict[str, dict[str, str | None]]:
        """``{a: {b: "PIX" | ... | None}}``: the ``matrix`` of the CLI contract's JSON."""
        names = [d.address for d in self.devices]
        return {
            a: {b: (None if cell is None else cell.value) for b, cell in zip(names, row, strict=True)}
            for a, row in zip(names, self.cells, strict=True)
        }
