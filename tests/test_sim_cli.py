"""`devctl sim` as a user runs it: real processes, exit codes, output, signals, restart-kubelet from another shell."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env, run_devctl

TIMEOUT = 30.0
SOCKETS = ["foo.sock", "kubelet.sock", "nvidia-gpu-shared.sock", "nvidia-gpu.sock", "sriov-netdevice.sock"]


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
        "hardware-vendor.example/foo, intel.com/sriov_netdevice, nvidia.com/gpu, nvidia.com/gpu.shared; "
        "DRA drivers: gpu.example.com"
    )
    after = os.stat(kubelet)
    assert (after.st_ino, after.st_ctime_ns) != (before.st_ino, before.st_ctime_ns)
    assert sockets_under(root / "var/lib/kubelet/device-plugins") == SOCKETS
    # DEVCTL_ROOT addresses it just as well.
    again = run_devctl("sim", "restart-kubelet", "--no-wait", env={"DEVCTL_ROOT": str(root)})
    assert again.exit_code == 0, again.stderr
    assert again.stdout.strip() == f"restarted the simulated kubelet at {root}"
    assert proc.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_the_sim_cleanly(running_sim, sig: signal.Signals) -> None:
    """SIGHUP (a dropped SSH session) ends it as SIGTERM and Ctrl-C do: everything it made under the root is gone."""
    proc, root = running_sim
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    assert_clean(stderr)
    assert list(root.iterdir()) == []  # the root was the user's: it stays, empty, ready to be used again


def assert_clean(stderr: str) -> None:
    """Only devctl's own one-line messages: no traceback, no asyncio warning, no gRPC log line."""
    for line in stderr.splitlines():
        assert line.startswith("devctl: "), stderr


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
    assert result.stdout.split() == [
        "hardware-vendor.example/foo",
        "intel.com/sriov_netdevice",
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",  # GPU-8, time-sliced
        "gpu.example.com",  # the default node's DRA driver
    ]


def temp_roots_of(pid: int) -> list[Path]:
    """The sim temp roots whose owner record names ``pid`` (other runs on this machine have their own)."""
    found = []
    for root in Path("/tmp").glob("devctl-sim-*"):
        try:
            if json.loads((root / ".devctl-owner").read_text())["pid"] == pid:
                found.append(root)
        except (OSError, ValueError, KeyError):
            continue
    return found


def test_a_host_tree_given_as_root_is_refused_and_its_files_survive(short_root: Path) -> None:
    # GIVEN a host mount with pod logs and no kubelet dir (the case that lost a node's pod logs)
    host = short_root / "host"
    logs = host / "var/log/pods/prod_web-0_0a1b/app"
    logs.mkdir(parents=True)
    (logs / "0.log").write_text("production\n")
    (host / "var/lib/kubelet").mkdir(parents=True)
    # WHEN the sim is pointed at it with --root, or with DEVCTL_ROOT exported
    refused = run_devctl("sim", "--root", str(host), "--", "true")
    fresh = run_devctl("sim", "--", "sh", "-c", 'echo "$DEVCTL_ROOT"', env={"DEVCTL_ROOT": str(host)})
    # THEN --root is refused with one line, DEVCTL_ROOT is not taken as the root, and the logs survive
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        f"devctl: sim: {host} holds files devctl sim did not make in this run (such as {logs / '0.log'}); "
        "give a new or empty directory with --root"
    )
    assert fresh.exit_code == 0, fresh.stderr
    assert fresh.stdout.strip().startswith("/tmp/devctl-sim-")
    assert fresh.stderr.strip() == (
        f"devctl: sim: starting a fresh node; DEVCTL_ROOT={host} from the environment is not used as its root "
        "(give --root DIR for that)"
    )
    assert (logs / "0.log").read_text() == "production\n"
    assert sorted(str(p.relative_to(host)) for p in host.rglob("*")) == [
        "var",
        "var/lib",
        "var/lib/kubelet",
        "var/log",
        "var/log/pods",
        "var/log/pods/prod_web-0_0a1b",
        "var/log/pods/prod_web-0_0a1b/app",
        "var/log/pods/prod_web-0_0a1b/app/0.log",
    ]


def test_the_same_root_serves_again_and_again(short_root: Path) -> None:
    """`devctl sim --root DIR` leaves DIR as it found it, so the export line of the last run stays valid."""
    root = short_root / "node"
    for _ in range(2):
        result = run_devctl("sim", "--root", str(root), "--", "sh", "-c", "devctl ls -q")
        assert result.exit_code == 0, result.stderr
        assert result.stdout.split() == [
            "hardware-vendor.example/foo",
            "intel.com/sriov_netdevice",
            "nvidia.com/gpu",
            "nvidia.com/gpu.shared",  # GPU-8, time-sliced
            "gpu.example.com",  # the default node's DRA driver
        ]
        assert not root.exists()  # it made the directory, so it removed it


