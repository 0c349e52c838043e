"""``devctl why``'s verdict (devctl.analyze.why), each code from a snapshot built here, and its node readers.

Pure cases: the snapshot and the pod's CRI states are constructed; the verdict, the evidence a person
reads and the hint they run are asserted. Node cases: a kubelet log of several GiB (a sparse file) is
read from its end, and only the lines about the pod are kept.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from devctl.analyze.why import CODES, PodRef, WhyInputs, verdict
from devctl.model import (
    Allocation,
    Checkpoint,
    CheckpointEntry,
    ClaimDevice,
    ContainerDevices,
    ContainerResources,
    Device,
    DraCheckpoint,
    DraCheckpointClaim,
    DraCheckpointDevice,
    DynamicResource,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    PodResources,
)
from devctl.model.cdi import CdiState
from devctl.model.runtime import ContainerState, LogLine, PodRuntimeState, SandboxState
from devctl.node.kubeletlog import file_lines, line_time

UID = "0b5c2f3e-1111-4a4a-9b9b-000000000001"
POD = PodRef("ml", "train-0")
PATHS = NodePaths("/", "/var/lib/kubelet", "/dp", "/pr.sock", "/sys", "/var/log/pods")


def _snap(**kw: object) -> NodeSnapshot:
    base: dict[str, object] = {
        "taken_at": "2026-12-03T10:00:00Z",
        "paths": PATHS,
        "pods": (),
        "pod_identities": (PodIdentity(UID, "ml", "train-0"),),
        "cdi": CdiState(dirs=("/etc/cdi", "/var/run/cdi")),
    }
    base.update(kw)
    return NodeSnapshot(**base)  # type: ignore[arg-type]


def _gpu_pod() -> PodResources:
    return PodResources(
        "ml", "train-0", (ContainerResources("main", (ContainerDevices("nvidia.com/gpu", ("GPU-0",)),)),)
    )


def _gpu_plugin(health: str = "Healthy") -> PluginProbe:
    return PluginProbe("/dp/gpu.sock", PluginStatus.SERVING, "nvidia.com/gpu", devices=(Device("GPU-0", health),))


def _runtime(*containers: ContainerState, sandbox: str = "ready") -> PodRuntimeState:
    return PodRuntimeState(
        "/run/containerd.sock", (SandboxState("sb1", UID, sandbox, "2026-12-03T09:00:00Z"),), containers
    )


def _container(
    state: str = "running", reason: str = "", message: str = "", exit_code: int | None = None
) -> ContainerState:
    return ContainerState("c1", "sb1", "main", state, reason, message, exit_code, created_at="2026-12-03T09:00:01Z")


def test_running_pod_is_running_exit_word_and_hint() -> None:
    a = verdict(POD, _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin(),)), WhyInputs(runtime=_runtime(_container())))
    assert a.code == "running"
    assert a.pod.uid == UID  # from the CRI sandbox
    assert a.hint == "devctl get ml/train-0"


def test_not_on_node_when_no_source_knows_it() -> None:
    a = verdict(
        PodRef("ml", "ghost"), _snap(pod_identities=()), WhyInputs(runtime=PodRuntimeState("/run/containerd.sock"))
    )
    assert a.code == "not-on-node"
    assert "ml/ghost is not on this node" in a.verdict
    assert a.hint == "kubectl get pods -A -o wide --field-selector metadata.name=ghost"


def test_nothing_read_is_unknown_not_absent() -> None:
    """Neither the CRI nor pod-resources answered: "not on this node" cannot be said."""
    a = verdict(PodRef("ml", "ghost"), _snap(pods=None, pod_identities=()), WhyInputs(runtime=None))
    assert a.code == "unknown"
    assert a.hint == "devctl doctor"


def test_cdi_unresolvable_from_the_runtime_message() -> None:
    """kubernetes/kubernetes#141433's shape: the spec vanished, the container stays in CreateContainerError."""
    msg = "failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
    msg += "nvidia.com/gpu=GPU-9"
    a = verdict(
        POD,
        _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin(),)),
        WhyInputs(runtime=_runtime(_container("created", "CreateContainerError", msg))),
    )
    assert a.code == "cdi-unresolvable"
    assert "nvidia.com/gpu=GPU-9" in a.verdict
    assert a.evidence[0].source == "cri" and "CreateContainerError" in a.evidence[0].what
    assert a.hint == "devctl cdi"


