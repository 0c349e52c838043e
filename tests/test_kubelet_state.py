"""The kubelet's CPU and memory manager state files and its config's policies: decoded, checked, shown in topo.

The checksum vectors are the kubelet's own (pkg/kubelet/cm/cpumanager/state and
memorymanager/state, state_checkpoint_test.go); the simulated node writes the files as the static
policies do, and a test spoils each on purpose for the doctor finding.
"""

from __future__ import annotations

import json

import pytest
from helpers import devctl

from devctl.model import ErrorKind
from devctl.node.kubeletstate import (
    StateError,
    cpu_checksum,
    cpu_checksum_v1,
    memory_checksums,
    read_cpu_state,
    read_kubelet_state,
    read_memory_state,
)

CPU_STATE = "var/lib/kubelet/cpu_manager_state"
MEMORY_STATE = "var/lib/kubelet/memory_manager_state"
# The memory manager's "Restore valid checkpoint" case, checksum and all.
MEMORY_DOC = {
    "policyName": "static",
    "machineState": {
        "0": {
            "numberOfAssignments": 0,
            "memoryMap": {
                "memory": {"total": 2048, "systemReserved": 512, "allocatable": 1536, "reserved": 512, "free": 1024}
            },
            "cells": [],
        }
    },
    "entries": {"pod": {"container1": [{"numaAffinity": [0], "type": "memory", "size": 512}]}},
}
MEMORY_CHECKSUM = 4215593881


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


def test_memory_checksum_matches_the_kubelets():
    assert memory_checksums(MEMORY_DOC)[0] == MEMORY_CHECKSUM


def test_memory_state_verifies_and_a_tampered_one_is_one_error_with_the_rest_shown(tmp_path):
    (tmp_path / "memory_manager_state").write_text(json.dumps({**MEMORY_DOC, "checksum": MEMORY_CHECKSUM}))
    (tmp_path / "cpu_manager_state").write_text(
        json.dumps({"policyName": "none", "defaultCpuSet": "4-6", "entries": {}, "checksum": 354655845})
    )
    state, errors = read_kubelet_state(str(tmp_path))
    assert errors == [] and state is not None and state.memory is not None
    assert (state.memory.checksum_ok, state.cpu.checksum_ok) == (True, True)

    tampered = json.loads(json.dumps(MEMORY_DOC))
    tampered["entries"]["pod"]["container1"][0]["size"] = 1024  # a hand edit: more memory than the kubelet gave
    (tmp_path / "memory_manager_state").write_text(json.dumps({**tampered, "checksum": MEMORY_CHECKSUM}))
    state, errors = read_kubelet_state(str(tmp_path))
    assert [(e.kind, e.source) for e in errors] == [(ErrorKind.MALFORMED, "kubelet-state")]
    assert "memory_manager_state: checksum 4215593881 does not match" in errors[0].message
    assert "\n" not in errors[0].message
    assert state is not None and state.memory is not None and state.memory.checksum_ok is False
    assert [m.size for a in state.memory.assignments for m in a.memory] == [1024]  # still decoded and shown
    assert state.cpu is not None and state.cpu.checksum_ok is True


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["machineState"].update({"x": {}}),  # Go's map[int] refuses a key that is not a number
        lambda d: d["entries"]["pod"]["container1"][0].update({"size": -1}),  # uint64
        lambda d: d["machineState"]["0"].update({"cells": "0"}),
    ],
)
def test_a_memory_state_go_would_not_decode_is_malformed(tmp_path, edit):
    doc = json.loads(json.dumps(MEMORY_DOC))
    edit(doc)
    (tmp_path / "memory_manager_state").write_text(json.dumps({**doc, "checksum": 1}))
    with pytest.raises(StateError) as err:
        read_memory_state(str(tmp_path / "memory_manager_state"))
    assert err.value.kind == ErrorKind.MALFORMED


def test_topo_shows_a_tampered_memory_state_as_one_warning_and_the_rest(sim_node):
    path = sim_node.root / MEMORY_STATE
    assert json.loads(devctl(sim_node.root, "topo", "-o", "json").stdout)["kubelet_state"]["memory_checksum_ok"] is True
    doc = json.loads(path.read_text())
    doc["policyName"] = "None"
    path.write_text(json.dumps(doc))
    r = devctl(sim_node.root, "topo")
    assert r.exit_code == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if "memory_manager_state" in line] == [
        line for line in r.stderr.splitlines() if "checksum" in line
    ]
    assert len([line for line in r.stderr.splitlines() if "memory_manager_state: checksum" in line]) == 1
    assert "Memory manager:   policy None" in r.stdout and "checksum MISMATCH" in r.stdout
    assert "CPU manager:      policy static" in r.stdout


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


def test_a_none_policy_file_in_the_v1_layout_verifies_and_doctor_is_quiet(tmp_path):
    # A real published file: the kubelet tries the v1 layout first and accepts it (issue 29).
    state = tmp_path / CPU_STATE
    state.parent.mkdir(parents=True)
    state.write_text('{"policyName":"none","defaultCpuSet":"","checksum":3242152201}')
    cpu = read_cpu_state(str(state))
    assert (cpu.checksum_ok, cpu.checksum_rule) == (True, "v1 layout, as every kubelet reads it (tried first)")
    r = devctl(tmp_path, "doctor", "-o", "json")
    assert not [f for f in r.json["findings"] if "cpu_manager_state" in f"{f['subject']} {f['message']}"]
    assert "CPU checksum:     v1 layout, as every kubelet reads it" in devctl(tmp_path, "topo").stdout


def test_a_file_an_older_kubelet_still_reads_is_never_called_removable(tmp_path):
    # v1 entries by container ID: kubelet <=1.32 migrates them while those containers run, newer ones refuse.
    state = tmp_path / CPU_STATE
    state.parent.mkdir(parents=True)
    doc = {"policyName": "static", "defaultCPUSet": "7-9", "entries": {"containerID1": "4-6"}}
    state.write_text(json.dumps({**doc, "checksum": cpu_checksum_v1("static", "7-9", doc["entries"])}))
    (finding,) = [
        f for f in devctl(tmp_path, "doctor", "-o", "json").json["findings"] if f["code"] == "cpu-state-checksum"
    ]
    assert "kubelet ≤1.32" in finding["hint"] and "keep the file" in finding["hint"]
    assert "remove" not in finding["hint"] and "delete" not in finding["hint"]
