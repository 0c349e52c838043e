"""What ``devctl topo`` adds from the PCIe tree: ``--pci``'s ``"pci"`` and matrix, and each container's GPU↔NIC lines.

Kept out of the command itself so that its edit stays one call. The tree is read through the core
(``core.pci.read_pci``, under the command's ``--timeout``), never node/. ``topo -o json`` without ``--pci``
reads no tree and its JSON is what it was; ``topo``'s table reads it for the GPU↔NIC lines (only pairs sysfs
can tell; the tree's problems are said with ``--pci`` only). A snapshot file (``--from``) holds no PCI tree:
``--pci`` says so as one error, the rest shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import typer

from devctl.cli.common import options, run

if TYPE_CHECKING:
    from devctl.model import NodeSnapshot
    from devctl.render.table import TableStyle

PCI_HELP = "Add the PCIe relationship (PIX, PXB, PHB, NODE, SYS) of every pair of GPUs, accelerators and NICs"


def topo_pci(
    ctx: typer.Context, snapshot: NodeSnapshot, *, pci: bool, structured: bool
) -> tuple[NodeSnapshot, dict[str, Any], Callable[[TableStyle], str]]:
    """(the snapshot with the tree's errors, the JSON keys to add, the text to add under topo's tables)."""
    from devctl.base.errors import ErrorKind
    from devctl.model import SourceError

    opts = options(ctx)
    if opts.from_file:
        if not pci:
            return snapshot, {}, lambda style: ""
        error = SourceError(
            "pci-tree", "a snapshot file holds no PCI tree: run topo --pci on the node", ErrorKind.MISSING
        )
        empty: dict[str, Any] = {"pci": {"devices": [], "matrix": {}}}
        return replace(snapshot, errors=(*snapshot.errors, error)), empty, lambda style: ""
    if structured and not pci:
        return snapshot, {}, lambda style: ""
    from devctl.analyze.pcie import pci_answer
    from devctl.analyze.pcie_pairs import gpu_nic_pairs
    from devctl.core.pci import read_pci

    answer = run(read_pci(snapshot.paths.sysfs, opts.timeout))
    if pci:  # without --pci the GPU-NIC lines are what sysfs can tell; its problems are --pci's to say
        snapshot = replace(snapshot, errors=(*snapshot.errors, *answer.errors))
    pairs = gpu_nic_pairs(snapshot, answer.matrix)

    def table(style: TableStyle) -> str:
        from devctl.render.pcie import gpu_nic_table, pci_matrix_table

        parts = [gpu_nic_table(pairs, style)]
        if pci:
            parts.append(pci_matrix_table(answer.matrix, style))
        text = [p for p in parts if p]
        return ("\n" + "\n".join(text)) if text and style.headers else "".join(text)

    return snapshot, ({"pci": pci_answer(answer.matrix)} if pci else {}), table
