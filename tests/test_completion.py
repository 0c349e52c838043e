"""Shell completion: the shipped scripts are current, and devctl answers the completion call-back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

COMPLETIONS = Path(__file__).resolve().parent.parent / "completions"


def devctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shipped_script_matches_the_command(shell):
    out = devctl("completion", shell)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (COMPLETIONS / f"devctl.{shell}").read_text()


def test_bash_completes_commands_and_options():
    env = {"_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": "devctl comp", "COMP_CWORD": "1"}
    assert devctl(env=env).stdout.split() == ["completion"]
    env["COMP_WORDS"] = "devctl --time"
    assert devctl(env=env).stdout.split() == ["--timeout"]


def _complete(words: str, root: Path | str, **more: str) -> list[str]:
    """What bash would offer for ``words``; the node's List may take as long as a loaded test machine needs."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {"_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword), "DEVCTL_ROOT": str(root)}
    out = devctl(env={"DEVCTL_COMPLETE_TIMEOUT": "20", **env, **more})
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout.split()


def test_names_are_completed_live_from_the_node(sim_node) -> None:
    root = sim_node.root
    assert _complete("devctl ls ", root) == [
        "gpu.example.com",  # a DRA driver, from its claims in dra_manager_state
        "hardware-vendor.example/foo",
        "intel.com/sriov_netdevice",
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
    ]
    assert _complete("devctl devices nv", root) == ["nvidia.com/gpu", "nvidia.com/gpu.shared"]
    assert "GPU-7" in _complete("devctl plugin set-health nvidia.com/gpu GPU-", root)
    assert _complete("devctl pods -n ", root) == ["chat", "inference", "ml", "monitoring"]
    assert _complete("devctl get -n ml ", root) == ["train-0", "train-1"]
    assert "ml/train-0" in _complete("devctl get ", root)


def test_dra_drivers_claims_and_device_ids_after_a_resource_are_completed(sim_node) -> None:
    # GIVEN the default node (device plugins, and gpu.example.com's claims in dra_manager_state)
    root = sim_node.root
    # THEN a DRA driver is a resource name where a command takes one (ls, devices, watch, plugin set-health)
    assert "gpu.example.com" in _complete("devctl ls ", root)
    assert _complete("devctl watch gpu.", root) == ["gpu.example.com"]
    assert _complete("devctl plugin set-health gpu.example.com sim-node/gpu-", root) == [
        "sim-node/gpu-0",
        "sim-node/gpu-2",
        "sim-node/gpu-3",
    ]
    # devices takes resources or device IDs: after a resource, its IDs
    assert "GPU-7" in _complete("devctl devices nvidia.com/gpu ", root)
    assert _complete("devctl devices nvidia.com/gpu GPU-", root) == [f"GPU-{i}" for i in (0, 1, 2, 3, 4, 6, 7)]
    assert not any(i.startswith("GPU-") for i in _complete("devctl devices ", root))
    # claims: NAMESPACE/NAME, or names in the -n namespace
    assert _complete("devctl claims ", root) == ["inference/embed-gpu", "ml/train-1-gpus"]
    assert _complete("devctl claims -n ml ", root) == ["train-1-gpus"]
    # call --dra: the driver, its RPCs, then its claims for prepare and unprepare
    assert _complete("devctl call --dra ", root) == ["gpu.example.com"]
    assert _complete("devctl call --dra gpu.example.com ", root) == ["health", "info", "prepare", "unprepare"]
    assert _complete("devctl call --dra gpu.example.com unprepare ml/", root) == ["ml/train-1-gpus"]
    assert _complete("devctl call --dra gpu.example.com info ", root) == []


def test_a_node_that_does_not_answer_completes_nothing_silently(tmp_path: Path) -> None:
    assert _complete("devctl ls ", tmp_path) == []
    assert _complete("devctl pods -n ", tmp_path) == []
    assert _complete("devctl claims ", tmp_path) == []
    assert _complete("devctl call --dra ", tmp_path) == []


def test_call_completes_resources_then_rpc_names_then_device_ids(sim_node) -> None:
    root = sim_node.root
    assert "nvidia.com/gpu" in _complete("devctl call ", root)
    assert _complete("devctl call nvidia.com/gpu ", root) == ["allocate", "list", "options", "preferred", "prestart"]
    assert _complete("devctl call nvidia.com/gpu pre", root) == ["preferred", "prestart"]
    assert "GPU-7" in _complete("devctl call nvidia.com/gpu allocate GPU-", root)
    assert _complete("devctl call nvidia.com/gpu list ", root) == []  # list takes no IDs
    assert _complete("devctl call --socket nvidia-gpu.sock o", root) == ["options"]


def test_a_hung_kubelet_completes_nothing_without_waiting_for_the_rpc_timeout(tmp_path: Path) -> None:
    # A pod-resources socket that listens and never accepts. The completion's own deadline (what is left of its
    # budget, not --timeout) ends the List: with DEVCTL_TIMEOUT=60 a List under --timeout would outlast the run's 60 s.
    import socket

    path = tmp_path / "hung.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
        hung.bind(str(path))
        hung.listen(64)
        words = "devctl pods -n "
        env = {"_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": "3"}
        env |= {"DEVCTL_ROOT": str(tmp_path), "DEVCTL_POD_RESOURCES": str(path), "DEVCTL_TIMEOUT": "60"}
        out = devctl(env=env)
    assert (out.returncode, out.stdout.split(), out.stderr) == (0, [], "")