def test_cdi_name_devctl_cannot_resolve_for_a_container_not_running() -> None:
    entry = CheckpointEntry(
        UID, "main", "nvidia.com/gpu", {"0": ("GPU-0",)}, Allocation(cdi_devices=("nvidia.com/gpu=GPU-0",))
    )
    cp = Checkpoint("/dp/kubelet_internal_checkpoint", "v2", True, 1, 1, {}, (entry,))
    snap = _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin(),), checkpoint=cp)
    stuck = verdict(POD, snap, WhyInputs(runtime=_runtime(_container("created"))))
    assert stuck.code == "cdi-unresolvable"
    assert any(e.source == "cdi" and "nvidia.com/gpu=GPU-0" in e.what for e in stuck.evidence)
    # A running container's names were resolved when it was made: no verdict from them.
    assert verdict(POD, snap, WhyInputs(runtime=_runtime(_container()))).code == "running"


def _claim_pod(driver: str = "gpu.example.com") -> PodResources:
    dr = DynamicResource("gpus", "ml", (ClaimDevice(driver, "pool", "gpu-0"),))
    return PodResources("ml", "train-0", (ContainerResources("main", dynamic_resources=(dr,)),))


def test_dra_driver_missing_names_the_driver_and_a_runnable_hint() -> None:
    a = verdict(
        POD,
        _snap(pods=(_claim_pod(),)),
        WhyInputs(runtime=_runtime(_container("created")), node_name="gpu-node-7"),
    )
    assert a.code == "dra-driver-missing"
    assert "gpu.example.com" in a.verdict
    assert a.hint == "kubectl get pods -A -o wide --field-selector spec.nodeName=gpu-node-7 | grep gpu"


def _dra_cp(devices: tuple[DraCheckpointDevice, ...]) -> DraCheckpoint:
    claim = DraCheckpointClaim("cu", "gpus", "ml", (UID,), ("gpu.example.com",), devices)
    return DraCheckpoint("/var/lib/kubelet/dra_manager_state", "v1", True, 1, 1, (claim,))


def _dra_driver() -> PluginProbe:
    from devctl.model import DraEndpoint, RegistryInfo

    reg = RegistryInfo("DRAPlugin", "gpu.example.com", "/plugins/gpu/dra.sock")
    return PluginProbe("/reg/gpu.sock", PluginStatus.SERVING, registry=reg, dra=DraEndpoint("/p", PluginStatus.SERVING))


def test_claim_not_prepared_from_the_dra_checkpoint() -> None:
    a = verdict(
        POD,
        _snap(pods=(_claim_pod(),), plugins=(_dra_driver(),), dra_checkpoint=_dra_cp(())),
        WhyInputs(runtime=_runtime(_container("created"))),
    )
    assert a.code == "claim-not-prepared"
    assert "ml/gpus" in a.evidence[0].what
    assert a.hint == f"journalctl -u kubelet | grep {UID}"


def test_plugin_missing_for_a_held_resource() -> None:
    a = verdict(POD, _snap(pods=(_gpu_pod(),), plugins=()), WhyInputs(runtime=_runtime(_container())))
    assert a.code == "plugin-missing"
    assert a.verdict == "no device plugin serves nvidia.com/gpu"
    assert a.hint == "devctl plugins"


def test_device_unhealthy_held_device() -> None:
    a = verdict(
        POD, _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin("Unhealthy"),)), WhyInputs(runtime=_runtime(_container()))
    )
    assert a.code == "device-unhealthy"
    assert a.evidence[0].what == "nvidia.com/gpu GPU-0: Unhealthy"
    assert a.hint == "kubectl -n ml delete pod train-0"


def test_container_error_crashloop_hint_names_the_container() -> None:
    a = verdict(
        POD,
        _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin(),)),
        WhyInputs(runtime=_runtime(_container("exited", "CrashLoopBackOff", "back-off 5m0s", exit_code=1))),
    )
    assert a.code == "container-error"
    assert a.verdict == "container main: CrashLoopBackOff"
    assert a.hint == "kubectl -n ml logs train-0 -c main --previous"


