"""``devctl fit``'s resource fit (issue 31, piece FX5): the node's allocatable as the kubelet computes it, what
running pods request (unknown to devctl, said so), and the notes in the table, the JSON and the TUI's ``:fit``.

The default simulated node (lab/sim/scenarios/default.yaml): 32 CPUs, 0-1 reserved (``reservedSystemCPUs``), so
the kubelet's allocatable cpu is 30; its config.yaml is read back as the kubelet's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import devctl

from devctl.core.admission_inputs import REQUESTED_UNKNOWN, node_allocatable
from devctl.lab.sim.kubelet_config import config_yaml
from devctl.lab.sim.thread import SimHandle
from devctl.model import NodePaths
from devctl.model.machine import Cpu, KubeletPolicy, MachineTopology
from devctl.node.kubeletconfig import policy_of, read_kubelet_policy

GI = 2**30
MI = 2**20


def _machine(cpus: int = 8, memory: int = 16 * GI) -> MachineTopology:
    return MachineTopology(cpus=tuple(Cpu(i, i, 0, 0) for i in range(cpus)), memory={0: memory})


def test_cpu_beyond_allocatable_but_within_the_machine_is_out_of_cpu_with_the_kubelets_message(
    sim_node: SimHandle,
) -> None:
    # 31 CPUs: the machine has 32, but reservedSystemCPUs 0-1 leave the kubelet 30 allocatable.
    result = devctl(sim_node.root, "fit", "cpu=31", "-o", "json")
    assert result.exit_code == 1, result.stderr
    body = result.json
    assert (body["admit"], body["reason"]) == (False, "OutOfcpu")
    assert body["message"].startswith("Node didn't have enough resource: cpu, requested: 31000, ")
    assert body["message"].endswith("capacity: 30000")
    assert body["allocatable"]["cpu"] == 30000
    assert body["allocatable"]["memory"] > 0
    assert body["requested"] is None  # unknown, never 0
    assert REQUESTED_UNKNOWN in body["notes"]
    # the contract's keys stay as they are; notes, allocatable and requested are beside them
    assert {"admit", "reason", "message", "policy", "containers", "fits_with", "errors"} <= set(body)


def test_within_allocatable_is_admitted_and_the_table_says_what_it_checked_against(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "cpu=30")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ADMIT"
    assert any(line.startswith("node: allocatable cpu 30, memory ") for line in lines), lines
    assert any(line.endswith("running pods request unknown") for line in lines), lines
    notes = [line for line in lines if line.startswith("note: ")]
    assert notes and notes[0].startswith("note: cpu/memory requests of running pods unknown")
    # said once, not again per resource by the model
    assert not any("did not count other pods' requests" in line for line in lines), lines
    assert all(len(line) <= 80 for line in lines), lines


def test_the_table_shows_what_would_fit_one_line_each(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "cpu=31")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("REJECT: OutOfcpu: Node didn't have enough resource: cpu")
    assert "fits with:" in lines
    assert any(line.startswith("note: cpu/memory requests of running pods unknown") for line in lines)
    assert all(len(line) <= 80 for line in lines), lines


def test_the_tui_fit_shows_the_same_lines(sim_node: SimHandle) -> None:
    from devctl.tui.answers import fit_job

    text = fit_job(["cpu=31"])(sim_node.paths, 5.0, 80)
    lines = text.splitlines()
    assert lines[0].startswith("REJECT: OutOfcpu")
    assert any(line.startswith("node: allocatable cpu 30") for line in lines), lines
    assert any(line.startswith("note: cpu/memory requests of running pods unknown") for line in lines), lines


def test_allocatable_is_capacity_less_kube_and_system_reserved_and_hard_eviction() -> None:
    """kubelet v1.32 cm/node_container_manager_linux.go GetNodeAllocatableReservation: capacity less
    kubeReserved, systemReserved and the hard eviction threshold (our own numbers)."""
    fields: dict[str, Any] = {
        "kubeReserved": {"cpu": "500m", "memory": "1Gi"},
        "systemReserved": {"cpu": "1", "memory": "512Mi"},
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "10%"},
    }
    policy, errors = policy_of(fields, "config.yaml")
    assert errors == []
    assert node_allocatable(_machine(), policy) == {"cpu": 6500, "memory": 16 * GI - GI - 512 * MI - 200 * MI}


def test_the_default_eviction_is_100mi_and_an_eviction_map_without_memory_sets_none() -> None:
    default, _ = policy_of({}, "config.yaml")
    assert node_allocatable(_machine(), default) == {"cpu": 8000, "memory": 16 * GI - 100 * MI}
    partial, _ = policy_of({"evictionHard": {"nodefs.available": "5%"}}, "config.yaml")
    assert node_allocatable(_machine(), partial) == {"cpu": 8000, "memory": 16 * GI}
    percent, _ = policy_of({"evictionHard": {"memory.available": "10%"}}, "config.yaml")
    assert node_allocatable(_machine(memory=10 * GI), percent) == {"cpu": 8000, "memory": 9 * GI}


def test_the_eviction_hard_flags_form_is_read() -> None:
    policy, errors = policy_of({"evictionHard": "memory.available<1Gi,nodefs.available<10%"}, "flags")
    assert errors == []
    assert node_allocatable(_machine(), policy) == {"cpu": 8000, "memory": 15 * GI}


def test_reserved_system_cpus_replace_the_reserved_cpu_quantity() -> None:
    """cmd/kubelet/app/server.go: --reserved-cpus overwrites kubeReserved/systemReserved cpu."""
    policy, _ = policy_of({"reservedSystemCPUs": "0-1", "kubeReserved": {"cpu": "3"}}, "config.yaml")
    assert node_allocatable(_machine(), policy)["cpu"] == 6000  # type: ignore[index]


def test_unknown_config_or_memory_is_unknown_never_zero() -> None:
    assert node_allocatable(_machine(), KubeletPolicy()) is None  # source "defaults": reservations unknown
    no_memory = MachineTopology(cpus=_machine().cpus)
    assert node_allocatable(no_memory, KubeletPolicy(source="config.yaml")) == {"cpu": 8000}
    # more reserved than there is: 0, as the kubelet clamps a negative allocatable
    policy, _ = policy_of({"systemReserved": {"memory": "32Gi"}}, "config.yaml")
    assert node_allocatable(_machine(), policy)["memory"] == 0  # type: ignore[index]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"kubeReserved": {"memory": "lots"}}, "kubeReserved.memory"),
        ({"systemReserved": {"memory": ["1Gi"]}}, "systemReserved.memory"),
        ({"evictionHard": {"memory.available": "101%"}}, "evictionHard.memory.available"),
        ({"evictionHard": ["memory.available<100Mi"]}, "evictionHard"),
    ],
)
def test_a_bad_reservation_is_named_never_echoed(fields: dict[str, Any], named: str) -> None:
    policy, errors = policy_of(fields, "config.yaml")
    assert any(e.message.split(":")[0].split(" ")[0] == named for e in errors), errors
    assert not any("lots" in e.message or "<" in e.message or "101" in e.message for e in errors)
    assert policy.reserved_memory_quantity == 0


def test_the_config_file_reservations_are_read(tmp_path: Path) -> None:
    kubelet_dir = tmp_path / "var/lib/kubelet"
    kubelet_dir.mkdir(parents=True)
    config = {"kubeReserved": {"memory": "1Gi"}, "evictionHard": {"memory.available": "1Gi"}}
    (kubelet_dir / "config.yaml").write_text(config_yaml(config))
    paths = NodePaths(str(tmp_path), str(kubelet_dir), "", "", "", "", proc=str(tmp_path / "proc"))
    policy, errors = read_kubelet_policy(paths)
    assert errors == ()
    assert (policy.reserved_memory_quantity, policy.eviction_memory_bytes) == (GI, GI)
