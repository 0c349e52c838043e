"""Each container's GPUs and NICs on the PCIe tree (``devctl topo``'s GPU↔NIC lines, doctor's ``gpu-nic-far``).

Pure functions over a snapshot and a PCIe matrix (``analyze/pcie``). A container's device leads to its PCI
function as ``devices`` finds it (``analyze/hardware``: an ID that is a PCI address, or the device nodes of
the CDI names handed out for it); a device none of these lead to, or whose function the matrix does not
list, has no place in a pair: only what sysfs can tell is said.

Which side a function is on: ``gpu`` for the GPU and accelerator classes (0x03, 0x0b40, 0x12), ``nic`` for
network controllers (0x02).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from devctl.analyze.hardware import cdi_addresses
from devctl.model import NodeSnapshot
from devctl.model.pci import normalize_pci_address
from devctl.model.pcie import PciClass, PcieMatrix, Relationship

GPU_CLASSES = frozenset({PciClass.GPU, PciClass.ACCELERATOR})
# From nearest to farthest: what "closer" means.
ORDER = (Relationship.X, Relationship.PIX, Relationship.PXB, Relationship.PHB, Relationship.NODE, Relationship.SYS)


@dataclass(frozen=True)
class PlacedDevice:
    """One logical device and the PCI function it leads to."""

    resource: str  # the resource, or a DRA claim's driver
    id: str  # the device ID, or ``<pool>/<device>`` for DRA
    pci: str


@dataclass(frozen=True)
class GpuNicPair:
    """A GPU and a NIC one container holds, and how the PCIe tree connects them."""

    namespace: str
    pod: str
    container: str
    gpu: PlacedDevice
    nic: PlacedDevice
    relationship: Relationship


def _placed(resource: str, ids: Iterable[str], via_cdi: dict[tuple[str, str], str]) -> list[PlacedDevice]:
    out = []
    for i in ids:
        address = via_cdi.get((resource, i)) or normalize_pci_address(i)
        if address is not None:
            out.append(PlacedDevice(resource, i, address))
    return out


def container_devices(snapshot: NodeSnapshot) -> dict[tuple[str, str, str], list[PlacedDevice]]:
    """(namespace, pod, container) -> the devices it holds whose PCI function the node names."""
    via_cdi = cdi_addresses(snapshot)
    out: dict[tuple[str, str, str], list[PlacedDevice]] = {}
    for pod in snapshot.pods or ():
        for c in pod.containers:
            placed: list[PlacedDevice] = []
            for d in c.devices:
                placed += _placed(d.resource, d.ids, via_cdi)
            for claim in c.dynamic_resources:
                for cd in claim.devices:
                    placed += _placed(cd.driver, [f"{cd.pool}/{cd.device}"], via_cdi)
            if placed:
                out[(pod.namespace, pod.name, c.name)] = list(dict.fromkeys(placed))
    return out


def sides(matrix: PcieMatrix) -> tuple[frozenset[str], frozenset[str]]:
    """(GPU addresses, NIC addresses) among the matrix's devices."""
    gpus = frozenset(d.address for d in matrix.devices if d.pci_class in GPU_CLASSES)
    nics = frozenset(d.address for d in matrix.devices if d.pci_class is PciClass.NIC)
    return gpus, nics


def gpu_nic_pairs(snapshot: NodeSnapshot, matrix: PcieMatrix) -> tuple[GpuNicPair, ...]:
    """Every (GPU, NIC) pair of every container holding both, where sysfs tells how they are connected."""
    gpus, nics = sides(matrix)
    out = []
    for (namespace, pod, container), devices in sorted(container_devices(snapshot).items()):
        for g in (d for d in devices if d.pci in gpus):
            for n in (d for d in devices if d.pci in nics):
                rel = matrix.between(g.pci, n.pci)
                if rel is not None:
                    out.append(GpuNicPair(namespace, pod, container, g, n, rel))
    return tuple(out)
