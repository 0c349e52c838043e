"""``devctl topo --pci`` and ``topo``'s GPU↔NIC lines on the simulated node, as a user runs them.

The default node's containers hold no GPU and NIC that devctl can both place (its plugin GPUs' CDI names have no
spec there, on purpose: tests/test_dra_views.py); the lines are shown on the default node plus one pod,
ml/rdma-0, whose container holds the free DRA GPU gpu-1 (NUMA 0, 0000:d0:01.0) and an SR-IOV VF of an E810.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import yaml
from helpers import devctl

from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import SimHandle, running_sim


@pytest.fixture
def rdma_node(short_root: Path) -> Iterator[SimHandle]:
    data = yaml.safe_load(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())
    data["pods"].append(
        {
            "namespace": "ml",
            "name": "rdma-0",
            "containers": [{"name": "worker", "requests": {"intel.com/sriov_netdevice": 1}}],
        }
    )
    claim = {"namespace": "ml", "name": "rdma-gpu", "driver": "gpu.example.com", "devices": ["gpu-1"]}
    data["dra"]["claims"].append({**claim, "pod": "ml/rdma-0", "container": "worker"})
    with running_sim(short_root, parse_scenario(data)) as handle:
        yield handle


RELATIONSHIPS = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", None}


def test_topo_pci_json_has_the_cli_contracts_shape(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "topo", "--pci", "-o", "json")
    assert result.exit_code == 0, result.stderr
    body = result.json
    assert {"numa_nodes", "alignment", "pci", "errors"} <= set(body)
    pci = body["pci"]
    devices = {d["pci"]: d for d in pci["devices"]}
    gpu = devices["0000:17:00.0"]
    assert set(gpu) == {"pci", "class", "vendor_id", "device_id", "vendor", "model", "numa_node"}
    assert (gpu["class"], gpu["vendor_id"], gpu["device_id"], gpu["numa_node"]) == ("gpu", "0x10de", "0x20b5", 0)
    assert devices["0000:3b:02.0"]["class"] == "nic"
    matrix = pci["matrix"]
    assert set(matrix) == set(devices) and all(set(row) == set(devices) for row in matrix.values())
    assert all(matrix[a][a] == "X" for a in devices)
    assert all(cell in RELATIONSHIPS for row in matrix.values() for cell in row.values())
    assert matrix["0000:17:00.0"]["0000:3b:02.0"] == "PIX"  # behind switch A on NUMA 0
    assert matrix["0000:17:00.0"]["0000:98:00.0"] == "SYS"
    assert body["errors"] == []


def test_topo_json_without_pci_is_unchanged(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "topo", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert "pci" not in result.json


def test_topo_shows_a_containers_gpu_and_nic_and_topo_pci_the_matrix(rdma_node: SimHandle) -> None:
    result = devctl(rdma_node.root, "topo")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.split()[:1] == ["NAMESPACE"] and line.split()[-1] == "PCIE")
    assert header.split() == ["NAMESPACE", "POD", "CONTAINER", "GPU", "NIC", "PCIE"]
    # ml/rdma-0's worker: the DRA GPU on bus d0's host bridge (NUMA 0) and a VF behind an E810's switch: one
    # line, NODE when the kubelet gave it a NUMA-0 VF, SYS for a NUMA-1 one
    (pair,) = [line.split() for line in lines[lines.index(header) + 1 :] if line.split()[:2] == ["ml", "rdma-0"]]
    vf = pair[4]
    assert pair[:4] == ["ml", "rdma-0", "worker", "sim-node/gpu-1"]
    assert pair[5] == ("NODE" if vf.startswith("0000:3b:") else "SYS")
    # -o json without --pci stays topo's contract; with it, the pair's cell says the same
    body = devctl(rdma_node.root, "topo", "--pci", "-o", "json").json
    assert body["pci"]["matrix"]["0000:d0:01.0"][vf] == pair[5]
    wide = devctl(rdma_node.root, "topo", "--pci")
    assert wide.exit_code == 0, wide.stderr
    assert any(line.split()[:2] == ["GPU0", "X"] for line in wide.stdout.splitlines())
    assert "SYS = across NUMA nodes" in wide.stdout.replace("\n  ", " ")


def test_a_snapshot_file_holds_no_pci_tree_and_says_so_once(sim_node: SimHandle, tmp_path: Path) -> None:
    saved = tmp_path / "node.json"
    assert devctl(sim_node.root, "snapshot", "-f", str(saved)).exit_code == 0
    result = devctl(sim_node.root, "--from", str(saved), "topo", "--pci", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["pci"] == {"devices": [], "matrix": {}}
    (error,) = [e for e in result.json["errors"] if e["source"] == "pci-tree"]
    assert error["kind"] == "missing" and "snapshot file" in error["message"]
    assert result.json["numa_nodes"]  # the rest still shown