def test_a_killed_runs_temp_root_is_removed_at_the_next_start(short_root: Path) -> None:
    # GIVEN a sim killed with SIGKILL (no cleanup possible), and a devctl-sim-* dir that no devctl run recorded
    proc = subprocess.Popen(
        [*DEVCTL, "sim"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=devctl_env()
    )
    try:
        line = read_line(proc, TIMEOUT)
    finally:
        proc.kill()
        proc.communicate(timeout=TIMEOUT)
    left = Path(line.strip().removeprefix("export DEVCTL_ROOT="))
    assert left.is_dir()
    stranger = Path("/tmp") / f"devctl-sim-{short_root.name}"
    stranger.mkdir(mode=0o700)
    try:
        # WHEN the next sim starts
        result = run_devctl("sim", "--", "true")
        # THEN the killed run's root is gone, the unrecorded one stays
        assert result.exit_code == 0, result.stderr
        assert not left.exists()
        assert stranger.is_dir()
    finally:
        stranger.rmdir()


def grpc_loaded(pid: int) -> bool:
    try:
        return "cygrpc" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


# Moments of start-up, each a condition seen from outside: gRPC imported, the root laid out,
# the plugins' control sockets bound, the node ready (its export line printed).
START_UP_POINTS = {
    "grpc-imported": lambda proc, root: grpc_loaded(proc.pid),
    "root-laid-out": lambda proc, root: (root / "sys").is_dir(),
    "plugins-serving": lambda proc, root: any((root / "run/devctl/plugins").glob("*.ctl")),
    "ready": lambda proc, root: bool(read_line(proc, TIMEOUT)),
}


@pytest.mark.parametrize("point", list(START_UP_POINTS))
def test_ctrl_c_at_any_moment_of_start_up_is_one_clean_exit(short_root: Path, point: str) -> None:
    """One Ctrl-C (SIGINT to the process group, as a terminal sends it) ends the sim, whatever it was doing."""
    root = short_root / "node"
    proc = subprocess.Popen(
        [*DEVCTL, "sim", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        reached = START_UP_POINTS[point]
        while not reached(proc, root) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # 130 when it was still starting, 0 when it was already serving: either way at once, and clean
    assert proc.returncode in (0, 130), stderr
    assert_clean(stderr)
    assert not root.exists()
    assert temp_roots_of(proc.pid) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_another_user_cannot_restart_the_kubelet_whatever_the_umask(short_root: Path) -> None:
    from helpers import call_as_nobody

    from devctl.lab.sim.control import request

    root = short_root / "node"
    proc = subprocess.Popen(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", *DEVCTL, "sim", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        read_line(proc, TIMEOUT)
        kubelet = root / "var/lib/kubelet/device-plugins/kubelet.sock"
        before = os.stat(kubelet)
        ctl = root / "run/devctl/sim.ctl"
        assert oct(os.stat(ctl).st_mode & 0o777) == "0o600"
        assert oct(os.stat(ctl.parent).st_mode & 0o777) == "0o700"
        said = call_as_nobody(lambda: asyncio.run(request(str(root), {"op": "restart-kubelet"}, 5)))
        assert "permission denied" in said["error"]
        # even with every directory on the way opened up, the socket's peer check refuses uid 65534
        for path in (short_root, root, root / "run", ctl.parent, ctl):
            path.chmod(0o777)
        said = call_as_nobody(lambda: asyncio.run(request(str(root), {"op": "restart-kubelet"}, 5)))
        assert "permission denied: only uid 0 and root may use this socket" in said["error"]
        after = os.stat(kubelet)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # no restart happened
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    assert f"{ctl}: refused a connection of uid 65534" in stderr


def test_a_root_too_long_for_its_sockets_is_one_short_usage_line(short_root: Path) -> None:
    root = short_root / ("r" * 90)
    result = run_devctl("sim", "--root", str(root), "--", "true")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"devctl: sim: {root} is too long a root: its socket ")
    assert line.endswith("over the 107 of a unix socket path; choose a shorter root")
    assert line.count(str(root)) == 1
    assert not root.exists()


def test_devctls_own_grpc_silencing_is_not_passed_to_the_command() -> None:
    env = {k: v for k, v in devctl_env().items() if k != "GRPC_VERBOSITY"}  # in-process runs may have set it here
    mine = subprocess.run(
        [*DEVCTL, "sim", "--", "sh", "-c", 'echo "${GRPC_VERBOSITY:-unset}"'],
        capture_output=True, text=True, timeout=TIMEOUT, env=env,
    )  # fmt: skip
    assert (mine.returncode, mine.stdout.strip()) == (0, "unset"), mine.stderr
    theirs = run_devctl("sim", "--", "sh", "-c", 'echo "$GRPC_VERBOSITY"', env={"GRPC_VERBOSITY": "debug"})
    assert theirs.stdout.strip() == "debug"


def test_the_sim_logs_one_line_per_event_not_per_rpc(running_sim) -> None:
    """Registrations, admissions, health changes: each one line; the RPCs behind them only with -v."""
    proc, root = running_sim
    result = run_devctl("plugin", "set-health", "nvidia.com/gpu", "GPU-1", "unhealthy", root=root)
    assert result.exit_code == 0, result.stderr
    # the health change reaches the kubelet's side before the sim stops
    deadline = time.monotonic() + TIMEOUT
    while run_devctl("ls", "nvidia.com/gpu", "-o", "json", root=root).json["resources"][0]["unhealthy"] != 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    lines = stderr.splitlines()
    for rpc in (
        "GetDevicePluginOptions",
        "ListAndWatch",
        "Allocate ",
        "GetPreferredAllocation",
        "NodePrepareResources",
    ):
        assert not any(rpc in x for x in lines), rpc
    assert sum("registered nvidia.com/gpu" in x and "gpu.shared" not in x for x in lines) == 1
    assert sum("pod ml/train-0 admitted" in x for x in lines) == 1
    assert any("nvidia.com/gpu GPU-1: Healthy -> Unhealthy" in x for x in lines)


def test_a_killed_sim_takes_its_command_with_it(short_root: Path) -> None:
    """SIGKILL leaves the sim no time to stop its command: the kernel sends the command SIGTERM instead."""
    proc = subprocess.Popen(
        [*DEVCTL, "sim", "--root", str(short_root), "--", "sh", "-c", 'echo "$$"; exec sleep 60'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        child = int(read_line(proc, TIMEOUT))
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
            try:
                with open(f"/proc/{child}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break  # ended; only its reaping is left to init
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            assert not os.path.exists(f"/proc/{child}"), "the command outlived its sim"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=TIMEOUT)


def test_a_root_that_cannot_be_resolved_is_one_usage_line() -> None:
    try:
        os.path.realpath("/proc/1/root")
    except OSError:
        pass
    else:
        pytest.skip("/proc/1/root resolves here (same namespace as pid 1): nothing to refuse")
    result = run_devctl("sim", "--root", "/proc/1/root", "--", "true")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["devctl: sim: cannot use /proc/1/root as a root: Permission denied"]


def test_every_socket_the_sim_serves_is_the_owners_whatever_the_umask(short_root: Path) -> None:
    """The simulated kubelet's, runtime's, plugins' and drivers' sockets: 0600 from the first, under umask 000."""
    proc = subprocess.Popen(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", *DEVCTL, "sim", "--root", str(short_root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        assert read_line(proc, TIMEOUT).strip() == f"export DEVCTL_ROOT={short_root}"
        sockets = {
            str(p.relative_to(short_root)): stat.S_IMODE(p.stat().st_mode)
            for p in short_root.rglob("*")
            if p.is_socket()
        }
        assert {"run/containerd/containerd.sock", "var/lib/kubelet/pod-resources/kubelet.sock"} <= set(sockets)
        assert {name: mode for name, mode in sockets.items() if mode != 0o600} == {}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)


def test_a_stopped_sim_leaves_what_a_person_made_under_its_root(short_root: Path) -> None:
    """Directories and files a person makes under a running sim's root survive Ctrl-C; all the run made goes."""
    root = short_root / "root9"
    proc = subprocess.Popen(
        [*DEVCTL, "sim", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        assert read_line(proc, TIMEOUT).strip() == f"export DEVCTL_ROOT={root}"
        plugins = root / "var/lib/kubelet/device-plugins"
        (plugins / "sub").mkdir()
        (plugins / "sub/myfile").write_text("mine\n")
        (root / "emptymine").mkdir()
        (root / "proc/mine").mkdir()  # in the tree the sim rewrites on each pod change
        deleted = run_devctl("sim", "delete-pod", "ml/train-1", root=root)  # proc is rewritten
        assert deleted.exit_code == 0, deleted.stderr
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    assert_clean(stderr)
    assert (plugins / "sub/myfile").read_text() == "mine\n"
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    # Only the person's things, and the directories that lead to them.
    assert left == [
        "emptymine",
        "proc",
        "proc/mine",
        "var",
        "var/lib",
        "var/lib/kubelet",
        "var/lib/kubelet/device-plugins",
        "var/lib/kubelet/device-plugins/sub",
        "var/lib/kubelet/device-plugins/sub/myfile",
    ]


def test_the_command_under_sim_gets_no_path_override_but_the_node_s_root(monkeypatch, tmp_path) -> None:
    """A DEVCTL_CDI_DIRS (or any path variable) left in the shell would point `devctl sim -- CMD` away from
    the simulated node: every one of them is dropped, and DEVCTL_ROOT is the node's."""
    from devctl.base.path_options import PATH_OPTIONS
    from devctl.cli.sim import _command_env

    for option in PATH_OPTIONS:
        monkeypatch.setenv(option.envvar, "/elsewhere")
    env = _command_env(tmp_path)
    assert {o.envvar for o in PATH_OPTIONS} & env.keys() == {"DEVCTL_ROOT"}
    assert env["DEVCTL_ROOT"] == str(tmp_path)
