"""``devctl topo --pci``'s pieces: the matrix table, a container's GPU↔NIC pairs, and doctor's ``gpu-nic-far``.

The node is a fake one: a PCIe tree written by the simulator's writer under tmp_path (two NUMA nodes, a switch
on each with GPUs and RDMA NICs behind it), and a snapshot whose pods hold devices listed by PCI address (as
SR-IOV VFs and vfio-pci passthrough GPUs are).
"""

from __future__ import annotations

from pathlib import Path

from devctl.analyze.doctor_pcie import CODE, gpu_nic_findings
from devctl.analyze.pcie import relationships
from devctl.analyze.pcie_pairs import gpu_nic_pairs
from devctl.core.pci import PciAnswer, read_pci_sync
from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.sysfs import write_topology
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerResources,
    NodePaths,
    NodeSnapshot,
    PodResources,
    Severity,
)
from devctl.model.pcie import PciClass, PcieMatrix, PciFunction, PciTree, Relationship
from devctl.render.pcie import gpu_nic_table, labels, pci_matrix_table
from devctl.render.table import TableStyle

PATHS = NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs")
GPU, NIC = "example.com/gpu", "example.com/rdma"


def _device(address: str, cls: str) -> dict[str, object]:
    return {"address": address, "vendor": "0x15b3", "device": "0x101b", "class": cls}


def fake_node(tmp_path: Path) -> PciAnswer:
    """NUMA 0: a switch with GPUs 0000:05, 0000:06 and the RDMA NIC 0000:07 (InfiniBand class); NUMA 1: the same
    at 0000:85, 0000:86 and 0000:87."""
    host = [
        {
            "host_bridge": f"0000:{base:02x}",
            "numa_node": numa,
            "switches": [
                {
                    "devices": [
                        _device(f"0000:{base + 5:02x}:00.0", "0x030200"),
                        _device(f"0000:{base + 6:02x}:00.0", "0x030200"),
                        _device(f"0000:{base + 7:02x}:00.0", "0x020700"),
                    ]
                }
            ],
        }
        for base, numa in ((0x00, 0), (0x80, 1))
    ]
    scenario = parse_scenario({"numa_nodes": [{"id": 0, "cpus": "0-1"}, {"id": 1, "cpus": "2-3"}], "pcie": host})
    write_topology(tmp_path / "sys", scenario.numa_nodes, scenario.pci_devices)
    answer = read_pci_sync(str(tmp_path / "sys"), names=False)
    assert answer.errors == ()
    return answer


def snapshot(holds: dict[str, list[str]], allocatable: dict[str, list[str]]) -> NodeSnapshot:
    """One pod ml/train-0 whose container ``main`` holds ``holds`` (resource -> IDs)."""
    container = ContainerResources("main", devices=tuple(ContainerDevices(r, tuple(ids)) for r, ids in holds.items()))
    return NodeSnapshot(
        taken_at="2026-01-01T00:00:00Z",
        paths=PATHS,
        pods=(PodResources("ml", "train-0", (container,)),),
        allocatable=AllocatableResources(devices=tuple(ContainerDevices(r, tuple(i)) for r, i in allocatable.items())),
    )


ALL = {GPU: ["0000:05:00.0", "0000:06:00.0", "0000:85:00.0", "0000:86:00.0"], NIC: ["0000:07:00.0", "0000:87:00.0"]}


def test_a_containers_gpu_and_nic_pairs_say_how_far_apart_they_are(tmp_path: Path) -> None:
    answer = fake_node(tmp_path)
    snap = snapshot({GPU: ["0000:05:00.0", "0000:85:00.0"], NIC: ["0000:07:00.0"]}, ALL)
    pairs = gpu_nic_pairs(snap, answer.matrix)
    assert [(p.gpu.pci, p.nic.pci, p.relationship) for p in pairs] == [
        ("0000:05:00.0", "0000:07:00.0", Relationship.PIX),
        ("0000:85:00.0", "0000:07:00.0", Relationship.SYS),
    ]
    text = gpu_nic_table(pairs, TableStyle())
    assert text.splitlines()[0].split() == ["NAMESPACE", "POD", "CONTAINER", "GPU", "NIC", "PCIE"]
    assert text.splitlines()[2].split() == ["ml", "train-0", "main", "0000:85:00.0", "0000:07:00.0", "SYS"]
    # a container with a GPU and no NIC has no line
    assert gpu_nic_pairs(snapshot({GPU: ["0000:05:00.0"]}, ALL), answer.matrix) == ()


