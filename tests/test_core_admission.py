"""core.admission: the model's inputs from what was read, "unknown" where an input is missing, the what-ifs.

Pure: snapshots and machines are values written here (no node, no sockets).
"""

from __future__ import annotations

from dataclasses import replace

from devctl.analyze.admission.request import request_from_words
from devctl.core.admission import WhatIf, apply_what_if, predict
from devctl.core.admission_inputs import build_inputs
from devctl.model import (
    Checkpoint,
    CheckpointEntry,
    CpuManagerState,
    Device,
    ErrorKind,
    KubeletState,
    NodePaths,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    SourceError,
)
from devctl.model.machine import Cpu, KubeletPolicy, MachineTopology


def _machine(nodes: int = 2, per_node: int = 8) -> MachineTopology:
    cpus = tuple(Cpu(n * per_node + i, n * per_node + i, n, n) for n in range(nodes) for i in range(per_node))
    return MachineTopology(cpus, memory={n: 64 << 30 for n in range(nodes)})


def _gpus(status: PluginStatus = PluginStatus.SERVING) -> PluginProbe:
    devices = tuple(Device(f"GPU-{i}", "Healthy", (i // 4,)) for i in range(8))
    options = PluginOptions(get_preferred_allocation_available=True)
    return PluginProbe(
        "/p/gpu.sock", status, "nvidia.com/gpu", options, devices if status is PluginStatus.SERVING else ()
    )


def _checkpoint(*held: tuple[str, str, tuple[str, ...]]) -> Checkpoint:
    entries = tuple(CheckpointEntry(uid, "main", "nvidia.com/gpu", {"0": ids}) for uid, _, ids in held)
    return Checkpoint("/p/kubelet_internal_checkpoint", "v2", True, 1, 1, {}, entries)


def _snapshot(
    *plugins: PluginProbe, checkpoint: Checkpoint | None = None, errors: tuple[SourceError, ...] = ()
) -> NodeSnapshot:
    names = (PodIdentity("uid-a", "ml", "train-a"),)
    return NodeSnapshot(
        "2026-01-01T00:00:00.000Z",
        NodePaths("/", "/k", "/k/device-plugins", "/k/pod-resources/kubelet.sock", "/sys", "/var/log/pods"),
        plugins=plugins,
        checkpoint=checkpoint,
        pod_identities=names,
        errors=errors,
    )


SINGLE = KubeletPolicy(topology="single-numa-node")


def test_held_devices_come_from_the_checkpoint_named_by_the_pod_log_dirs() -> None:
    snap = _snapshot(_gpus(), checkpoint=_checkpoint(("uid-a", "main", ("GPU-0", "GPU-1"))))
    pod = request_from_words(["nvidia.com/gpu=4"])
    built = build_inputs(pod, snap, _machine(), SINGLE)
    assert built.unknown == ()
    assert built.sockets == {"nvidia.com/gpu": "/p/gpu.sock"}  # offers GetPreferredAllocation
    (held,) = built.inputs.held
    assert (held.namespace, held.pod, held.ids) == ("ml", "train-a", ("GPU-0", "GPU-1"))
    answer = predict(pod, built, WhatIf(), ())
    assert answer.admit is True  # NUMA node 1's four are free
    assert answer.containers[0].affinity is not None and answer.containers[0].affinity.numa_nodes == (1,)


def test_a_requested_resource_whose_plugin_did_not_answer_is_unknown_not_rejected() -> None:
    snap = _snapshot(_gpus(PluginStatus.TIMEOUT), checkpoint=_checkpoint())
    pod = request_from_words(["nvidia.com/gpu=1"])
    built = build_inputs(pod, snap, _machine(), SINGLE)
    answer = predict(pod, built, WhatIf(), ())
    assert answer.admit is None and answer.reason is None
    assert "nvidia.com/gpu: its plugin did not answer" in answer.message


def test_no_allocations_read_is_unknown_for_a_device_request() -> None:
    snap = _snapshot(_gpus(), errors=(SourceError("checkpoint", "gone", ErrorKind.MISSING),))
    pod = request_from_words(["nvidia.com/gpu=1"])
    answer = predict(pod, build_inputs(pod, snap, _machine(), SINGLE), WhatIf(), ())
    assert answer.admit is None and "allocated are unknown" in answer.message


def test_a_resource_no_plugin_serves_is_the_resource_fit_checks_outcome_with_a_note() -> None:
    pod = request_from_words(["example.com/fpga=1"])
    built = build_inputs(pod, _snapshot(_gpus(), checkpoint=_checkpoint()), _machine(), SINGLE)
    answer = predict(pod, built, WhatIf(), ())
    assert (answer.admit, answer.reason) == (False, "OutOfexample.com/fpga")
    assert any("no device plugin serves it" in n for n in answer.notes)


def test_what_if_flags_replace_the_nodes_policies_and_say_so() -> None:
    node = KubeletPolicy(topology="best-effort", cpu="none", source="/etc/kubernetes/kubelet.yaml")
    changed = apply_what_if(node, _machine(), WhatIf(topology="restricted", cpu="static"))
    assert (changed.topology, changed.cpu, changed.scope, changed.source) == (
        "restricted",
        "static",
        "container",
        "/etc/kubernetes/kubelet.yaml",
    )


def test_the_static_policy_reserves_whole_cpus_from_the_reserved_quantity_lowest_first() -> None:
    """cmd/kubelet/app/server.go: without reservedSystemCPUs, kubeReserved.cpu + systemReserved.cpu (1500m here)
    reserves two CPUs, rounded up, taken from the lowest-numbered."""
    node = KubeletPolicy(cpu="static", reserved_cpu_quantity_milli=1500)
    assert apply_what_if(node, _machine(), WhatIf()).reserved_cpus == (0, 1)
    assert apply_what_if(KubeletPolicy(reserved_cpu_quantity_milli=1500), _machine(), WhatIf()).reserved_cpus == ()


def test_exclusive_cpus_leave_out_the_reserved_and_the_taken() -> None:
    state = KubeletState(cpu=CpuManagerState("/k/cpu_manager_state", "static", tuple(range(16))))
    snap = replace(_snapshot(checkpoint=_checkpoint()), kubelet_state=state)
    pod = request_from_words(["cpu=6", "memory=1Gi"])
    policy = KubeletPolicy(topology="single-numa-node", cpu="static", reserved_cpus=(0, 1))
    answer = predict(pod, build_inputs(pod, snap, _machine(), policy), WhatIf(), ())
    assert answer.admit is True
    assert answer.containers[0].cpu_ids == (2, 3, 4, 5, 6, 7)  # NUMA node 0 less 0-1 holds six exactly
    seven = request_from_words(["cpu=7", "memory=1Gi"])
    moved = predict(seven, build_inputs(seven, snap, _machine(), policy), WhatIf(), ())
    assert moved.containers[0].cpu_ids == (8, 9, 10, 11, 12, 13, 14)  # node 0 has only six: node 1
    # Neither cpu_manager_state nor pod-resources: which CPUs are taken is unknown, and so is the verdict.
    unknown = predict(pod, build_inputs(pod, _snapshot(checkpoint=_checkpoint()), _machine(), policy), WhatIf(), ())
    assert unknown.admit is None and "CPUs already taken are unknown" in unknown.message
