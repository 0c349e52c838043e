"""``kubectl devctl NODE ARGS...`` with a fake ``kubectl`` on PATH that records its argv (there is no cluster here).

The fake answers ``get daemonset`` and ``get pods`` with the objects the test
gives it and exits with a chosen status (after writing chosen stderr) for the
command that runs devctl, so each path — exec in the DaemonSet's pod, a debug
pod asked for, a terminal for ``tui``, kubectl failing — is checked by what
kubectl was asked to do. tests/test_kubectl_hostile.py has the hostile cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DS_UID = "5f1c2a8e-0d4b-4c61-9a7e-3b2d1e0f9c88"

FAKE_KUBECTL = """#!{python}
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
while args and args[0].startswith("--"):
    args = args[1:]  # --context=NAME, --kubeconfig=FILE
if args[:2] == ["get", "daemonset"]:
    if os.environ.get("FAKE_DS_FAILS"):
        print("Error from server (Forbidden): daemonsets.apps is forbidden", file=sys.stderr)
        sys.exit(1)
    print(os.environ["FAKE_DS"])
    sys.exit(0)
if args[:2] == ["get", "pods"]:
    if os.environ.get("FAKE_GET_FAILS"):
        default = "error: You must be logged in to the server (Unauthorized)\\n"
        sys.stderr.write(os.environ.get("FAKE_GET_STDERR", default))
        sys.exit(1)
    sys.stdout.write(os.environ["FAKE_PODS"])
    sys.exit(0)
