"""Doctor's pod-level findings (devctl.analyze.doctor_pods): a container the runtime keeps waiting on its devices,
with the ``devctl why`` that explains it; the simulated node's stuck ml/train-0 found through the real CRI."""

from __future__ import annotations

from devctl.analyze.doctor_pods import PodWaiting, pod_findings
from tests.helpers import devctl

CDI_MESSAGE = (
    "failed to create containerd container: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=GPU-0"
)


def test_device_reasons_are_findings_other_reasons_are_not() -> None:
    waiting = [
        PodWaiting("ml", "train-0", "trainer", "CreateContainerError", CDI_MESSAGE),
        PodWaiting(
            "ml",
            "run-1",
            "main",
            "RunContainerError",
            'error gathering device information while adding custom device "/dev/nvidia3": no such file or directory',
        ),
        PodWaiting("web", "api-0", "main", "CreateContainerConfigError", 'secret "db" not found'),
        PodWaiting("web", "api-1", "main", "CrashLoopBackOff", "back-off 5m0s restarting failed container"),
    ]
    found = pod_findings(waiting)
    assert [(f.code, f.subject, f.hint) for f in found] == [
        ("device-container-waiting", "ml/train-0", "devctl why -n ml train-0"),
        ("device-container-waiting", "ml/run-1", "devctl why -n ml run-1"),
    ]
    assert found[0].severity.value == "warning"
    assert found[0].message.startswith("container trainer cannot start: CreateContainerError: failed to create")


def test_hint_quotes_a_hostile_pod_name() -> None:
    (f,) = pod_findings([PodWaiting("ml", "x;reboot", "c", "CreateContainerError", "CDI device injection failed")])
    assert f.hint == "devctl why -n ml 'x;reboot'"


def test_doctor_names_the_sims_stuck_pod_with_the_why_hint(sim_node):
    r = devctl(sim_node.root, "doctor", "-o", "json")
    assert r.exit_code in (0, 1), r.stderr
    mine = [f for f in r.json["findings"] if f["code"] == "device-container-waiting"]
    assert [(f["subject"], f["hint"]) for f in mine] == [("ml/train-0", "devctl why -n ml train-0")]
    assert "unresolvable CDI devices nvidia.com/gpu=GPU-0" in mine[0]["message"]
