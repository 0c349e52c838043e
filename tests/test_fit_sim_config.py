"""The simulated node's kubelet configuration: the scenario's kubelet: fields, written where kubeadm writes them
and read back by devctl.node.kubeletconfig as the kubelet's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devctl.lab.sim.kubelet_config import config_yaml
from devctl.lab.sim.scenario import ScenarioError, parse_scenario
from devctl.model import NodePaths
from devctl.node.kubeletconfig import read_kubelet_policy

NODES: dict[str, Any] = {"numa_nodes": [{"id": 0, "cpus": "0-7"}, {"id": 1, "cpus": "8-15"}], "reserved_cpus": "0-1"}


def _policy(tmp_path: Path, kubelet: dict[str, Any]) -> Any:
    scenario = parse_scenario({**NODES, "kubelet": kubelet})
    kubelet_dir = tmp_path / "var/lib/kubelet"
    kubelet_dir.mkdir(parents=True)
    (kubelet_dir / "config.yaml").write_text(config_yaml(scenario.kubelet.config))
    paths = NodePaths(str(tmp_path), str(kubelet_dir), "", "", "", "", proc=str(tmp_path / "proc"))
    return read_kubelet_policy(paths)


def test_the_scenarios_policies_are_what_the_reader_finds(tmp_path: Path) -> None:
    kubelet = {
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
        "cpuManagerPolicyOptions": {"full-pcpus-only": True},
        "get_enabled": True,
    }
    policy, errors = _policy(tmp_path, kubelet)
    assert errors == ()
    assert (policy.topology, policy.scope, policy.cpu, policy.memory) == ("single-numa-node", "pod", "static", "Static")
    assert policy.cpu_options == {"full-pcpus-only": "true"}
    assert policy.reserved_cpus == (0, 1)  # from the scenario's reserved_cpus
    assert policy.source.endswith("var/lib/kubelet/config.yaml")


def test_defaults_are_the_simulators_managers(tmp_path: Path) -> None:
    policy, errors = _policy(tmp_path, {})
    assert errors == ()
    assert (policy.topology, policy.scope, policy.cpu, policy.memory) == (
        "best-effort",
        "container",
        "static",
        "Static",
    )


def test_a_misshapen_field_names_itself() -> None:
    with pytest.raises(ScenarioError, match=r"kubelet\.cpuManagerPolicyOptions"):
        parse_scenario({**NODES, "kubelet": {"cpuManagerPolicyOptions": "full-pcpus-only"}})
    with pytest.raises(ScenarioError, match="topologyManagerPolcy"):
        parse_scenario({**NODES, "kubelet": {"topologyManagerPolcy": "none"}})
