"""``devctl why`` against a red team's kubelet log: lines about another pod, and log lines against a running pod.

A line about ``inference/serve-10`` is not about ``inference/serve-1``; a pod the runtime says is running is
not "rejected at admission" on old log lines alone.
"""

from __future__ import annotations

from devctl.analyze.why import PodRef, WhyInputs, verdict
from devctl.model import NodePaths, NodeSnapshot
from devctl.model.runtime import ContainerState, LogLine, PodRuntimeState, SandboxState
from devctl.node.kubeletlog import line_time, matching
from tests.helpers import devctl

UID = "0b5c2f3e-1111-4a4a-9b9b-000000000001"
DENIED = (
    'E1203 10:00:00.000001 1 kubelet.go:2364] "Pod admission denied" podUID="{uid}" pod="{pod}" '
    'reason="UnexpectedAdmissionError" message="Allocate failed due to OutOfnvidia.com/gpu"'
)


def _texts(lines: tuple[LogLine, ...]) -> list[str]:
    return [ln.text for ln in lines]


def test_a_longer_pod_name_is_not_the_pod() -> None:
    other = DENIED.format(uid="ffffffff-0000-0000-0000-000000000010", pod="inference/serve-10")
    assert matching([other], ("inference/serve-1",)) == ()


def test_the_pod_is_matched_as_a_whole_token() -> None:
    lines = [
        DENIED.format(uid="u", pod="inference/serve-1"),  # klog's pod="ns/name"
        "I1203 10:00:01 1 x.go:1] Killing pod inference/serve-1.",  # ended by a full stop
        "I1203 10:00:02 1 x.go:1] pod=inference/serve-1 ok",  # bounded by space
        "I1203 10:00:03 1 x.go:1] pod=xinference/serve-1 no",  # another namespace ending in it
        "I1203 10:00:03 1 x.go:1] pod=inference/serve-1/server",  # its container
        "I1203 10:00:04 1 x.go:1] pod=inference/serve-1.old no",  # another pod: serve-1.old
        "I1203 10:00:05 1 x.go:1] pod=inference/serve-1-canary no",
    ]
    assert _texts(matching(lines, ("inference/serve-1",))) == [*lines[:3], lines[4]]


def test_the_uid_is_matched_whole_and_in_a_pod_log_path() -> None:
    lines = [
        f'I1203 10:00:00 1 x.go:1] "Sync" podUID="{UID}"',
        f"I1203 10:00:01 1 x.go:1] /var/log/pods/ml_train-0_{UID}/main/0.log",
        f'I1203 10:00:02 1 x.go:1] "Sync" podUID="{UID}0"',
    ]
    assert _texts(matching(lines, (UID,))) == lines[:2]


def _running() -> PodRuntimeState:
    return PodRuntimeState(
        "/run/containerd.sock",
        (SandboxState("sb1", UID, "ready", "2026-12-03T09:00:00Z"),),
        (ContainerState("c1", "sb1", "server", "running", "", "", None, created_at="2026-12-03T09:00:01Z"),),
    )


def test_a_running_pod_is_not_admission_rejected_on_log_lines_alone() -> None:
    line = DENIED.format(uid=UID, pod="inference/serve-1")
    snap = NodeSnapshot(
        taken_at="2026-12-03T10:00:00Z",
        paths=NodePaths("/", "/var/lib/kubelet", "/dp", "/pr.sock", "/sys", "/var/log/pods"),
        pods=(),
    )
    extra = WhyInputs(runtime=_running(), kubelet_lines=(LogLine(line_time(line), line),), logged=True)
    a = verdict(PodRef("inference", "serve-1"), snap, extra)
    assert a.code == "running"
    assert "delete" not in a.hint


def test_cli_a_line_about_serve_10_does_not_reject_the_running_serve_1(sim_node, tmp_path):
    """The red team's case: the sim's inference/serve-1 runs; the log names only inference/serve-10."""
    log = tmp_path / "kubelet.log"
    log.write_text(DENIED.format(uid="ffffffff-0000-0000-0000-000000000010", pod="inference/serve-10") + "\n")
    r = devctl(sim_node.root, "why", "inference/serve-1", "--kubelet-log", str(log), "-o", "json")
    assert r.json["code"] == "running", r.stdout + r.stderr
    assert r.exit_code == 0
    assert not any(e["source"] == "kubelet-log" for e in r.json["evidence"])
