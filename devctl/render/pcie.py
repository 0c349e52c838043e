"""``devctl topo --pci`` for people: the PCIe matrix in ``nvidia-smi topo -m``'s style, and ``topo``'s GPU↔NIC lines.

The matrix names each device by a short label (``GPU0``, ``ACC0``, ``NIC0``, ``NVME0``: its class and its
index among that class, by address), so that 8 devices fit 80 columns; a legend line per label gives its PCI
address, class, NUMA node, vendor and model (cut to 80 columns unless ``-o wide``), and one line says what the
words mean. A relationship sysfs cannot tell is ``?``; an unknown NUMA node ``<none>``, as in every table.
"""

from __future__ import annotations

from collections.abc import Sequence

from devctl.analyze.pcie_pairs import GpuNicPair
from devctl.base.escape import escape
from devctl.model.pcie import PciClass, PcieMatrix, PciFunction
from devctl.render.style import NONE
from devctl.render.table import WIDTH, TableStyle, cut_middle, grid

_LABEL = {
    PciClass.GPU: "GPU",
    PciClass.ACCELERATOR: "ACC",
    PciClass.NIC: "NIC",
    PciClass.NVME: "NVME",
    PciClass.OTHER: "PCI",
}
UNKNOWN = "?"
MEANING = (
    "X = itself, PIX = at most one PCIe switch between, PXB = several switches, PHB = through a host bridge, "
    "NODE = across host bridges of one NUMA node, SYS = across NUMA nodes, ? = sysfs cannot tell"
)


def labels(devices: Sequence[PciFunction]) -> list[str]:
    """``GPU0``, ``GPU1``, ``NIC0`` …: each device's class and its index among that class, in the given order."""
    seen: dict[PciClass, int] = {}
    out = []
    for d in devices:
        n = seen.get(d.pci_class, 0)
        seen[d.pci_class] = n + 1
        out.append(f"{_LABEL[d.pci_class]}{n}")
    return out


def _numa(node: int | None) -> str:
    return NONE if node is None or node < 0 else str(node)


def _wrap(text: str, width: int, indent: str) -> list[str]:
    lines, line = [], ""
    for w in text.split(" "):
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = indent + w
        else:
            line = f"{line} {w}" if line else w
    return [*lines, line]


def pci_matrix_table(matrix: PcieMatrix, style: TableStyle) -> str:
    """The matrix (a row and a column per device, and its NUMA node), the legend, and what the words mean."""
    if not matrix.devices:
        return "no accelerators, GPUs, NICs or NVMe drives in the PCI tree\n"
    names = labels(matrix.devices)
    rows = [
        [name, *((UNKNOWN if cell is None else cell.value) for cell in row), _numa(d.numa_node)]
        for name, d, row in zip(names, matrix.devices, matrix.cells, strict=True)
    ]
    table = grid(["", *names, "numa"], rows, style) if style.headers else grid([], rows, style)
    if not style.headers:
        return table
    legend = []
    width = max(len(n) for n in names)
    for name, d in zip(names, matrix.devices, strict=True):
        what = " ".join(x for x in (d.vendor, d.model) if x) or f"{d.vendor_id or NONE}:{d.device_id or NONE}"
        line = f"{name:<{width}}  {escape(d.address)}  {d.pci_class.value:<11}  numa {_numa(d.numa_node):<6}  "
        rest = escape(what)
        if not style.wide:
            rest = cut_middle(rest, max(WIDTH - len(line), 8))
        legend.append(line + rest)
    return table + "\n" + "\n".join(legend) + "\n\n" + "\n".join(_wrap(MEANING, WIDTH, "  ")) + "\n"


def gpu_nic_table(pairs: Sequence[GpuNicPair], style: TableStyle) -> str:
    """One line per (GPU, NIC) pair of a container: how the PCIe tree connects them; '' when there are none."""
    headers = ["namespace", "pod", "container", "gpu", "nic", "pcie"]
    if style.wide:
        headers[4:4] = ["gpu-pci"]
        headers[6:6] = ["nic-pci"]
    rows = []
    for p in pairs:
        row: list[object] = [p.namespace, p.pod, p.container, p.gpu.id, p.nic.id, p.relationship.value]
        if style.wide:
            row[4:4] = [p.gpu.pci]
            row[6:6] = [p.nic.pci]
        rows.append(row)
    return grid(headers, rows, style, cut=(0, 1, 2, 3, 4))
