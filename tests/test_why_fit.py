"""``devctl why`` replays ``fit``: as admission-rejected evidence only when the node says the pod failed admission
or it holds nothing; requests from ``-f`` or recovered from the runtime's cgroup settings; the pod's own holdings
freed before the replay (devctl.analyze.why, analyze.why_fit, core.why_fit)."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.analyze.admission.inputs import AdmissionInputs, HeldDevices
from devctl.analyze.why import PodRef, WhyInputs, verdict
from devctl.analyze.why_fit import REQUESTS_UNKNOWN, LinuxResources, request_from_runtime, without_pod
from devctl.model import (
    ContainerDevices,
    ContainerResources,
    Device,
    NodePaths,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    PodResources,
)
from devctl.model.machine import KubeletPolicy, MachineTopology
from devctl.model.runtime import ContainerState, LogLine, PodRuntimeState, SandboxState
from devctl.node.kubeletlog import line_time
from tests.helpers import devctl

POD = PodRef("ml", "train-0")
PATHS = NodePaths("/", "/var/lib/kubelet", "/dp", "/pr.sock", "/sys", "/var/log/pods")
TOPOLOGY_MESSAGE = "Resources cannot be allocated with Topology locality"


@dataclass(frozen=True)
class Fit:
    admit: bool | None
    reason: str | None = None
    message: str = ""


REJECTED = Fit(False, "TopologyAffinityError", TOPOLOGY_MESSAGE)


def _snap(pods: tuple[PodResources, ...] | None = ()) -> NodeSnapshot:
    gpu = PluginProbe("/dp/gpu.sock", PluginStatus.SERVING, "nvidia.com/gpu", devices=(Device("GPU-0", "Healthy"),))
    return NodeSnapshot(taken_at="2026-12-03T10:00:00Z", paths=PATHS, pods=pods, plugins=(gpu,))


def test_topology_affinity_error_explained_with_fits_reason_and_message() -> None:
    """A pod the kubelet turned away holds nothing and has no sandbox: the replay is the evidence."""
    a = verdict(POD, _snap(), WhyInputs(runtime=PodRuntimeState("/c.sock"), logged=True, fit=REJECTED))
    assert a.code == "admission-rejected"
    assert "TopologyAffinityError" in a.verdict and "fit replayed" in a.verdict
    assert [(e.source, e.what) for e in a.evidence] == [
        ("fit", f"replayed now: TopologyAffinityError: {TOPOLOGY_MESSAGE}")
    ]
    assert a.hint == "kubectl -n ml get pod train-0 -o yaml | devctl fit -f -"


def test_a_running_pod_that_holds_devices_is_not_judged_by_a_replay() -> None:
    """A replay that does not fit now says nothing of a pod admitted long ago: the pod runs."""
    held = PodResources(
        "ml", "train-0", (ContainerResources("main", (ContainerDevices("nvidia.com/gpu", ("GPU-0",)),)),)
    )
    runtime = PodRuntimeState(
        "/c.sock",
        (SandboxState("sb1", "u1", "ready"),),
        (ContainerState("c1", "sb1", "main", "running"),),
    )
    a = verdict(POD, _snap((held,)), WhyInputs(runtime=runtime, fit=REJECTED))
    assert a.code == "running"
    assert all(e.source != "fit" for e in a.evidence)


def test_logged_rejection_without_requests_says_fit_was_not_replayed() -> None:
    line = 'E1203 10:00:00.1 1 predicate.go:1] "Predicate failed on Pod" pod="ml/train-0" err="TopologyAffinityError"'
    a = verdict(
        POD,
        _snap(None),
        WhyInputs(
            runtime=PodRuntimeState("/c.sock"),
            kubelet_lines=(LogLine(line_time(line), line),),
            fit_note=REQUESTS_UNKNOWN,
        ),
    )
    assert a.code == "admission-rejected"
    assert a.evidence[-1].source == "fit" and a.evidence[-1].what.startswith("requests unknown: fit not replayed")


def test_a_replay_that_admits_now_beside_a_logged_rejection_says_the_node_changed() -> None:
    line = 'E1203 10:00:00.1 1 predicate.go:1] "Predicate failed on Pod" pod="ml/train-0" err="OutOfnvidia.com/gpu"'
    a = verdict(
        POD,
        _snap(None),
        WhyInputs(runtime=PodRuntimeState("/c.sock"), kubelet_lines=(LogLine(line_time(line), line),), fit=Fit(True)),
    )
    assert a.verdict.endswith("OutOfnvidia.com/gpu")  # the kubelet's own word stands
    assert a.evidence[-1].what == "replayed now: admitted (the node changed since)"


def test_requests_recovered_from_linux_resources() -> None:
    """The kubelet's shares = milliCPU*1024/1000 and quota/period undone; devices from the holdings."""
    gib = 1024**3
    req, notes = request_from_runtime(
        [LinuxResources("main", cpu_shares=8192, cpu_quota=800_000, cpu_period=100_000, memory_limit=32 * gib)],
        {"main": {"nvidia.com/gpu": 2}},
        "ml",
        "train-0",
    )
    assert req is not None
    c = req.containers[0]
    assert dict(c.requests) == {"cpu": 8000, "memory": 32 * gib, "nvidia.com/gpu": 2}
    assert dict(c.limits) == {"cpu": 8000, "memory": 32 * gib, "nvidia.com/gpu": 2}
    assert req.qos == "Guaranteed"
    assert "memory request taken as its limit" in notes[0]
    burst, _ = request_from_runtime([LinuxResources("main", cpu_shares=512)], {}, "ml", "x")
    assert burst is not None and burst.qos == "Burstable" and dict(burst.containers[0].requests) == {"cpu": 500}
    none, note = request_from_runtime([], {}, "ml", "x")
    assert none is None and note == (REQUESTS_UNKNOWN,)


