"""``devctl fit`` as a user runs it on the simulated node: the verdict, the table, the JSON keys, exit codes.

The default node (lab/sim/scenarios/default.yaml): GPUs GPU-0..3 on NUMA node 0, all held by ml/train-0;
GPU-4..7 on NUMA node 1, GPU-5 unhealthy and two held by ml/train-1, so one (GPU-7) is free; CPUs 0-1 reserved;
its kubelet runs best-effort, static CPU and Static memory managers (written to <root>/var/lib/kubelet/config.yaml).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from helpers import devctl, invoke

from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import SimHandle, running_sim

CONTRACT_KEYS = {"admit", "reason", "message", "policy", "containers", "fits_with", "errors"}
CONTAINER_KEYS = {"name", "init", "affinity", "hints", "devices", "cpu_ids", "memory_numa_nodes"}
POLICY_KEYS = {"topology", "scope", "options", "cpu", "cpu_options", "memory", "reserved_cpus", "source"}


def _default_data() -> dict[str, Any]:
    text = resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_four_gpus_on_one_numa_node_are_refused_with_the_hints_and_what_would_fit(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "nvidia.com/gpu=4", "cpu=16", "--policy", "single-numa-node", "-o", "json")
    assert result.exit_code == 1, result.stderr
    body = result.json
    assert set(body) >= CONTRACT_KEYS
    assert set(body["policy"]) >= POLICY_KEYS
    assert (body["admit"], body["reason"]) == (False, "TopologyAffinityError")
    assert body["policy"]["topology"] == "single-numa-node"  # the what-if
    assert body["policy"]["cpu"] == "static" and body["policy"]["reserved_cpus"] == [0, 1]  # the node's own
    assert body["policy"]["source"].endswith("var/lib/kubelet/config.yaml")
    (main,) = body["containers"]
    assert set(main) >= CONTAINER_KEYS
    gpu_hints = next(h for h in main["hints"] if h["resource"] == "nvidia.com/gpu")
    assert gpu_hints == {"provider": "devices", "resource": "nvidia.com/gpu", "hints": []}  # no node holds 4 free
    changes = [f["change"] for f in body["fits_with"]]
    assert any("held by ml/train-0" in c for c in changes), changes  # train-0's four GPUs on NUMA node 0
    assert body["errors"] == []


def test_the_table_says_reject_first_and_stays_within_80_columns(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "nvidia.com/gpu=4", "cpu=16", "--policy", "single-numa-node")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("REJECT: TopologyAffinityError: Resources cannot be allocated")
    assert any(line.startswith("policy: topology single-numa-node, scope container, cpu static") for line in lines)
    assert "fits with:" in lines
    assert max(len(line) for line in lines) <= 80


def test_an_admitted_request_gets_the_free_gpu_and_exclusive_cpus_on_its_numa_node(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "nvidia.com/gpu=1", "cpu=4", "memory=8Gi", "-o", "json")
    assert result.exit_code == 0, result.stdout
    body = result.json
    assert (body["admit"], body["reason"]) == (True, None)
    (main,) = body["containers"]
    assert main["affinity"] == {"numa_nodes": [1], "preferred": True}
    assert [(d["resource"], d["ids"], d["numa_nodes"]) for d in main["devices"]] == [("nvidia.com/gpu", ["GPU-7"], [1])]
    # NUMA node 1's shared pool: 16-31 less train-1 (16-21), serve-0 (24-27) and embed-0 (28-29).
    assert main["cpu_ids"] == [22, 23, 30, 31]
    assert main["memory_numa_nodes"] == [1]


def test_a_what_if_policy_changes_the_verdict(sim_node: SimHandle) -> None:
    """8 exclusive CPUs fit on no single NUMA node (node 0's pool: 10-15 less nothing = 6 after train-0 and the
    reserved 0-1; node 1's: 22-23, 30-31) but on both: the node's best-effort admits, single-numa-node refuses."""
    ask = ("fit", "nvidia.com/gpu=1", "cpu=8", "memory=1Gi", "-o", "json")
    spread = devctl(sim_node.root, *ask)
    narrow = devctl(sim_node.root, *ask, "--policy", "single-numa-node")
    assert (spread.exit_code, spread.json["admit"]) == (0, True), spread.stdout
    assert sorted(spread.json["containers"][0]["cpu_ids"]) == [10, 11, 12, 13, 22, 23, 30, 31]
    assert (narrow.exit_code, narrow.json["admit"], narrow.json["reason"]) == (1, False, "TopologyAffinityError")
    assert any(f["change"] == "topologyManagerPolicy: best-effort" for f in narrow.json["fits_with"])


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  initContainers:
    - name: fetch
      resources: {limits: {cpu: "2", memory: 1Gi, nvidia.com/gpu: "1"}}
    - name: proxy
      restartPolicy: Always
      resources: {limits: {cpu: "2", memory: 1Gi}}
  containers:
    - name: main
      resources: {limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}}
"""


def test_a_manifest_with_an_init_container_and_a_sidecar(sim_node: SimHandle, tmp_path: Path) -> None:
    """The init container's GPU is reused by main (the only free one), the sidecar keeps its CPUs."""
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    result = devctl(sim_node.root, "fit", "-f", str(path), "-o", "json")
    assert result.exit_code == 0, result.stdout
    containers = {c["name"]: c for c in result.json["containers"]}
    assert list(containers) == ["fetch", "proxy", "main"]
    assert containers["fetch"]["init"] and containers["proxy"]["init"] and not containers["main"]["init"]
    assert containers["fetch"]["devices"][0]["ids"] == ["GPU-7"] == containers["main"]["devices"][0]["ids"]
    proxy, main = set(containers["proxy"]["cpu_ids"]), set(containers["main"]["cpu_ids"])
    assert len(proxy) == 2 and len(main) == 2 and not proxy & main  # the sidecar's CPUs are not reused
    table = devctl(sim_node.root, "fit", "-f", str(path))
    assert "container proxy (sidecar)" in table.stdout and "container fetch (init)" in table.stdout


def test_bad_input_is_one_line_and_exit_2(sim_node: SimHandle, tmp_path: Path) -> None:
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (5 * 1024 * 1024))
    for args in (("-f", str(deployment)), ("-f", str(big)), ("gpu",), ("cpu=lots",), ()):
        result = devctl(sim_node.root, "fit", *args)
        assert result.exit_code == 2, (args, result.stdout)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "not a Pod: kind 'Deployment'" in devctl(sim_node.root, "fit", "-f", str(deployment)).stderr


