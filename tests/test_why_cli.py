"""``devctl why`` as a person and a script run it: against the default simulated node, a hung CRI, a missing pod.

The default node's ml/train-0 trainer is stuck in CreateContainerError on an unresolvable CDI device
(devctl/lab/sim/scenarios/default.yaml, ``waiting:``), with the kubelet's lines about it in
``<root>/var/log/kubelet.log``.
"""

from __future__ import annotations

import shlex
import time

from tests.badservers import hung_server
from tests.helpers import devctl


def test_the_sims_stuck_pod_is_explained_on_one_screen(sim_node):
    r = devctl(sim_node.root, "why", "-n", "ml", "train-0")
    assert r.exit_code == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("cdi-unresolvable: the runtime cannot resolve nvidia.com/gpu=GPU-0")
    assert any(" cri " in ln and "container trainer: CreateContainerError" in ln for ln in lines)
    assert any(" kubelet-log " in ln and "Error syncing pod" in ln for ln in lines)  # its klog header cut
    assert "hint: devctl cdi" in lines
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines)


def test_the_sims_stuck_pod_as_json_names_its_evidence(sim_node):
    r = devctl(sim_node.root, "why", "ml/train-0", "-o", "json")
    assert r.exit_code == 1, r.stderr
    doc = r.json
    assert doc["pod"]["namespace"] == "ml" and doc["pod"]["name"] == "train-0" and doc["pod"]["uid"]
    assert doc["code"] == "cdi-unresolvable"
    sources = [e["source"] for e in doc["evidence"]]
    assert "cri" in sources and "kubelet-log" in sources
    # The kubelet's own line carries the pod's UID: the log was matched by it and by ns/name.
    assert any(doc["pod"]["uid"] in e["what"] for e in doc["evidence"] if e["source"] == "kubelet-log")
    assert shlex.split(doc["hint"]) == ["devctl", "cdi"]


def test_a_running_pod_exits_0_and_an_unhealthy_claim_is_named(sim_node):
    ok = devctl(sim_node.root, "why", "inference/embed-0", "-o", "json")
    assert ok.exit_code == 0 and ok.json["code"] == "running"
    sick = devctl(sim_node.root, "why", "ml/train-1", "-o", "json")
    assert sick.exit_code == 1 and sick.json["code"] == "device-unhealthy"
    assert any("gpu-3" in e["what"] for e in sick.json["evidence"])
    assert sick.json["hint"] == "kubectl -n ml delete pod train-1"


def test_not_on_node(sim_node):
    r = devctl(sim_node.root, "why", "-n", "ml", "train-9", "-o", "json")
    assert r.exit_code == 1
    assert r.json["code"] == "not-on-node"
    assert r.json["hint"] == "kubectl get pods -A -o wide --field-selector metadata.name=train-9"


def test_a_hung_cri_still_answers_within_the_deadline_with_the_rest(sim_node, short_root, background):
    """The runtime accepts and never answers: the CRI is one timeout error, the kubelet log still explains it."""
    hung = str(short_root / "hung.sock")
    background(hung_server(hung))
    start = time.monotonic()
    r = devctl(sim_node.root, "--runtime-endpoint", hung, "why", "ml/train-0", "-o", "json", timeout=0.5)
    assert time.monotonic() - start < 30  # does not hang (generous: a loaded machine)
    assert r.exit_code == 1, r.stderr
    doc = r.json
    assert [(e["source"], e["kind"]) for e in doc["errors"] if e["source"] == "cri"] == [("cri", "timeout")]
    assert doc["code"] == "cdi-unresolvable"
    assert {e["source"] for e in doc["evidence"]} >= {"kubelet-log", "cdi"}


def test_usage_errors_exit_2(sim_node):
    assert devctl(sim_node.root, "why").exit_code == 2
    assert devctl(sim_node.root, "why", "ml/train-0", "-n", "other").exit_code == 2
    assert devctl(sim_node.root, "why", "ml/train-0", "-o", "wide").exit_code == 2


def test_no_source_exits_3(short_root):
    r = devctl(short_root, "why", "ml/train-0", "-o", "json")
    assert r.exit_code == 3, r.stdout
    assert {"cri", "pod-resources"} <= {e["source"] for e in r.json["errors"]}


def test_kubelet_log_option_is_read(sim_node, tmp_path):
    log = tmp_path / "k.log"
    log.write_text('E1203 10:00:00.000001 1 kubelet.go:1] "Error" pod="ml/ghost-0" err="OutOfnvidia.com/gpu"\n')
    r = devctl(sim_node.root, "why", "ml/ghost-0", "--kubelet-log", str(log), "-o", "json")
    assert r.json["code"] == "admission-rejected"
    assert "OutOfnvidia.com/gpu" in r.json["verdict"]


def test_manifest_names_the_pod_and_a_non_pod_is_a_usage_error(sim_node, tmp_path):
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: train-0, namespace: ml}\nspec: {containers: []}\n")
    r = devctl(sim_node.root, "why", "-f", str(pod), "-o", "json")
    assert r.json["pod"]["namespace"] == "ml" and r.json["code"] == "cdi-unresolvable"
    notpod = tmp_path / "deploy.yaml"
    notpod.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    bad = devctl(sim_node.root, "why", "-f", str(notpod))
    assert bad.exit_code == 2 and bad.stdout == ""