def test_doctor_warns_when_gpu_and_rdma_nic_are_sys_apart_and_a_closer_nic_is_free(tmp_path: Path) -> None:
    answer = fake_node(tmp_path)
    assert answer.rdma == {"0000:07:00.0", "0000:87:00.0"}  # class 0x0207: InfiniBand
    # GIVEN a container with the GPU on NUMA 0 and the NIC on NUMA 1, while the NIC beside its GPU is free
    snap = snapshot({GPU: ["0000:05:00.0"], NIC: ["0000:87:00.0"]}, ALL)
    (finding,) = gpu_nic_findings(snap, answer.matrix, answer.rdma)
    assert (finding.severity, finding.code, finding.subject) == (Severity.WARNING, CODE, "ml/train-0")
    assert "0000:05:00.0" in finding.message and "0000:87:00.0" in finding.message
    assert "0000:07:00.0" in finding.message and "free now" in finding.message and "PIX" in finding.message


def test_doctor_is_silent_when_the_pair_is_close_or_nothing_closer_is_free(tmp_path: Path) -> None:
    answer = fake_node(tmp_path)
    close = snapshot({GPU: ["0000:05:00.0"], NIC: ["0000:07:00.0"]}, ALL)
    assert gpu_nic_findings(close, answer.matrix, answer.rdma) == []
    # far apart, but every other GPU and NIC is unhealthy (not allocatable): no closer pair can be made now
    held = {GPU: ["0000:05:00.0"], NIC: ["0000:87:00.0"]}
    far = snapshot(held, held)
    assert gpu_nic_findings(far, answer.matrix, answer.rdma) == []
    # a free GPU beside the held NIC is a closer pair too
    (finding,) = gpu_nic_findings(
        snapshot(held, {**held, GPU: ["0000:05:00.0", "0000:85:00.0"]}), answer.matrix, answer.rdma
    )
    assert "0000:85:00.0" in finding.message
    # far apart and a closer NIC free, but the NIC cannot do RDMA: no GPUDirect RDMA to miss
    free_close = snapshot({GPU: ["0000:05:00.0"], NIC: ["0000:87:00.0"]}, ALL)
    assert gpu_nic_findings(free_close, answer.matrix, frozenset()) == []


def _function(i: int, cls: PciClass, model: str | None = None, numa: int | None = 0) -> PciFunction:
    host = "pci0000:00" if i < 4 else "pci0000:80"
    return PciFunction(
        address=f"0000:{i + 1:02x}:00.0",
        pci_class=cls,
        class_id="0x030200",
        vendor_id="0x10de",
        device_id="0x2330",
        host_bridge=host,
        bridges=("0000:00:01.0",) if i < 4 else (),
        numa_node=numa,
        vendor="NVIDIA Corporation" if model else None,
        model=model,
    )


def test_the_matrix_of_8_devices_fits_80_columns_with_a_legend_line_each() -> None:
    long_model = "GH100 [H100 SXM5 80GB] with a name much longer than any terminal line would hold " * 2
    devices = [_function(i, PciClass.GPU, long_model) for i in range(4)] + [
        _function(i, PciClass.NIC, "MT2910 Family [ConnectX-7]", numa=-1 if i == 7 else 1) for i in range(4, 8)
    ]
    matrix = relationships(tree_of(devices), devices)
    text = pci_matrix_table(matrix, TableStyle())
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == [*labels(matrix.devices), "NUMA"]
    assert labels(matrix.devices) == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"]
    assert lines[1].split() == ["GPU0", "X", "PIX", "PIX", "PIX", "SYS", "SYS", "SYS", "?", "0"]
    assert lines[8].split()[-1] == "<none>"  # NUMA -1: unknown, and the pairs across host bridges with it "?"
    legend = [line for line in lines if line.startswith(("GPU", "NIC")) and "0000:" in line]
    assert len(legend) == 8 and legend[0].split()[:2] == ["GPU0", "0000:01:00.0"]
    assert "…" in legend[0]  # the long model cut in its middle
    # -o wide keeps the model whole
    assert long_model.strip() in pci_matrix_table(matrix, TableStyle(wide=True))


def test_a_name_from_outside_is_escaped_before_the_terminal() -> None:
    devices = [_function(0, PciClass.GPU, "evil\x1b[2Jmodel")]
    text = pci_matrix_table(relationships(tree_of(devices), devices), TableStyle())
    assert "\x1b" not in text


def test_no_listed_devices_is_one_line() -> None:
    assert pci_matrix_table(PcieMatrix(), TableStyle()).count("\n") == 1


def tree_of(devices: list[PciFunction]) -> PciTree:
    return PciTree(functions=tuple(devices))
