"""Hostile requests against the admission prediction (red team, issue FX2): each case once ran without end,
answered ADMIT where the kubelet refuses, or took gigabytes; each test fails on the old code."""

from __future__ import annotations

import pytest

from devctl.analyze.admission.admit import admit
from devctl.analyze.admission.fits import fits_with
from devctl.analyze.admission.inputs import AdmissionInputs, DeviceInfo
from devctl.analyze.admission.request import request_from_words
from devctl.model.machine import Cpu, KubeletPolicy, MachineTopology

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
