"""The PCIe tree of the node (``devctl topo --pci``, doctor's GPU and NIC distance): the use-case the faces call.

``read_pci`` reads ``<sysfs>``'s PCI tree (``node/pcitree``) in a thread under the command's deadline and
hands back the tree, the matrix of its accelerators, GPUs, NICs and NVMe drives (``analyze/pcie``), and every
problem as a ``SourceError``; it never raises for what the node holds. A tree not read within the deadline is
an empty answer and one ``timeout`` error (the thread is left to finish on its own: it only reads files).

``rdma_capable`` says which NICs can do RDMA (InfiniBand class 0x0207, or an ``infiniband/`` directory under
the function in sysfs, as mlx5 and irdma make), read here once so that doctor's check stays pure.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from devctl.analyze.pcie import relationships
from devctl.base.errors import ErrorKind
from devctl.base.waits import within
from devctl.model import SourceError
from devctl.model.pcie import PciClass, PcieMatrix, PciTree

__all__ = ["PciAnswer", "read_pci", "read_pci_sync"]

_SOURCE = "pci-tree"


@dataclass(frozen=True)
class PciAnswer:
    """The node's PCIe tree, the matrix of its listed devices, the NICs that can do RDMA, and what went wrong."""

    tree: PciTree = field(default_factory=PciTree)
    matrix: PcieMatrix = field(default_factory=PcieMatrix)
    rdma: frozenset[str] = frozenset()  # addresses of NICs that can do RDMA
    errors: tuple[SourceError, ...] = ()


def read_pci_sync(sysfs: str, *, names: bool = True, pci_ids: str | None = None) -> PciAnswer:
    """``read_pci``'s work, blocking: for a thread, a bench or a test."""
    from devctl.node.pcitree import read_pci_tree

    tree, errors = read_pci_tree(sysfs, names=names, pci_ids=pci_ids)
    matrix = relationships(tree)
    rdma = frozenset(
        d.address
        for d in matrix.devices
        if d.pci_class is PciClass.NIC
        and (d.class_id.lower().startswith("0x0207") or _has_infiniband(sysfs, d.address))
    )
    return PciAnswer(tree=tree, matrix=matrix, rdma=rdma, errors=errors)


def _has_infiniband(sysfs: str, address: str) -> bool:
    try:
        return os.path.isdir(os.path.join(sysfs, "bus", "pci", "devices", address, "infiniband"))
    except (OSError, ValueError):
        return False


async def read_pci(sysfs: str, timeout: float, *, names: bool = True, pci_ids: str | None = None) -> PciAnswer:
    """The PCIe tree under ``sysfs`` read in a thread within ``timeout`` seconds; failures as ``SourceError``."""
    try:
        return await within(asyncio.to_thread(read_pci_sync, sysfs, names=names, pci_ids=pci_ids), max(timeout, 0.001))
    except asyncio.TimeoutError:
        message = f"{sysfs}: the PCI tree was not read within {timeout:g} s"
        return PciAnswer(errors=(SourceError(_SOURCE, message, ErrorKind.TIMEOUT),))
    except OSError as err:  # read_pci_tree reports what it meets; this is a last guard, one line
        message = f"{sysfs}: cannot read the PCI tree: {err.strerror or err}"
        return PciAnswer(errors=(SourceError(_SOURCE, message, ErrorKind.of_oserror(err)),))
