"""The default simulated node's plugin GPUs are the PCIe tree's A100s, as on a real node (review: full-HA #1).

Without it, ``devctl hw`` warned that GPU-0..7 lead to no PCI function, the tree's A100s showed no holder, and
``devctl topo --pci`` had no GPU↔NIC line for ml/train-0 (GPU-0..3 and the VF 0000:3b:02.0 under one switch).
"""

from __future__ import annotations

from tests.helpers import devctl

A100 = "0x10de:0x20b5"


def test_hw_shows_train_0s_gpus_on_the_a100s_and_no_fake_plugin_functions(sim_node):
    result = devctl(sim_node.root, "hw", "-o", "json")
    doc = result.json
    rows = doc["devices"] if isinstance(doc, dict) else doc
    held = {r["pci"]: {f"{h['namespace']}/{h['pod']}" for d in r["logical"] for h in d["holders"] or ()} for r in rows}
    for address in ("0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0"):
        assert held[address] == {"ml/train-0"}, address
    ids = {d["id"] for r in rows for d in r["logical"] if d["resource"] == "nvidia.com/gpu"}
    assert {f"GPU-{n}" for n in (0, 1, 2, 3, 4, 6)} <= ids
    assert "nvidia.com/gpu GPU-0" not in result.stderr


def test_topo_pci_has_train_0s_gpu_nic_lines(sim_node):
    out = devctl(sim_node.root, "topo", "--pci").stdout
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("ml ") and "0000:3b:02.0" in ln]
    assert ["ml", "train-0", "trainer", "GPU-0", "0000:3b:02.0", "PIX"] in lines
    assert len(lines) == 4
