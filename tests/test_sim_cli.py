"""`devctl sim` as a user runs it: real processes, exit codes, output, signals, restart-kubelet from another shell."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env, run_devctl

TIMEOUT = 30.0
SOCKETS = ["foo.sock", "kubelet.sock", "nvidia-gpu.sock", "sriov-netdevice.sock"]


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The next stdout line of a running process, or fail the test after ``timeout``."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            pytest.fail(f"no output within {timeout}s")
    return proc.stdout.readline()


def sockets_under(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_socket())


@pytest.fixture
def running_sim(short_root: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`devctl sim --root R` in the background, once it has printed its export line."""
    proc = subprocess.Popen(
        [*DEVCTL, "sim", "--root", str(short_root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        line = read_line(proc, TIMEOUT)
        assert line.strip() == f"export DEVCTL_ROOT={short_root}"
        yield proc, short_root
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=TIMEOUT)


def test_sim_runs_a_command_against_the_node() -> None:
    result = run_devctl(
        "sim", "--", "sh", "-c", 'ls "$DEVCTL_ROOT/var/lib/kubelet/device-plugins"; echo "$DEVCTL_ROOT"'
    )
    assert result.exit_code == 0, result.stderr
    *listing, root = result.stdout.splitlines()
    assert listing == sorted([*SOCKETS, "kubelet_internal_checkpoint"])
    assert root.startswith("/tmp/devctl-sim-")
    assert not Path(root).exists()  # a temporary root is removed on the way out


def test_sim_exits_with_the_command_status() -> None:
    assert run_devctl("sim", "--", "false").exit_code == 1
    missing = run_devctl("sim", "--", "no-such-command-here")
    assert missing.exit_code == 127
    assert "no-such-command-here: command not found" in missing.stderr


def test_the_command_reaches_the_node_by_devctl_root() -> None:
    """devctl inside the command finds the simulator's plugins (control sockets) and its kubelet by DEVCTL_ROOT."""
    me = f"{sys.executable} -m devctl"
    script = f"{me} plugin set-health nvidia.com/gpu GPU-0 unhealthy >/dev/null && {me} devices nvidia.com/gpu -o json"
    result = run_devctl("sim", "--", "sh", "-c", script)
    assert result.exit_code == 0, result.stderr
    devices = {d["id"]: d for d in json.loads(result.stdout)["devices"]}
    assert devices["GPU-0"]["health"] == "Unhealthy"
    assert devices["GPU-0"]["allocated_to"] == [{"namespace": "ml", "pod": "train-0", "container": "trainer"}]


def test_command_path_overrides_do_not_leak_into_the_command(short_root: Path) -> None:
    result = run_devctl(
        "sim",
        "--root",
        str(short_root),
        "--",
        "sh",
        "-c",
        'echo "${DEVCTL_PLUGINS_DIR:-unset} $DEVCTL_ROOT"',
        env={"DEVCTL_PLUGINS_DIR": "/elsewhere"},
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["unset", str(short_root)]
    assert short_root.is_dir()  # a root of the user's choosing stays


def test_restart_kubelet_from_another_shell(running_sim) -> None:
    proc, root = running_sim
    kubelet = root / "var/lib/kubelet/device-plugins/kubelet.sock"
    before = os.stat(kubelet)
    result = run_devctl("--root", str(root), "sim", "restart-kubelet")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        f"restarted the simulated kubelet at {root}; registered again: "
        "hardware-vendor.example/foo, intel.com/sriov_netdevice, nvidia.com/gpu; DRA drivers: gpu.example.com"
    )
    after = os.stat(kubelet)
    assert (after.st_ino, after.st_ctime_ns) != (before.st_ino, before.st_ctime_ns)
    assert sockets_under(root / "var/lib/kubelet/device-plugins") == SOCKETS
    # DEVCTL_ROOT addresses it just as well.
    again = run_devctl("sim", "restart-kubelet", "--no-wait", env={"DEVCTL_ROOT": str(root)})
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == f"restarted the simulated kubelet at {root}"
    assert proc.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_sim_cleanly(running_sim, sig: signal.Signals) -> None:
    proc, root = running_sim
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert sockets_under(root) == []
    assert (root / "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint").is_file()


def test_a_second_sim_on_a_running_root_is_refused(running_sim) -> None:
    _, root = running_sim
    result = run_devctl("sim", "--root", str(root), "--", "true")
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == f"devctl: sim: a simulated node already runs at {root}; stop it or choose another root"
    )


def test_restart_kubelet_without_a_sim_is_exit_3(short_root: Path) -> None:
    result = run_devctl("--root", str(short_root), "sim", "restart-kubelet")
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"devctl: no simulated node runs at {short_root}")


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("pods:\n  - name: p\n    containers: [{name: c, requests: {nvidia.com/gpu: 1}}]\n")
    result = run_devctl("sim", "--scenario", str(bad), "--", "true")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"devctl: scenario: {bad}: pods[0].containers[0].requests.nvidia.com/gpu: "
        "no resource of the scenario is named 'nvidia.com/gpu'"
    )
    nothing = run_devctl("sim", "--")
    assert nothing.exit_code == 2 and "nothing to run after --" in nothing.stderr


def test_the_command_finds_this_devctl_without_an_activated_venv() -> None:
    """`devctl sim -- devctl ls` works from `.venv/bin/devctl` with a PATH that does not hold the venv."""
    result = run_devctl("sim", "--", "sh", "-c", "devctl ls -q", env={"PATH": "/usr/bin:/bin"})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["hardware-vendor.example/foo", "intel.com/sriov_netdevice", "nvidia.com/gpu"]
