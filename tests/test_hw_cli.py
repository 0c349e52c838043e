"""``devctl hw`` (issue 33 item 1): the table a person reads and cli.md's JSON, on the simulated node and on a
snapshot file with time-slicing replicas."""

from __future__ import annotations

from pathlib import Path

from helpers import devctl, invoke

from devctl.core.collect import dump_snapshot
from devctl.model import (
    CdiDevice,
    CdiDeviceNode,
    CdiEdits,
    CdiSpec,
    CdiState,
    ContainerDevices,
    ContainerResources,
    Device,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    PciDevice,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
)

KEYS = ["pci", "class", "vendor_id", "device_id", "vendor", "model", "numa_node", "logical"]


def test_table_on_the_simulated_node(sim_node):
    r = devctl(sim_node.root, "hw")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["PCI", "CLASS", "NUMA", "MODEL", "LOGICAL", "HOLDERS"]
    assert all(len(line) <= 80 for line in lines)
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    # the SR-IOV VF ml/train-0 holds, by its ID (a PCI address); the DRA device inference/embed-0's claim holds
    assert rows["0000:3b:02.0"] == ["0000:3b:02.0", "nic", "0", "0x8086:0x1889", "1", "ml/train-0"]
    assert rows["0000:d0:00.0"][-2:] == ["1", "inference/embed-0"]
    assert rows["0000:17:00.0"][1:3] == ["gpu", "0"]
    # the allocated GPUs lead to the tree's A100s (the plugin's CDI names, 195:N); the two nobody holds are
    # named by nothing that leads to a function: one line, the rest shown
    assert rows["0000:17:00.0"][-2:] == ["1", "ml/train-0"]
    gpu_lines = [line for line in r.stderr.splitlines() if "nvidia.com/gpu" in line]
    assert len(gpu_lines) == 1 and gpu_lines[0].startswith("warning: hw: nvidia.com/gpu GPU-5, GPU-7:")

    only = devctl(sim_node.root, "hw", "3b:02.1")
    assert only.exit_code == 0
    assert [line.split()[0] for line in only.stdout.splitlines()[1:]] == ["0000:3b:02.1"]
    assert only.stdout.split()[-1] == "inference/serve-0"


def test_json_on_the_simulated_node_and_bad_addresses(sim_node):
    r = devctl(sim_node.root, "hw", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert list(doc) == ["devices", "errors"]
    assert all(list(d) == KEYS for d in doc["devices"])
    vf = next(d for d in doc["devices"] if d["pci"] == "0000:3b:02.0")
    assert vf["class"] == "nic" and vf["vendor_id"] == "0x8086" and vf["numa_node"] == 0
    assert vf["logical"] == [
        {
            "kind": "device-plugin",
            "resource": "intel.com/sriov_netdevice",
            "id": "0000:3b:02.0",
            "holders": [{"namespace": "ml", "pod": "train-0", "container": "trainer"}],
        }
    ]
    dra = next(d for d in doc["devices"] if d["pci"] == "0000:d0:00.0")
    assert [(x["kind"], x["resource"], x["id"]) for x in dra["logical"]] == [
        ("dra", "gpu.example.com", "sim-node/gpu-0")
    ]
    assert dra["logical"][0]["holders"][0]["pod"] == "embed-0"
    assert any(e["source"] == "hw" and "nvidia.com/gpu" in e["message"] for e in doc["errors"])

    missing = devctl(sim_node.root, "hw", "0000:99:00.0")
    assert missing.exit_code == 1 and "0000:99:00.0: no such physical device" in missing.stderr
    bad = devctl(sim_node.root, "hw", "GPU-0")
    assert bad.exit_code == 2 and "not a PCI address" in bad.stderr


def test_two_pods_on_one_gpu_through_replicas_from_a_snapshot_file(tmp_path: Path):
    gpu = "0000:17:00.0"
    node = CdiDeviceNode("/dev/nvidia0", "/dev/nvidia0", 195, 0, gpu, 0)
    own = CdiDevice("GPU-0", CdiEdits(device_nodes=(node,)))
    spec = CdiSpec("/etc/cdi/nvidia.yaml", 0, "nvidia.com/gpu", "0.6.0", devices=(own,))
    held = [("ml", "a", "GPU-0::0"), ("ml", "b", "GPU-0::1")]
    snap = NodeSnapshot(
        taken_at="2026-01-01T00:00:00.000Z",
        paths=NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs"),
        plugins=(PluginProbe("/r/k/device-plugins/gpu.sock", PluginStatus.SERVING, "nvidia.com/gpu", PluginOptions(),
                             tuple(Device(f"GPU-0::{n}") for n in range(4)), 0.5),),
        pods=tuple(PodResources(ns, name, (ContainerResources("main", (ContainerDevices("nvidia.com/gpu", (i,)),)),))
                   for ns, name, i in held),
        topology=HostTopology(pci_devices=(PciDevice(gpu, 0, "0x10de", "0x2330", "0x030200", "nvidia", None, "H100"),)),
        cdi=CdiState(("/etc/cdi",), (spec,)),
    )  # fmt: skip
    path = tmp_path / "node.json"
    with path.open("w") as f:
        dump_snapshot(snap, f)
    r = invoke("--from", str(path), "hw")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[1].split() == [gpu, "gpu", "0", "H100", "4", "ml/a,ml/b"]
    assert r.stderr == ""
