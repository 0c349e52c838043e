"""The simulated node's time-sliced GPU (lab/sim/nvidia.py, issue 33 item 3): replicas held by two pods, and
what joins them to the GPU's PCI function as on a real node (a CDI spec naming /dev/nvidia8 as 195:8, and
``<sysfs>/dev/char/195:8`` into the scenario's PCIe tree)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from helpers import devctl

from devctl.lab.plugin.spec import PluginSpec, spec_from_mapping
from devctl.lab.sim import nvidia
from devctl.model import PciDevice

SHARED = "nvidia.com/gpu.shared"
UUID = "GPU-8"  # short as the node's GPU-0..GPU-7 (a real one is GPU-<uuid>)
CC = "0000:cc:00.0"


def test_hw_shows_one_gpu_with_two_pods_through_replicas(sim_node):
    r = devctl(sim_node.root, "hw", CC, "-o", "json")
    assert r.exit_code == 0, r.stderr
    (gpu,) = r.json["devices"]
    assert (gpu["pci"], gpu["class"], gpu["vendor_id"], gpu["numa_node"]) == (CC, "gpu", "0x10de", 1)
    assert [(d["resource"], d["id"]) for d in gpu["logical"]] == [(SHARED, f"{UUID}::{n}") for n in range(4)]
    holders = {h["pod"]: d["id"] for d in gpu["logical"] for h in d["holders"]}
    assert set(holders) == {"bot-0", "bot-1"} and len(set(holders.values())) == 2  # two replicas, one each
    table = devctl(sim_node.root, "hw", CC).stdout.splitlines()
    assert table[1].split()[-2:] == ["4", "chat/bot-0,chat/bot-1"]


def test_the_sim_writes_the_spec_and_the_char_link_a_real_node_has(sim_node):
    root = Path(sim_node.root)
    (spec_path,) = (root / "var/run/cdi").glob("k8s.device-plugin.nvidia.com-gpu.yaml")
    spec = yaml.safe_load(spec_path.read_text())
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    nodes = {d["name"]: d["containerEdits"]["deviceNodes"] for d in spec["devices"]}
    assert (
        nodes[UUID]
        == nodes["8"]
        == [{"path": "/dev/nvidia8", "hostPath": "/dev/nvidia8", "type": "c", "major": 195, "minor": 8}]
    )
    link = Path(sim_node.paths.sysfs, "dev/char/195:8")
    target = Path(os.path.realpath(link))
    assert target.name == CC and "pci0000:c6" in target.parts  # under its host bridge and switch, not the root bus
    assert (target / "vendor").read_text().strip() == "0x10de"


def gpu_function(address: str) -> PciDevice:
    return PciDevice(address, 0, "0x10de", "0x20b5", "0x030200", "nvidia")


def resource(name: str, ids: list[str]) -> PluginSpec:
    return spec_from_mapping({"name": name, "devices": [{"id": i} for i in ids]})


def test_replicas_are_one_gpu_and_each_resource_takes_the_next_functions():
    whole = resource("nvidia.com/gpu", ["GPU-a", "GPU-b"])
    shared = resource(SHARED, ["GPU-c::0", "GPU-c::1", "GPU-c::2"])
    nic = PciDevice("0000:3b:00.0", 0, "0x8086", "0x159b", "0x020000", "ice")
    functions = [gpu_function("0000:ca:00.0"), nic, gpu_function("0000:17:00.0"), gpu_function("0000:cc:00.0")]
    gpus = nvidia.gpus([resource("vendor.example/x", ["x-0"]), whole, shared], functions)
    assert [(g.index, g.id, g.pci.address, g.shared) for g in gpus] == [
        (0, "GPU-a", "0000:17:00.0", False),
        (1, "GPU-b", "0000:ca:00.0", False),
        (2, "GPU-c", "0000:cc:00.0", True),
    ]
    assert nvidia.char_devices(gpus) == {(195, 0): functions[2], (195, 1): functions[0], (195, 2): functions[3]}
    names = [d["name"] for d in (nvidia.spec(gpus) or {})["devices"]]
    assert names == ["GPU-a", "0", "GPU-b", "1", "GPU-c", "2"]  # the plugin's spec names every GPU it serves
    assert nvidia.spec(()) is None
    # More GPUs asked for than the scenario has: the rest get none.
    assert len(nvidia.gpus([resource("nvidia.com/gpu", ["g0", "g1", "g2"])], functions[:1])) == 1


def test_devices_name_each_replicas_gpu_in_wide_and_json_and_the_default_table_keeps_its_columns(sim_node):
    doc = devctl(sim_node.root, "devices", SHARED, "-o", "json").json
    assert [(d["id"], d["pci"]["address"]) for d in doc["devices"]] == [(f"{UUID}::{n}", CC) for n in range(4)]
    wide = devctl(sim_node.root, "devices", SHARED, "-o", "wide").stdout.splitlines()
    pci = wide[0].split().index("PCI")
    assert {line.split()[pci] for line in wide[1:]} == {CC}
    table = devctl(sim_node.root, "devices", SHARED).stdout.splitlines()
    assert table[0].split() == ["RESOURCE", "ID", "HEALTH", "NUMA", "ALLOCATED-TO"]
