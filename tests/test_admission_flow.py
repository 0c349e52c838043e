"""The admit flow (devctl.analyze.admission.admit): scopes, init and sidecar containers, reasons, memory Static.

Scope cases follow the outcomes stated in kubelet v1.32 topologymanager/scope_container_test.go and
scope_pod_test.go (container scope merges per container, pod scope once for the pod), as our own data.
"""

from __future__ import annotations

import dataclasses

import pytest

from devctl.analyze.admission.admit import admit
from devctl.analyze.admission.fits import fits_with
from devctl.analyze.admission.inputs import AdmissionInputs, DeviceInfo, HeldDevices
from devctl.model.machine import ContainerRequest, Cpu, KubeletPolicy, MachineTopology, PodRequest

GPU = "nvidia.com/gpu"
GIB = 1 << 30
MACHINE = MachineTopology(tuple(Cpu(i, i, i // 4, i // 4) for i in range(8)), memory={0: 8 * GIB, 1: 8 * GIB})


def inputs(policy="single-numa-node", scope="container", devices=None, held=(), memory="None", free_memory=None):
    devices = (
        devices if devices is not None else tuple(DeviceInfo(f"GPU-{i}", True, frozenset({i // 2})) for i in range(4))
    )
    return AdmissionInputs(
        MACHINE,
        KubeletPolicy(topology=policy, scope=scope, memory=memory),
        {GPU: devices},
        held,
        free_memory=free_memory,
    )


def container(name="main", init=False, restartable=False, **requests):
    names = {"nvidia_com_gpu": GPU, "example_com_foo": "example.com/foo"}
    req = {names.get(k, k): v for k, v in requests.items()}
    return ContainerRequest(name, init, restartable, req, req)


def pod(*containers, qos="Guaranteed"):
    return PodRequest(containers, qos, uid="u1")


def test_two_gpus_fit_one_numa_node():
    got = admit(pod(container(nvidia_com_gpu=2)), inputs())
    assert got.admit and got.reason is None
    (c,) = got.containers
    assert c.affinity.numa_nodes == frozenset({0}) and c.affinity.preferred
    assert c.devices[0].ids == ("GPU-0", "GPU-1") and c.devices[0].per_node == {0: 2}


@pytest.mark.parametrize(
    ("policy", "admitted", "affinity"),
    [
        ("single-numa-node", False, None),
        ("restricted", True, {0, 1}),
        ("best-effort", True, {0, 1}),
        ("none", True, None),
    ],
)
def test_three_gpus_across_nodes(policy, admitted, affinity):
    """restricted admits: no single node could ever hold 3, so the 2-node hint is preferred."""
    got = admit(pod(container(nvidia_com_gpu=3)), inputs(policy))
    assert got.admit is admitted
    assert got.reason == (None if admitted else "TopologyAffinityError")
    mask = got.containers[0].affinity
    assert (mask.numa_nodes if mask else None) == (None if affinity is None else frozenset(affinity))


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        ("none", "UnexpectedAdmissionError"),
        ("best-effort", "UnexpectedAdmissionError"),
        ("restricted", "TopologyAffinityError"),
        ("single-numa-node", "TopologyAffinityError"),
    ],
)
def test_all_unhealthy(policy, reason):
    sick = tuple(DeviceInfo(f"GPU-{i}", False, frozenset({i // 2})) for i in range(4))
    got = admit(pod(container(nvidia_com_gpu=1)), inputs(policy, devices=sick))
    assert (got.admit, got.reason) == (False, reason)
    if reason == "UnexpectedAdmissionError":
        assert got.message == (
            "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, "
            "which is unexpected"
        )
    else:
        assert got.message == "Resources cannot be allocated with Topology locality"


def one_free_per_node():
    return (HeldDevices("ml", "other", "u9", "c", GPU, ("GPU-0", "GPU-2")),)


def test_container_scope_places_each_container_alone():
    """scope_container_test.go: each container gets its own merge; one GPU on node 0, the other on node 1."""
    got = admit(
        pod(container("a", nvidia_com_gpu=1), container("b", nvidia_com_gpu=1)), inputs(held=one_free_per_node())
    )
    assert got.admit
    assert [c.affinity.numa_nodes for c in got.containers] == [frozenset({0}), frozenset({1})]
    assert [c.devices[0].ids for c in got.containers] == [("GPU-1",), ("GPU-3",)]


def test_pod_scope_needs_the_whole_pod_on_one_node():
    """scope_pod_test.go: one merge over the pod's sum; 2 GPUs on one node are not free, so it is rejected."""
    got = admit(
        pod(container("a", nvidia_com_gpu=1), container("b", nvidia_com_gpu=1)),
        inputs(scope="pod", held=one_free_per_node()),
    )
    assert (got.admit, got.reason) == (False, "TopologyAffinityError")
    assert all(c.affinity == got.containers[0].affinity for c in got.containers)


def test_init_container_devices_are_reused():
    two = (DeviceInfo("GPU-0", True, frozenset({0})), DeviceInfo("GPU-1", True, frozenset({0})))
    got = admit(
        pod(container("init", init=True, nvidia_com_gpu=2), container("main", nvidia_com_gpu=2)), inputs(devices=two)
    )
    assert got.admit
    assert got.containers[1].devices[0].ids == ("GPU-0", "GPU-1")


def test_sidecar_keeps_its_device():
    two = (DeviceInfo("GPU-0", True, frozenset({0})), DeviceInfo("GPU-1", True, frozenset({0})))
    sidecar = container("side", init=True, restartable=True, nvidia_com_gpu=1)
    got = admit(pod(sidecar, container("main", nvidia_com_gpu=2)), inputs("best-effort", devices=two))
    assert (got.admit, got.reason) == (False, "UnexpectedAdmissionError")
    assert "requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1" in got.message


@pytest.mark.parametrize(
    ("policy", "qos", "admitted", "nodes"),
    [
        ("single-numa-node", "Guaranteed", False, None),
        ("best-effort", "Guaranteed", True, (0, 1)),
        ("single-numa-node", "Burstable", True, ()),
    ],
)
def test_memory_static(policy, qos, admitted, nodes):
    free = {0: {"memory": 4 * GIB}, 1: {"memory": 4 * GIB}}
    got = admit(pod(container(memory=6 * GIB), qos=qos), inputs(policy, memory="Static", free_memory=free))
    assert got.admit is admitted
    if admitted:
        assert got.containers[0].memory_numa_nodes == nodes


def test_unregistered_extended_resource_is_out_of_it():
    got = admit(pod(container(example_com_foo=1)), inputs())
    assert (got.admit, got.reason) == (False, "OutOfexample.com/foo")


def test_static_cpu_follows_the_devices_node():
    policy = dataclasses.replace(inputs().policy, cpu="static")
    one = (DeviceInfo("GPU-3", True, frozenset({1})),)
    got = admit(pod(container(cpu=2000, nvidia_com_gpu=1)), dataclasses.replace(inputs(devices=one), policy=policy))
    assert got.admit
    c = got.containers[0]
    assert c.affinity.numa_nodes == frozenset({1}) and set(c.cpu_ids) <= {4, 5, 6, 7} and len(c.cpu_ids) == 2


def test_fits_with_names_policy_fewer_devices_and_the_holder():
    busy = (
        HeldDevices("ml", "train-0", "u9", "main", GPU, ("GPU-0",)),
        HeldDevices("ml", "x", "u8", "m", GPU, ("GPU-2",)),
    )
    fit = inputs("single-numa-node", held=busy)
    p = pod(container(nvidia_com_gpu=2))
    assert not admit(p, fit).admit
    changes = [c.change for c in fits_with(p, fit)]
    assert "topologyManagerPolicy: best-effort" in changes
    assert "container main: nvidia.com/gpu=1" in changes
    assert "free nvidia.com/gpu GPU-0 held by ml/train-0 (main)" in changes
    assert "topologyManagerPolicy: restricted" not in changes