sys.stderr.write(os.environ.get("FAKE_STDERR", ""))
sys.exit(int(os.environ.get("FAKE_STATUS", "0")))
"""


def daemonset(namespace: str = "devctl", name: str = "devctl-exporter", uid: str = DS_UID) -> dict[str, Any]:
    return {"kind": "DaemonSet", "metadata": {"namespace": namespace, "name": name, "uid": uid}}


def pod(
    name: str = "devctl-exporter-x7k2p",
    *,
    namespace: str = "devctl",
    node: str = "node-a",
    phase: str = "Running",
    owner: str | None = "devctl-exporter",
    owner_uid: str = DS_UID,
    controller: bool = True,
) -> dict[str, Any]:
    """A pod as ``kubectl get pods -o json`` lists it; by default the DaemonSet's own on node-a."""
    meta: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "labels": {"app.kubernetes.io/name": "devctl-exporter"},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "uid": owner_uid, "controller": controller}
        ]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def run_plugin(
    tmp_path: Path,
    *args: str,
    pods: list[dict[str, Any]] | None = None,
    ds: dict[str, Any] | None = None,
    raw_pods: str | None = None,
    **env: str,
) -> tuple[int, list[list[str]], str]:
    """Exit status, every kubectl argv (without the kubectl), and stderr of ``kubectl-devctl ARGS``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    log.unlink(missing_ok=True)
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DEVCTL_")},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "FAKE_LOG": str(log),
        "FAKE_DS": json.dumps(ds or daemonset()),
        "FAKE_PODS": raw_pods if raw_pods is not None else json.dumps({"items": pods or []}),
        **env,
    }
    p = subprocess.run(
        [sys.executable, "-m", "devctl.cli.kubectl", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        env=environ,
        timeout=30,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return p.returncode, calls, p.stderr


def runs(calls: list[list[str]]) -> list[list[str]]:
    """The calls that run something on the node (not ``get``)."""
    return [c for c in calls if "get" not in c[:3]]


def test_runs_in_the_daemonset_pod_on_the_node(tmp_path: Path) -> None:
    code, calls, _ = run_plugin(tmp_path, "node-a", "ls", "-o", "json", pods=[pod()])
    assert code == 0
    get_ds, get_pods, run = calls
    assert get_ds[:3] == ["get", "daemonset", "devctl-exporter"] and "--namespace=devctl" in get_ds
    assert get_pods[:2] == ["get", "pods"]
    assert "spec.nodeName=node-a" in get_pods and "--namespace=devctl" in get_pods
    assert "--all-namespaces" not in get_pods and "-A" not in get_pods
    assert run == [
        "exec", "-n", "devctl", "devctl-exporter-x7k2p", "-c", "exporter", "--",
        "devctl", "--root", "/host", "ls", "-o", "json",
    ]  # fmt: skip


def test_another_namespace_and_daemonset_by_flag(tmp_path: Path) -> None:
    mine = pod("nodeinfo-abcde", namespace="ops", owner="nodeinfo")
    code, calls, _ = run_plugin(
        tmp_path, "-n", "ops", "--daemonset=nodeinfo", "node-a", "doctor", pods=[mine], ds=daemonset("ops", "nodeinfo")
    )
    assert code == 0
    assert "--namespace=ops" in calls[0] and "nodeinfo" in calls[0]
    assert runs(calls) == [
        ["exec", "-n", "ops", "nodeinfo-abcde", "-c", "exporter", "--", "devctl", "--root", "/host", "doctor"]
    ]


def test_tui_gets_a_terminal(tmp_path: Path) -> None:
    _, calls, _ = run_plugin(tmp_path, "node-a", "tui", pods=[pod()])
    assert runs(calls)[0][:2] == ["exec", "-it"]
    _, calls, _ = run_plugin(tmp_path, "--debug-image", "registry.example/devctl:1", "node-a", "tui")
    assert "-it" in runs(calls)[0] and "--attach=true" not in runs(calls)[0]


def test_no_daemonset_pod_is_one_line_and_exit_1_without_a_debug_pod(tmp_path: Path) -> None:
    for pods in ([], [pod(phase="Pending")], [pod(node="node-b")]):
        code, calls, err = run_plugin(tmp_path, "node-a", "doctor", pods=pods)
        assert code == 1
        assert runs(calls) == []  # no exec, no debug pod
        assert err.count("\n") == 1
        assert "no running pod of DaemonSet devctl/devctl-exporter on node node-a" in err and "--debug-image" in err


def test_a_debug_pod_only_when_asked_for(tmp_path: Path) -> None:
    for pods in ([], [pod(phase="Pending")]):
        code, calls, err = run_plugin(
            tmp_path, "--debug-image", "registry.example/devctl:1", "node-b", "doctor", pods=pods
        )
        assert code == 0
        assert runs(calls) == [
            [
                "debug", "node/node-b", "--profile=sysadmin", "--image=registry.example/devctl:1", "--quiet",
                "--attach=true", "--", "devctl", "--root", "/host", "doctor",
            ]
        ]  # fmt: skip
        assert "a debug pod of registry.example/devctl:1" in err  # said, not silent


def test_a_debug_image_must_be_fully_qualified(tmp_path: Path) -> None:
    for image in ("devctl:0.1.0", "devctl", "library/devctl:1", "registry.example/devctl", "Registry.example/x:1"):
        code, calls, err = run_plugin(tmp_path, "--debug-image", image, "node-a", "doctor")
        assert code == 2 and calls == [], image
        assert "not a fully qualified image" in err
    for image in ("localhost:5000/devctl:1", "ghcr.io/org/devctl@sha256:" + "ab" * 32):
        code, calls, _ = run_plugin(tmp_path, "--debug-image", image, "node-a", "doctor")
        assert code == 0 and f"--image={image}" in runs(calls)[0]


def test_the_old_image_option_is_gone(tmp_path: Path) -> None:
    code, calls, err = run_plugin(tmp_path, "--image", "registry.example/devctl:1", "node-a", "doctor")
    assert code == 2 and calls == [] and "unknown option --image" in err


def test_kubectl_flags_go_to_every_kubectl_call_and_the_status_comes_back(tmp_path: Path) -> None:
    code, calls, _ = run_plugin(tmp_path, "--context", "prod", "node-a", "doctor", pods=[pod()], FAKE_STATUS="1")
    assert code == 1
    assert len(calls) == 3 and all(call[:1] == ["--context=prod"] for call in calls)


def test_kubectl_that_cannot_list_pods_is_one_line_and_exit_3(tmp_path: Path) -> None:
    code, calls, err = run_plugin(tmp_path, "node-a", "ls", FAKE_GET_FAILS="1")
    assert code == 3
    assert runs(calls) == []  # nothing run on the node
    assert err.count("\n") == 1 and "Unauthorized" in err


def test_kubectl_missing_is_one_line_and_exit_3(tmp_path: Path) -> None:
    code, calls, err = run_plugin(tmp_path, "node-a", "ls", DEVCTL_KUBECTL=str(tmp_path / "no-kubectl"))
    assert code == 3 and calls == []
    assert err.count("\n") == 1 and "no-kubectl: not found on PATH" in err


def test_no_node_is_a_usage_error(tmp_path: Path) -> None:
    code, calls, err = run_plugin(tmp_path)
    assert code == 2 and calls == []
    assert "which node?" in err


def test_installed_as_a_console_script() -> None:
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl-devctl"].partition(":")
    assert (module, function) == ("devctl.cli.kubectl", "main")


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(tmp_path: Path, flag: str) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "devctl.cli.kubectl", flag],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=30,
    )  # fmt: skip
    assert p.returncode == 0 and "kubectl devctl" in p.stdout