def test_the_pods_own_holdings_are_freed_before_the_replay() -> None:
    inputs = AdmissionInputs(
        machine=MachineTopology(),
        policy=KubeletPolicy(reserved_cpus=(0,)),
        held=(
            HeldDevices("ml", "train-0", "u1", "main", "nvidia.com/gpu", ("GPU-0",)),
            HeldDevices("ml", "train-1", "u2", "main", "nvidia.com/gpu", ("GPU-1",)),
        ),
        free_cpus=frozenset({4, 5}),
    )
    freed = without_pod(inputs, "ml", "train-0", "u1", cpus=(0, 2, 3))
    assert freed.allocated("nvidia.com/gpu") == frozenset({"GPU-1"})
    assert freed.free_cpus == frozenset({2, 3, 4, 5})  # the reserved CPU 0 stays out


def test_f_with_requests_that_do_not_fit_cites_the_replay(sim_node, tmp_path):
    """The simulated node has 9 GPUs: 99 do not fit; the kubelet's rejection line and fit's replay side by side."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ghost-0, namespace: ml}\nspec:\n  containers:\n"
        "  - name: main\n    resources:\n      limits: {nvidia.com/gpu: 99, cpu: '2', memory: 1Gi}\n"
    )
    log = tmp_path / "k.log"
    log.write_text(
        'E1203 10:00:00.000001 1 predicate.go:1] "Predicate failed on Pod" pod="ml/ghost-0" '
        'err="UnexpectedAdmissionError"\n'
    )
    r = devctl(sim_node.root, "why", "-f", str(pod), "--kubelet-log", str(log), "-o", "json")
    assert r.exit_code == 1, r.stderr
    assert r.json["code"] == "admission-rejected"
    fit = [e["what"] for e in r.json["evidence"] if e["source"] == "fit"]
    assert len(fit) == 1 and fit[0].startswith("replayed now: UnexpectedAdmissionError: ")
    assert "nvidia.com/gpu" in fit[0]
