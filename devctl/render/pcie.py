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


def _bus(address: str) -> str:
    return address.rsplit(":", 1)[0]  # 0000:3b:02.1 -> 0000:3b


def _slot(address: str) -> str:
    return address.rsplit(".", 1)[0]  # 0000:3b:02.1 -> 0000:3b:02


def device_groups(devices: Sequence[PciFunction]) -> list[tuple[int, tuple[int, ...]]]:
    """(the index of each device shown, the indices of the functions folded into it), in the given order.

    A function folds into the first function before it on the same bus, below the same bridges, of the same
    vendor, class and NUMA node, when it is another function of that device (same bus and device number) or
    has another device ID (an SR-IOV VF: ``0x1889`` under the PF ``0x159b``). Functions of one device sit
    below the same bridges, so the matrix loses nothing by showing the first; distinct devices of one model
    (same device ID on their own device numbers) stay apart.
    """
    firsts: dict[tuple[object, ...], int] = {}
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(devices):
        key = (_bus(d.address), d.host_bridge, d.bridges, d.vendor_id, d.pci_class, d.numa_node)
        first = firsts.get(key)
        if first is not None:
            f = devices[first]
            vf = bool(d.device_id and f.device_id and d.device_id != f.device_id)
            if vf or _slot(d.address) == _slot(f.address):
                groups[first].append(i)
                continue
        firsts.setdefault(key, i)
        groups[i] = []
    return [(i, tuple(members)) for i, members in groups.items()]


def _per_block(names: Sequence[str]) -> int:
    """How many device columns fit WIDTH beside the row's label and its NUMA node (``<none>``); 8 at most."""
    label = max(len(n) for n in names)
    cell = max(label, 4)  # NODE
    return max(1, min(8, (WIDTH - label - 3 - len(NONE)) // (cell + 3)))


def _folded(members: Sequence[PciFunction], first: PciFunction) -> str:
    if not members:
        return ""
    vfs = sum(1 for m in members if m.device_id != first.device_id)
    more = len(members) - vfs
    parts = ([f"+{vfs} VF" + ("s" if vfs > 1 else "")] if vfs else []) + (
        [f"+{more} function" + ("s" if more > 1 else "")] if more else []
    )
    return ", ".join(parts) + "  "


def pci_matrix_table(matrix: PcieMatrix, style: TableStyle) -> str:
    """The matrix (a row and a column per device, and its NUMA node), the legend, and what the words mean.

    A device's other functions (an SR-IOV PF's VFs) are folded into it (``device_groups``) and counted in
    its legend line. More devices than 8 columns hold: the matrix in blocks of at most 8 columns, every
    row in each, so that every line fits 80 columns.
    """
    if not matrix.devices:
        return "no accelerators, GPUs, NICs or NVMe drives in the PCI tree\n"
    groups = device_groups(matrix.devices)
    shown = [i for i, _ in groups]
    devices = [matrix.devices[i] for i in shown]
    names = labels(devices)

    def block(cols: Sequence[int]) -> str:
        rows = [
            [name, *(_cell(matrix, i, j) for j in cols), _numa(matrix.devices[i].numa_node)]
            for name, i in zip(names, shown, strict=True)
        ]
        if not style.headers:
            return grid([], rows, style)
        return grid(["", *(names[shown.index(j)] for j in cols), "numa"], rows, style)

    if not style.headers:
        return block(shown)
    blocks = -(-len(shown) // _per_block(names))
    step = -(-len(shown) // blocks)  # blocks of even width: 25 devices are 7+7+7+4 columns, not 8+8+8+1
    table = "\n".join(block(shown[k : k + step]) for k in range(0, len(shown), step))
    legend = []
    width = max(len(n) for n in names)
    for name, (i, members) in zip(names, groups, strict=True):
        d = matrix.devices[i]
        what = " ".join(x for x in (d.vendor, d.model) if x) or f"{d.vendor_id or NONE}:{d.device_id or NONE}"
        cls = d.pci_class.value if d.class_id else UNKNOWN
        line = f"{name:<{width}}  {escape(d.address)}  {cls:<11}  numa {_numa(d.numa_node):<6}  "
        line += _folded([matrix.devices[m] for m in members], d)
        rest = escape(what)
        if not style.wide:
            rest = cut_middle(rest, max(WIDTH - len(line), 8))
        legend.append(line + rest)
    return table + "\n" + "\n".join(legend) + "\n\n" + "\n".join(_wrap(MEANING, WIDTH, "  ")) + "\n"


def _cell(matrix: PcieMatrix, i: int, j: int) -> str:
    cell = matrix.cells[i][j]
    return UNKNOWN if cell is None else cell.value


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
