"""Gaps found by trying issue 10's kubectl habits again on the default simulated node (items 4 and 5).

GIVEN the default node, WHEN a kubectl user types what works on ``kubectl get``
(``-A``, ``--sort-by``, ``-w`` on ``claims``; ``get claims``; a pod name
without its namespace; a CDI name in the wrong case), THEN devctl answers as
it does on its other list commands: the same options, "did you mean", exit 1
for a name that does not exist.
"""

from __future__ import annotations

import signal
import subprocess

import pytest
from helpers import DEVCTL, devctl, devctl_env
from test_columns import sim_root

from devctl.lab.sim.scenario import default_scenario


@pytest.fixture(scope="module")
def default_node():
    with sim_root(default_scenario()) as handle:
        yield handle


def test_claims_take_all_namespaces_and_sort_by(default_node) -> None:
    root = default_node.root
    every = devctl(root, "claims", "-q")
    assert devctl(root, "claims", "-A", "-q").stdout == every.stdout == "inference/embed-gpu\nml/train-1-gpus\n"
    assert devctl(root, "claims", "-A", "-n", "ml").exit_code == 2
    by_name = devctl(root, "claims", "--sort-by", "name", "-o", "json").json["claims"]
    assert [c["name"] for c in by_name] == ["embed-gpu", "train-1-gpus"]
    assert devctl(root, "claims", "--sort-by", "nope").exit_code == 2
    # a column as the table heads it, as in ls: CLAIM is the claim's name, DRIVER its drivers
    assert devctl(root, "claims", "--sort-by", "CLAIM", "-q").stdout == every.stdout
    assert devctl(root, "claims", "--sort-by", "DRIVER").exit_code == 0


def test_pods_sort_by_the_pod_column(default_node) -> None:
    root = default_node.root
    by_pod = devctl(root, "pods", "--sort-by", "POD", "-q")
    assert by_pod.exit_code == 0, by_pod.stderr
    names = [line.split("/")[1] for line in by_pod.stdout.splitlines()]
    assert names == sorted(names) and "node-exporter-7xk2p" in names


def test_claims_watch_prints_the_table_and_ends_on_sigterm(default_node) -> None:
    p = subprocess.Popen(
        [*DEVCTL, "claims", "-w"], env=devctl_env(default_node.root), stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().split()[:2] == ["NAMESPACE", "CLAIM"]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0


def test_a_claim_or_cdi_name_not_found_is_exit_1_with_did_you_mean(default_node) -> None:
    root = default_node.root
    r = devctl(root, "claims", "EMBED-GPU")
    assert (r.exit_code, r.stderr) == (1, "devctl: claim EMBED-GPU not found (did you mean embed-gpu?)\n")
    r = devctl(root, "cdi", "NVIDIA.com/gpu=GPU-0")
    assert r.exit_code == 1 and "NVIDIA.com" not in r.stdout  # a name that does not exist gets no row
    assert r.stderr == "devctl: CDI name NVIDIA.com/gpu=GPU-0 not found (did you mean nvidia.com/gpu=GPU-0?)\n"
    assert devctl(root, "cdi", "nvidia.com/gpu=GPU-0").exit_code == 0  # in use (unresolvable is its status)


def test_get_with_a_command_or_a_pod_of_another_namespace_says_what_was_meant(default_node) -> None:
    root = default_node.root
    r = devctl(root, "get", "claims")
    assert r.exit_code == 1 and "(did you mean `devctl claims`?)" in r.stderr
    r = devctl(root, "get", "train")
    assert r.exit_code == 1 and "(did you mean ml/train-" in r.stderr  # written as devctl get takes it
    assert devctl(root, "topo", "-o", "name").stdout == "0\n1\n"  # NUMA nodes; the unknown one is none
