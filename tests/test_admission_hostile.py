"""Hostile requests against the admission prediction (red team, issue FX2): each case once ran without end,
answered ADMIT where the kubelet refuses, or took gigabytes; each test fails on the old code."""

from __future__ import annotations

from pathlib import Path

import pytest

from devctl.analyze.admission.admit import admit
from devctl.analyze.admission.fits import fits_with
from devctl.analyze.admission.inputs import AdmissionInputs, DeviceInfo
from devctl.analyze.admission.request import request_from_words
from devctl.model.machine import Cpu, KubeletPolicy, MachineTopology
from tests.hostile_bomb import anchors, run_bounded

GPU = "nvidia.com/gpu"
GIB = 1 << 30
# 32 CPUs on 2 NUMA nodes (16 each), 8 GPUs (4 on each node), 64 GiB on each node.
MACHINE = MachineTopology(tuple(Cpu(i, i, i // 16, i // 16) for i in range(32)), memory={0: 64 * GIB, 1: 64 * GIB})
GPUS = tuple(DeviceInfo(f"GPU-{i}", True, frozenset({i // 4})) for i in range(8))


def _inputs(topology: str = "none", **more: object) -> AdmissionInputs:
    return AdmissionInputs(MACHINE, KubeletPolicy(topology=topology), {GPU: GPUS}, **more)  # type: ignore[arg-type]


@pytest.mark.timeout(20)  # the old search called admit() once per device asked for: 10^8 times
@pytest.mark.parametrize(("topology", "most"), [("none", 8), ("single-numa-node", 4)])
def test_fewer_devices_is_searched_within_what_the_node_has(topology: str, most: int) -> None:
    pod = request_from_words([f"{GPU}=100000000"])
    inputs = _inputs(topology)
    assert not admit(pod, inputs).admit
    changes = [c.change for c in fits_with(pod, inputs)]
    assert f"container main: {GPU}={most}" in changes
    assert not any(c.startswith(f"container main: {GPU}=") and c != f"container main: {GPU}={most}" for c in changes)


def test_no_fewer_proposal_for_a_resource_the_node_has_none_of() -> None:
    pod = request_from_words([f"{GPU}=3"])
    inputs = AdmissionInputs(MACHINE, KubeletPolicy(), {GPU: ()})
    assert not admit(pod, inputs).admit
    assert not any(c.change.startswith("container main:") for c in fits_with(pod, inputs))


# The resource-fit handler: kubelet v1.32 pkg/kubelet/lifecycle/predicate.go (OutOf<resource>) over
# pkg/scheduler/framework/plugins/noderesources/fit.go's fitsRequest and its InsufficientResource message.


def test_more_cpu_than_the_node_allocates_is_out_of_cpu_with_the_kubelets_message() -> None:
    pod = request_from_words(["cpu=1000"])
    got = admit(pod, _inputs(allocatable={"cpu": 32000, "memory": 128 * GIB}, requested={}))
    assert (got.admit, got.reason) == (False, "OutOfcpu")
    assert got.message == "Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: 32000"


def test_memory_is_checked_after_cpu_and_counts_what_other_pods_request() -> None:
    inputs = _inputs(allocatable={"cpu": 32000, "memory": 100 * GIB}, requested={"cpu": 2000, "memory": 90 * GIB})
    got = admit(request_from_words(["cpu=4", "memory=16Gi"]), inputs)
    assert (got.admit, got.reason) == (False, "OutOfmemory")
    assert got.message == (
        f"Node didn't have enough resource: memory, requested: {16 * GIB}, used: {90 * GIB}, capacity: {100 * GIB}"
    )
    assert admit(request_from_words(["cpu=4", "memory=8Gi"]), inputs).admit


def test_hugepages_are_checked_against_allocatable() -> None:
    inputs = _inputs(allocatable={"cpu": 32000, "memory": 128 * GIB, "hugepages-1Gi": 2 * GIB}, requested={})
    got = admit(request_from_words(["memory=1Gi", "hugepages-1Gi=4Gi"]), inputs)
    assert (got.admit, got.reason) == (False, "OutOfhugepages-1Gi")


@pytest.mark.parametrize(("word", "reason"), [("cpu=1000", "OutOfcpu"), ("memory=1Ei", "OutOfmemory")])
def test_allocatable_unknown_the_machine_still_bounds_the_request(word: str, reason: str) -> None:
    got = admit(request_from_words([word]), _inputs())
    assert (got.admit, got.reason) == (False, reason)
    assert ", used: ?, " in got.message  # other pods' requests unknown: never a made-up 0


def test_allocatable_unknown_an_admit_says_what_was_not_checked() -> None:
    got = admit(request_from_words(["cpu=2", "memory=1Gi", "hugepages-2Mi=64Mi"]), _inputs())
    assert got.admit
    assert any("resource-fit check for cpu was made against the machine's capacity" in n for n in got.notes)
    assert any("resource-fit check for hugepages-2Mi was not made" in n for n in got.notes)


@pytest.mark.timeout(20)
def test_a_cpu_request_of_1e30_is_refused_and_fewer_cpus_proposed() -> None:
    pod = request_from_words(["cpu=1e30", "memory=1Gi"])
    inputs = _inputs(allocatable={"cpu": 32000, "memory": 128 * GIB}, requested={})
    got = admit(pod, inputs)
    assert (got.admit, got.reason) == (False, "OutOfcpu")
    assert "container main: cpu=32" in [c.change for c in fits_with(pod, inputs, got)]


def test_an_alias_bomb_in_a_manifests_quantity_is_refused_by_its_type_in_bounded_memory(tmp_path: Path) -> None:
    manifest = tmp_path / "bomb.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations:\n"
        + anchors("    ")
        + "spec:\n  containers:\n  - name: main\n    resources:\n      limits:\n        nvidia.com/gpu: *i\n"
    )
    code = f"""
from devctl.node.podmanifest import read_pod_manifest
from devctl.analyze.admission.request import RequestError, pod_request
try:
    pod_request(read_pod_manifest({str(manifest)!r}))
    result = None
except RequestError as err:
    result = str(err)
"""
    answer = run_bounded(code)
    assert answer["result"] == (
        "main: limits nvidia.com/gpu: invalid quantity: a list where a number like 2, 500m, 1.5Gi or 1e3 belongs"
    )
    assert isinstance(answer["max_rss_kib"], int) and answer["max_rss_kib"] < 300 * 1024
