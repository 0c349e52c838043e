"""``kubectl devctl NODE ARGS...`` with a fake ``kubectl`` on PATH that records its argv (there is no cluster here).

The fake answers ``get pods`` with the pod list the test gives it and exits
with a chosen status for the command that runs devctl, so each path — exec in
the DaemonSet's pod, a debug pod, a terminal for ``tui``, kubectl failing — is
checked by what kubectl was asked to do.
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

FAKE_KUBECTL = """#!{python}
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
while args and args[0].startswith("--"):
    args = args[2:]  # --context NAME, --kubeconfig FILE
if args[:1] == ["get"]:
    if os.environ.get("FAKE_GET_FAILS"):
        print("error: You must be logged in to the server (Unauthorized)", file=sys.stderr)
        sys.exit(1)
    print(os.environ.get("FAKE_PODS", '{{"items": []}}'))
    sys.exit(0)
sys.exit(int(os.environ.get("FAKE_STATUS", "0")))
"""


def _pod(phase: str = "Running", name: str = "devctl-exporter-x7k2p") -> dict[str, Any]:
    return {"metadata": {"namespace": "devctl", "name": name}, "status": {"phase": phase}}


def _run(tmp_path: Path, *args: str, pods: list[dict[str, Any]] | None = None, **env: str) -> tuple[int, list, str]:
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
        "FAKE_PODS": json.dumps({"items": pods or []}),
        **env,
    }
    p = subprocess.run(
        [sys.executable, "-m", "devctl.cli.kubectl", *args], capture_output=True, text=True, env=environ, timeout=30
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return p.returncode, calls, p.stderr


def test_runs_in_the_daemonset_pod_on_the_node(tmp_path: Path) -> None:
    code, calls, _ = _run(tmp_path, "node-a", "ls", "-o", "json", pods=[_pod()])
    assert code == 0
    get, run = calls
    assert get[:2] == ["get", "pods"]
    assert "spec.nodeName=node-a" in get and "app.kubernetes.io/name=devctl-exporter" in get
    assert run == [
        "exec", "-n", "devctl", "devctl-exporter-x7k2p", "-c", "exporter", "--",
        "devctl", "--root", "/host", "ls", "-o", "json",
    ]  # fmt: skip


def test_tui_gets_a_terminal(tmp_path: Path) -> None:
    _, calls, _ = _run(tmp_path, "node-a", "tui", pods=[_pod()])
    assert calls[1][:2] == ["exec", "-it"]
    _, calls, _ = _run(tmp_path, "node-a", "tui")
    assert "-it" in calls[1] and "--attach=true" not in calls[1]


def test_a_debug_pod_where_no_daemonset_pod_runs(tmp_path: Path) -> None:
    for pods in ([], [_pod("Pending")]):
        code, calls, _ = _run(tmp_path, "--image", "registry.example/devctl:1", "node-b", "doctor", pods=pods)
        assert code == 0
        assert calls[1] == [
            "debug", "node/node-b", "--profile=sysadmin", "--image=registry.example/devctl:1", "--quiet",
            "--attach=true", "--", "devctl", "--root", "/host", "doctor",
        ]  # fmt: skip


def test_kubectl_flags_go_to_every_kubectl_call_and_the_status_comes_back(tmp_path: Path) -> None:
    code, calls, _ = _run(tmp_path, "--context", "prod", "node-a", "doctor", pods=[_pod()], FAKE_STATUS="1")
    assert code == 1
    assert all(call[:2] == ["--context", "prod"] for call in calls)


def test_kubectl_that_cannot_list_pods_is_one_line_and_exit_3(tmp_path: Path) -> None:
    code, calls, err = _run(tmp_path, "node-a", "ls", FAKE_GET_FAILS="1")
    assert code == 3
    assert len(calls) == 1  # nothing run on the node
    assert err.count("\n") == 1 and "Unauthorized" in err


def test_no_node_is_a_usage_error(tmp_path: Path) -> None:
    code, calls, err = _run(tmp_path)
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
