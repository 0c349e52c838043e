"""Doctor's PCIe check: a container's GPU and RDMA NIC across NUMA nodes while a closer pair is free now.

``gpu-nic-far`` (warning): a container holds a GPU and an RDMA-capable NIC (InfiniBand class 0x0207, or an
``infiniband/`` directory under the function: ``core.pci.read_pci``'s ``rdma``) that are ``SYS`` apart, and a
pair at least one step closer could be made now from its own devices and free ones of the same resources
(allocatable, held by no container, their PCI function known: a free NIC listed by its PCI address, as SR-IOV
VFs are). "Now": what was free when the pod was admitted cannot be known. GPUDirect RDMA between the two goes
through the CPUs' interconnect, if at all. Pure: the snapshot, the matrix and the RDMA NICs are given.
"""

from __future__ import annotations

from collections.abc import Iterable

from devctl.analyze.pcie_pairs import ORDER, PlacedDevice, container_devices, gpu_nic_pairs, sides
from devctl.model import Finding, NodeSnapshot, Severity
from devctl.model.pci import normalize_pci_address
from devctl.model.pcie import PcieMatrix, Relationship

CODE = "gpu-nic-far"
HINT = (
    "GPUDirect RDMA between them crosses the CPUs' interconnect; the topology manager aligns NUMA nodes, not "
    "PCIe switches: delete the pod so that it is admitted again, or pin the pair (a DRA claim with a "
    "matchAttribute on the PCIe root, or an SR-IOV resource per switch)"
)


def _free(snapshot: NodeSnapshot, resources: Iterable[str]) -> list[PlacedDevice]:
    """Free devices of ``resources`` whose ID is their PCI address: allocatable and held by no container."""
    wanted = set(resources)
    held = {(d.resource, i) for pod in snapshot.pods or () for c in pod.containers for d in c.devices for i in d.ids}
    out = []
    for d in snapshot.allocatable.devices if snapshot.allocatable else ():
        if d.resource not in wanted:
            continue
        for i in d.ids:
            address = normalize_pci_address(i)
            if address is not None and (d.resource, i) not in held:
                out.append(PlacedDevice(d.resource, i, address))
    return out


def _closer(
    matrix: PcieMatrix, gpus: list[PlacedDevice], nics: list[PlacedDevice], free: set[PlacedDevice]
) -> tuple[PlacedDevice, PlacedDevice, Relationship] | None:
    """The closest (GPU, NIC) pair with at least one free device, when it is closer than ``SYS``."""
    best: tuple[PlacedDevice, PlacedDevice, Relationship] | None = None
    for g in gpus:
        for n in nics:
            if g not in free and n not in free:
                continue
            rel = matrix.between(g.pci, n.pci)
            if rel is None or rel is Relationship.SYS:
                continue
            if best is None or ORDER.index(rel) < ORDER.index(best[2]):
                best = (g, n, rel)
    return best


def gpu_nic_findings(snapshot: NodeSnapshot, matrix: PcieMatrix, rdma: Iterable[str]) -> list[Finding]:
    """One ``gpu-nic-far`` warning per far (GPU, RDMA NIC) pair of a container when a closer pair is free now."""
    rdma = frozenset(rdma)
    gpus, nics = sides(matrix)
    listed = gpus | nics
    held = container_devices(snapshot)
    out: list[Finding] = []
    for pair in gpu_nic_pairs(snapshot, matrix):
        if pair.relationship is not Relationship.SYS or pair.nic.pci not in rdma:
            continue
        own = held[(pair.namespace, pair.pod, pair.container)]
        free = {d for d in _free(snapshot, {pair.gpu.resource, pair.nic.resource}) if d.pci in listed}
        candidates_g = [d for d in [*own, *free] if d.pci in gpus and d.resource == pair.gpu.resource]
        candidates_n = [d for d in [*own, *free] if d.pci in rdma and d.resource == pair.nic.resource]
        closer = _closer(matrix, candidates_g, candidates_n, free)
        if closer is None:
            continue
        g, n, rel = closer
        instead = n if n in free else g
        message = (
            f"container {pair.container} holds GPU {pair.gpu.pci} ({pair.gpu.resource} {pair.gpu.id}) and RDMA NIC "
            f"{pair.nic.pci} ({pair.nic.resource} {pair.nic.id}) across NUMA nodes (SYS); {instead.pci} "
            f"({instead.resource} {instead.id}) is free now and {g.pci} and {n.pci} are {rel.value}"
        )
        out.append(Finding(Severity.WARNING, CODE, f"{pair.namespace}/{pair.pod}", message, HINT))
    return out
