"""The kubelet's CPU and memory manager state files and its config's policies: decoded, checked, shown in topo.

The checksum vectors are the kubelet's own (pkg/kubelet/cm/cpumanager/state
state_checkpoint_test.go); the simulated node writes the files as the static
policies do, and a test spoils each on purpose for the doctor finding.
"""

from __future__ import annotations

import json

import pytest
from helpers import devctl

from devctl.model import ErrorKind
from devctl.node.kubeletstate import StateError, cpu_checksum, read_cpu_state, read_kubelet_state

CPU_STATE = "var/lib/kubelet/cpu_manager_state"


@pytest.mark.parametrize(
    ("policy", "default", "entries", "checksum"),
    [
        ("none", "4-6", {}, 354655845),
        ("none", "1-3", {"pod": {"container1": "4-6", "container2": "1-3"}}, 3610638499),
    ],
)
def test_cpu_checksum_matches_the_kubelets(policy, default, entries, checksum):
    assert cpu_checksum(policy, default, entries) == checksum


def test_cpu_state_decodes_and_verifies(tmp_path):
    path = tmp_path / "cpu_manager_state"
    doc = {"policyName": "none", "defaultCpuSet": "1-3", "entries": {"pod": {"container1": "4-6"}}}
    path.write_text(json.dumps({**doc, "checksum": cpu_checksum("none", "1-3", {"pod": {"container1": "4-6"}})}))
    state = read_cpu_state(str(path))
    assert (state.policy, state.default_cpus, state.checksum_ok) == ("none", (1, 2, 3), True)
    assert [(a.pod_uid, a.container, a.cpus) for a in state.assignments] == [("pod", "container1", (4, 5, 6))]
    path.write_text(json.dumps({**doc, "checksum": 1}))
    assert read_cpu_state(str(path)).checksum_ok is False
    path.write_text(json.dumps({**doc, "checksum": 0}))  # 0: written by an old kubelet, nothing to verify
    assert read_cpu_state(str(path)).checksum_ok is None


@pytest.mark.parametrize(
    "content", ["{", "[]", '{"defaultCpuSet": "0"}', '{"policyName": "static", "defaultCpuSet": "x"}']
)
def test_bad_cpu_state_is_malformed(tmp_path, content):
    path = tmp_path / "cpu_manager_state"
    path.write_text(content)
    with pytest.raises(StateError) as err:
        read_cpu_state(str(path))
    assert err.value.kind == ErrorKind.MALFORMED


def test_a_fifo_does_not_hang_and_missing_files_are_no_error(tmp_path):
    import os

    os.mkfifo(tmp_path / "cpu_manager_state")
    state, errors = read_kubelet_state(str(tmp_path))
    assert state is None
    assert [e.kind for e in errors] == [ErrorKind.OTHER]  # what the one safe reader says of a FIFO (devctl.node.files)


def test_topo_shows_the_simulated_state_and_doctor_is_quiet(sim_node):
    r = devctl(sim_node.root, "topo", "-o", "json")
    state = r.json["kubelet_state"]
    assert state["cpu_policy"] == "static" and state["cpu_checksum_ok"] is True
    assert state["topology_manager_policy"] == "best-effort"
    assert all(a["agrees"] for a in state["cpu_assignments"]) and len(state["cpu_assignments"]) == 4
    assert "CPU manager:      policy static" in devctl(sim_node.root, "topo").stdout
    codes = {f["code"] for f in devctl(sim_node.root, "doctor", "-o", "json").json["findings"]}
    assert not {c for c in codes if c.startswith(("cpu-", "topology-policy"))}


def _spoil(root, edit):
    path = root / CPU_STATE
    doc = json.loads(path.read_text())
    edit(doc)
    doc["checksum"] = cpu_checksum(doc["policyName"], doc["defaultCpuSet"], doc["entries"])
    path.write_text(json.dumps(doc))


def _codes(root):
    return {(f["code"], f["subject"]) for f in devctl(root, "doctor", "-o", "json").json["findings"]}


def test_doctor_finds_each_state_problem(sim_node):
    root = sim_node.root
    uid = next(u for u, c in json.loads((root / CPU_STATE).read_text())["entries"].items() if "trainer" in c)

    def mismatch(doc):
        doc["entries"][uid]["trainer"] = "30-31"

    _spoil(root, mismatch)
    found = _codes(root)
    assert any(code == "cpu-state-mismatch" for code, _ in found)
    assert any(code == "cpu-exclusive-overlap" for code, _ in found)  # 30-31 are in the shared pool too

    doc = json.loads((root / CPU_STATE).read_text())
    doc["checksum"] += 1
    (root / CPU_STATE).write_text(json.dumps(doc))
    assert ("cpu-state-checksum", str(root / CPU_STATE)) in _codes(root)

    def other_policy(doc):
        doc["policyName"] = "fancy"

    _spoil(root, other_policy)
    assert ("cpu-state-policy", str(root / CPU_STATE)) in _codes(root)

    config = root / "var/lib/kubelet/config.yaml"
    config.write_text(config.read_text().replace("best-effort", "single-numa-node"))
    assert ("topology-policy-violated", "inference/serve-0/server") in _codes(root)