def test_completion_imports_only_what_it_reads(tmp_path: Path) -> None:
    # Resource names come from the checkpoint file: neither gRPC, asyncio, the analysis nor the renderers load.
    probe = (
        "import json, sys\n"
        "from devctl.cli.start import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": "devctl ls ", "COMP_CWORD": "2"}
    env["DEVCTL_ROOT"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    modules = set(__import__("json").loads(out.stderr))
    assert "devctl.cli.complete" in modules
    loaded = {m.split(".")[0] for m in modules} | {m for m in modules if m.startswith("devctl.")}
    for heavy in ("grpc", "asyncio", "textual", "tabulate", "yaml", "devctl.analyze", "devctl.core.collect"):
        assert heavy not in loaded, heavy
    assert not any(m.startswith("devctl.render") for m in modules)


def test_namespaces_and_pods_come_from_the_pod_log_dirs_while_the_kubelet_hangs(tmp_path: Path) -> None:
    # The kubelet's <root>/var/log/pods/<ns>_<name>_<uid> answer at the cost of a listing: a pod-resources socket
    # that never accepts is not asked (with DEVCTL_TIMEOUT=60 and the List's deadline at 20 s, asking would
    # outlast the run's 60 s or complete nothing), and neither gRPC nor asyncio is loaded.
    import socket

    logs = tmp_path / "var/log/pods"
    for name in ("ml_train-0_0b1c", "ml_train-1_9f2e", "monitoring_node-exporter-x7_5d3a", "not-a-pod-dir"):
        (logs / name).mkdir(parents=True)
    (logs / "kube-system_a-file_1a2b").write_text("")  # only directories are pods
    path = tmp_path / "hung.sock"
    probe = (
        "import json, sys\n"
        "from devctl.cli.start import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
        hung.bind(str(path))
        hung.listen(64)
        more = {"DEVCTL_POD_RESOURCES": str(path), "DEVCTL_TIMEOUT": "60"}
        assert _complete("devctl pods -n ", tmp_path, **more) == ["ml", "monitoring"]
        assert _complete("devctl get -n ml ", tmp_path, **more) == ["train-0", "train-1"]
        assert _complete("devctl get mo", tmp_path, **more) == ["monitoring/node-exporter-x7"]
        env = {**os.environ, "_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": "devctl pods -n ", "COMP_CWORD": "3"}
        env |= {"DEVCTL_ROOT": str(tmp_path), **more}
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.split() == ["ml", "monitoring"]
    loaded = {m.split(".")[0] for m in __import__("json").loads(out.stderr)}
    assert "grpc" not in loaded and "asyncio" not in loaded


def test_the_completion_budget_counts_from_the_process_start() -> None:
    # The interpreter and typer take part of the budget before devctl.cli.complete is imported: the deadline is
    # counted from when the process started, not from that import (here made 0.2 s later than the script's start).
    probe = (
        "import time\n"
        "t0 = time.monotonic()\n"
        "time.sleep(0.2)\n"
        "from devctl.cli import complete\n"
        "print(complete._STARTED - t0)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    # /proc's start time has the clock tick's resolution (10 ms); the process began before its script ran (by the
    # interpreter's start-up: well under 10 s, however loaded the machine).
    assert -10 < float(out.stdout) <= 0.011


def test_who_and_sim_delete_pod_are_completed(sim_node) -> None:
    root = sim_node.root
    # who takes a device ID, a resource or a driver
    assert _complete("devctl who nvidia", root) == ["nvidia.com/gpu", "nvidia.com/gpu.shared"]
    assert "GPU-7" in _complete("devctl who GPU-", root)
    assert "sim-node/gpu-0" in _complete("devctl who sim-node/", root)
    # sim delete-pod takes NS/NAME
    assert _complete("devctl sim delete-pod ml/", root) == ["ml/train-0", "ml/train-1"]


def test_a_held_device_that_went_unhealthy_is_still_offered(tmp_path: Path) -> None:
    # The kubelet registers healthy devices only; GPU-9 went bad while ml/train-0 holds it: its entry still names it.
    from devctl.node.checkpoint import RawEntry, write_checkpoint

    plugins = tmp_path / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    held = RawEntry(
        pod_uid="0b1c", container="main", resource="nvidia.com/gpu", device_ids={"0": ["GPU-9"]}, alloc_resp=b""
    )
    write_checkpoint(str(plugins / "kubelet_internal_checkpoint"), [held], {"nvidia.com/gpu": ["GPU-0"]})
    assert _complete("devctl plugin set-health nvidia.com/gpu GPU-", tmp_path) == ["GPU-0", "GPU-9"]
    assert _complete("devctl devices nvidia.com/gpu GPU-", tmp_path) == ["GPU-0", "GPU-9"]
    assert _complete("devctl who GPU-", tmp_path) == ["GPU-0", "GPU-9"]


def test_a_root_typed_after_the_command_is_the_one_completed_from(sim_node, tmp_path) -> None:
    """`devctl ls --root X <TAB>` completes from X, as `devctl --root X ls <TAB>` does, not from DEVCTL_ROOT."""
    elsewhere = tmp_path / "not-a-node"
    elsewhere.mkdir()
    typed_after = _complete(f"devctl ls --root {sim_node.root} nvidia", elsewhere)
    assert typed_after == _complete(f"devctl --root {sim_node.root} ls nvidia", elsewhere)
    assert "nvidia.com/gpu" in typed_after