def test_admission_rejected_from_the_kubelet_log() -> None:
    line = (
        'E1203 10:00:00.1 1 predicate.go:1] "Predicate failed on Pod" pod="ml/train-0" err="UnexpectedAdmissionError"'
    )
    a = verdict(
        POD,
        _snap(pods=None),
        WhyInputs(runtime=PodRuntimeState("/c.sock"), kubelet_lines=(LogLine(line_time(line), line),), logged=True),
    )
    assert a.code == "admission-rejected"
    assert "UnexpectedAdmissionError" in a.verdict
    assert a.evidence[0].source == "kubelet-log" and a.evidence[0].time == "2026-12-03T10:00:00Z"
    assert a.hint == "kubectl -n ml delete pod train-0"


def test_admission_rejected_from_a_fit_replay() -> None:
    class Rejected:
        admit = False
        reason = "TopologyAffinityError"
        message = "Resources cannot be allocated with Topology locality"

    a = verdict(POD, _snap(pods=None), WhyInputs(runtime=PodRuntimeState("/c.sock"), logged=True, fit=Rejected()))
    assert a.code == "admission-rejected"
    assert a.hint == "kubectl -n ml get pod train-0 -o yaml | devctl fit -f -"


def test_hint_quotes_a_hostile_name() -> None:
    a = verdict(
        PodRef("ml", "x;rm -rf ~"),
        _snap(pod_identities=()),
        WhyInputs(runtime=PodRuntimeState("/c.sock")),
    )
    assert a.code == "not-on-node"
    assert a.hint.endswith("'metadata.name=x;rm -rf ~'")


def test_order_cdi_before_unhealthy() -> None:
    """Two causes at once: the fixed order decides, CDI first."""
    msg = "unresolvable CDI devices nvidia.com/gpu=GPU-0"
    a = verdict(
        POD,
        _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin("Unhealthy"),)),
        WhyInputs(runtime=_runtime(_container("created", "CreateContainerError", msg))),
    )
    assert a.code == "cdi-unresolvable"
    assert CODES.index("cdi-unresolvable") < CODES.index("device-unhealthy")


def test_sparse_kubelet_log_of_gigabytes_is_read_from_its_end(tmp_path: Path) -> None:
    """A 4 GiB log (sparse: no disk used): the lines about the pod at its end are found, the rest never read."""
    log = tmp_path / "kubelet.log"
    with open(log, "wb") as f:
        f.write(b'I1203 09:00:00.000001 1 kubelet.go:1] "early" pod="ml/train-0"\n')  # beyond the 8 MiB window
        f.truncate(4 * 1024**3)
        f.seek(0, os.SEEK_END)
        f.write(b'E1203 10:00:00.000001 1 pod_workers.go:1301] "Error syncing pod" pod="ml/train-0"\n')
        f.write(b'I1203 10:00:01.000001 1 kubelet.go:2] "other" pod="ml/train-1"\n')
    start = time.monotonic()
    lines = file_lines(str(log), ("ml/train-0", UID))
    assert time.monotonic() - start < 30  # does not hang: 8 MiB, not 4 GiB
    assert [ln.text for ln in lines] == [
        'E1203 10:00:00.000001 1 pod_workers.go:1301] "Error syncing pod" pod="ml/train-0"'
    ]
    assert lines[0].time == "12-03 10:00:00"


def test_kubelet_log_that_is_a_fifo_is_refused_not_opened(tmp_path: Path) -> None:
    from devctl.node.files import FileReadError

    fifo = tmp_path / "kubelet.log"
    os.mkfifo(fifo)
    with pytest.raises(FileReadError):
        file_lines(str(fifo), ("ml/train-0",))


def test_unknown_uid_comes_from_the_identities() -> None:
    a = verdict(POD, replace(_snap(), pods=(_gpu_pod(),), plugins=(_gpu_plugin(),)), WhyInputs(runtime=None))
    assert a.pod.uid == UID
    assert a.code == "unknown"