def test_a_resource_no_plugin_serves_follows_the_kubelets_own_outcome(sim_node: SimHandle) -> None:
    result = devctl(sim_node.root, "fit", "example.com/fpga=1", "-o", "json")
    assert result.exit_code == 1
    assert result.json["reason"] == "OutOfexample.com/fpga"
    assert any("no device plugin serves it" in n for n in result.json["notes"])


def test_no_node_at_all_is_unknown_and_exit_3(short_root: Path) -> None:
    result = devctl(short_root, "fit", "nvidia.com/gpu=1", "-o", "json")
    assert result.exit_code == 3
    assert result.json["admit"] is None and result.json["reason"] is None
    assert result.json["errors"]


def test_a_missing_kubelet_config_makes_the_verdict_unknown_unless_the_flags_give_the_policies(
    sim_node: SimHandle,
) -> None:
    (sim_node.root / "var/lib/kubelet/config.yaml").unlink()
    result = devctl(sim_node.root, "fit", "nvidia.com/gpu=1", "-o", "json")
    assert result.exit_code == 3
    assert result.json["admit"] is None
    assert "configuration is unknown" in result.json["message"]
    assert any(e["source"] == "kubelet-config" and e["kind"] == "missing" for e in result.json["errors"])
    flags = ("--policy", "best-effort", "--cpu-policy", "none", "--memory-policy", "None")
    given = devctl(sim_node.root, "fit", "nvidia.com/gpu=1", *flags, "-o", "json")
    assert given.exit_code == 0 and given.json["admit"] is True


def test_from_a_snapshot_file_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("--from", str(tmp_path / "x.json"), "fit", "cpu=1")
    assert result.exit_code == 2


@pytest.fixture
def hung_preference_node(short_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimHandle]:
    """The default node without ml/train-0 (four GPUs free on NUMA node 0) whose GPU plugin, once the node is
    ready (its own admission asked it), offers GetPreferredAllocation and never answers it."""
    from devctl.lab.plugin import server

    hung = threading.Event()
    answer = server._Servicer.GetPreferredAllocation

    async def maybe_hang(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if hung.is_set():
            await asyncio.Event().wait()
        return await answer(self, request, context)

    monkeypatch.setattr(server._Servicer, "GetPreferredAllocation", maybe_hang)
    data = _default_data()
    data["pods"] = [p for p in data["pods"] if p["name"] != "train-0"]
    with running_sim(short_root, parse_scenario(data)) as handle:
        hung.set()
        yield handle


def test_a_hung_preferred_allocation_leaves_the_choice_open_within_the_deadline(
    hung_preference_node: SimHandle,
) -> None:
    start = time.monotonic()
    result = devctl(hung_preference_node.root, "fit", "nvidia.com/gpu=2", "-o", "json", timeout=1.0)
    elapsed = time.monotonic() - start
    assert elapsed < 15, elapsed  # a generous "does not hang": one deadline, not one per call
    assert result.exit_code == 0, result.stdout
    body = result.json
    (gpus,) = body["containers"][0]["devices"]
    assert gpus["ids"] is None and gpus["count"] == 2 and gpus["numa_nodes"] == [0]
    assert set(gpus["candidates"]) == {"GPU-0", "GPU-1", "GPU-2", "GPU-3"}
    assert body["choice_open"] is True
    assert any(e["source"] == "preferred-allocation" and e["kind"] == "timeout" for e in body["errors"])
    table = devctl(hung_preference_node.root, "fit", "nvidia.com/gpu=2", timeout=1.0)
    assert "nvidia.com/gpu: any 2 of NUMA 0" in table.stdout
