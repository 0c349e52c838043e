"""`devctl plugin serve` is safe to run as root on a production node: real processes, sockets and files.

It serves only inside the plugins dir, removes only sockets it bound, lets no
other user drive it, refuses sizes that would blow up, ends on a hang-up, and
says a failure in one line of its own (no gRPC log lines).
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import DEVCTL, call_as_nobody, devctl_env, run_devctl

from devctl.lab.plugin.control import ControlError, control

RESOURCE = "example.com/gpu"
TIMEOUT = 30.0


def wait_for(condition, proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.02)


@pytest.fixture
def serving(short_root: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`devctl plugin serve --no-register` started under umask 000, ready once its control socket exists."""
    ctl = short_root / "run/devctl/plugins/devctl-example.com-gpu.sock.ctl"
    proc = subprocess.Popen(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", *DEVCTL, "--root", str(short_root), "plugin", "serve",
         "--resource", RESOURCE, "--count", "2", "--no-register"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=devctl_env(),
    )  # fmt: skip
    try:
        wait_for(ctl.exists, proc)
        yield proc, ctl
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)


def serve(root: Path, *args: str) -> tuple[int, str]:
    result = run_devctl("--root", str(root), "plugin", "serve", "--resource", RESOURCE, "--no-register", *args)
    return result.exit_code, result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_another_user_cannot_drive_the_plugin_whatever_the_umask(serving, short_root: Path) -> None:
    proc, ctl = serving
    ctl_dir = str(ctl.parent)
    assert stat.S_IMODE(os.stat(ctl).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ctl_dir).st_mode) == 0o700
    requests = [
        {"op": "set-health", "id": "gpu-0", "health": "Unhealthy"},
        {"op": "add", "id": "gpu-9", "numa": [0]},
        {"op": "remove", "id": "gpu-1"},
    ]

    def attempt(request: dict) -> object:
        return asyncio.run(control(ctl_dir, RESOURCE, request, 5))

    for request in requests:
        said = call_as_nobody(lambda request=request: attempt(request))
        assert said["error"].startswith(f"{ControlError.__name__}: {ctl_dir}: permission denied"), said
    # even with every directory opened up, the peer check refuses uid 65534
    for path in (short_root, short_root / "run", short_root / "run/devctl", Path(ctl_dir), ctl):
        path.chmod(0o777)
    for request in requests:
        said = call_as_nobody(lambda request=request: attempt(request))
        assert said["error"].startswith(f"{ControlError.__name__}: {ctl}: permission denied"), said
    info = asyncio.run(control(ctl_dir, RESOURCE, {"op": "info"}, 5))
    assert [(d["id"], d["health"]) for d in info["devices"]] == [("gpu-0", "Healthy"), ("gpu-1", "Healthy")]
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert stderr.count("refused a connection of uid 65534") == len(requests)


def _connect(path: str) -> str:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
    return "connected"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_the_plugin_socket_is_the_owners_whatever_the_umask(serving, short_root: Path) -> None:
    # GIVEN `plugin serve` started under umask 000 on a root where it made the plugins dir itself
    plugins = short_root / "var/lib/kubelet/device-plugins"
    sock = plugins / "devctl-example.com-gpu.sock"
    # THEN the socket the kubelet dials (as root) is 0600 from the start and the dir it made 0750, not 0777
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(plugins).st_mode) == 0o750
    assert [p.name for p in plugins.iterdir()] == [sock.name]  # no temporary name left beside it
    # ... so another local user cannot call Allocate on it, even with every directory opened up
    for path in (short_root, short_root / "var", short_root / "var/lib", short_root / "var/lib/kubelet", plugins):
        path.chmod(0o777)
    said = call_as_nobody(lambda: _connect(str(sock)))
    assert said.get("error", "").startswith("PermissionError"), said


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_the_dra_driver_s_sockets_are_the_owners_whatever_the_umask(short_root: Path) -> None:
    # GIVEN `plugin serve --dra` started under umask 000
    kubelet = short_root / "var/lib/kubelet"
    dra = kubelet / "plugins/drv.example.com/dra.sock"
    registration = kubelet / "plugins_registry/drv.example.com-reg.sock"
    proc = subprocess.Popen(
        ["sh", "-c", 'umask 000 && exec "$@"', "sh", *DEVCTL, "--root", str(short_root), "plugin", "serve",
         "--dra", "drv.example.com", "--count", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=devctl_env(),
    )  # fmt: skip
    try:
        wait_for(registration.exists, proc)
        # THEN both sockets are 0600, and the directories it made 0750
        assert stat.S_IMODE(os.stat(dra).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(registration).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(dra.parent).st_mode) == 0o750
        assert stat.S_IMODE(os.stat(registration.parent).st_mode) == 0o750
        for path in (short_root, short_root / "var", short_root / "var/lib", kubelet, dra.parent, registration.parent):
            path.chmod(0o777)
        for sock in (dra, registration):
            said = call_as_nobody(lambda sock=sock: _connect(str(sock)))
            assert said.get("error", "").startswith("PermissionError"), said
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)
    # ... and both are gone once it stops
    assert not dra.exists() and not registration.exists()


@pytest.mark.parametrize("name", ["../../../x", "a/b.sock", "..", "/tmp/x.sock"])
def test_socket_is_a_plain_file_name(short_root: Path, name: str) -> None:
    # GIVEN regular files where ../../../x and its .ctl would land
    victims = [short_root / "x", short_root / "run/devctl/x.ctl", short_root / "var/lib/x"]
    for victim in victims:
        victim.parent.mkdir(parents=True, exist_ok=True)
        victim.write_text("keep me")
    code, err = serve(short_root, "--count", "1", "--socket", name)
    assert code == 2
    assert err.strip() == (
        f"devctl: --socket: socket {name!r} must be a plain file name in the plugins dir (no '/', not '.' or '..')"
    )
    assert all(v.read_text() == "keep me" for v in victims)


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_nothing_that_is_not_its_own_socket_is_removed(short_root: Path, kind: str) -> None:
    # GIVEN a regular file at the control socket's path, or a directory at the plugin socket's path
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    if kind == "file":
        taken = short_root / "run/devctl/plugins/mine.sock.ctl"
        taken.parent.mkdir(parents=True)
        taken.write_text("keep me")
        what = "a regular file"
    else:
        taken = plugins / "mine.sock"
        taken.mkdir()
        what = "a directory"
    code, err = serve(short_root, "--count", "1", "--socket", "mine.sock")
    # THEN one line saying what is in the way, the obstacle intact, and no socket of ours left behind
    assert code == 2
    assert err.strip() == f"devctl: {taken} is taken: {what} is there (devctl removes only sockets it made)" or (
        err.strip() == f"devctl: {taken} is taken: {what} is there (devctl removes only its own sockets)"
    )
    assert taken.read_text() == "keep me" if kind == "file" else taken.is_dir()
    assert [p for p in short_root.rglob("*") if p.is_socket()] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", str(10**12)], f"{RESOURCE}: 1000000000000 devices is more than the limit of 100,000 per plugin"),
        (["--device", "x@99999999999999999999"], "NUMA node 99999999999999999999 is out of range 0..1023"),
        (["--device", "x@-1"], "NUMA node -1 is out of range 0..1023"),
        (["--device", "x@0+1024"], "NUMA node 1024 is out of range 0..1023"),
    ],
)
def test_sizes_and_numa_ids_are_bounded_at_parse_time(short_root: Path, args: list[str], message: str) -> None:
    started = time.monotonic()
    code, err = serve(short_root, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert time.monotonic() - started < 10  # refused, not built
    assert not (short_root / "var").exists()


def test_a_config_file_and_a_scenario_have_the_same_bounds(short_root: Path, tmp_path: Path) -> None:
    config = tmp_path / "plugin.yaml"
    config.write_text(f"name: {RESOURCE}\ncount: {10**12}\n")
    code, _, err = run_devctl("--root", str(short_root), "plugin", "serve", "--config", str(config))
    assert code == 2 and "more than the limit of 100,000" in err
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"resources:\n  - name: {RESOURCE}\n    devices: [{{id: a, numa: 5000}}]\n")
    result = run_devctl("sim", "--scenario", str(scenario), "--", "true")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"devctl: scenario: {scenario}: resources[0]: {RESOURCE}: device 'a': NUMA node 5000 is out of range 0..1023"
    )
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("numa_nodes:\n  - {id: 4096, cpus: 0-1}\n")
    result = run_devctl("sim", "--scenario", str(nodes), "--", "true")
    assert result.exit_code == 2 and "numa_nodes[0].id: NUMA node 4096 is out of range 0..1023" in result.stderr


def test_add_refuses_a_numa_node_the_host_does_not_have(sim_node) -> None:
    result = run_devctl("--root", str(sim_node.root), "plugin", "add", "nvidia.com/gpu", "GPU-9@7")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"devctl: NUMA node 7 does not exist on this host (its nodes: 0, 1; read from {sim_node.root}/sys)"
    )
    assert run_devctl("--root", str(sim_node.root), "plugin", "add", "nvidia.com/gpu", "GPU-9@1").exit_code == 0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_hang_up_ends_it_as_sigterm_does_and_it_says_serving_once(serving, short_root: Path, sig: int) -> None:
    proc, ctl = serving
    sock = short_root / "var/lib/kubelet/device-plugins/devctl-example.com-gpu.sock"
    assert sock.is_socket()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    assert not sock.exists() and not ctl.exists()
    [line] = [line for line in stderr.splitlines() if "serving" in line]
    assert line.count(str(sock)) == 1
    assert all(line.startswith("devctl: ") for line in stderr.splitlines()), stderr


def test_a_bind_failure_is_one_line_of_devctls_own(short_root: Path) -> None:
    """On a read-only plugins dir gRPC's bind fails: devctl says why, and gRPC's add_port.cc line stays away."""
    from namespaces import _cannot_unshare

    if (reason := _cannot_unshare()) is not None:
        pytest.skip(reason)
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    script = f'mount -t tmpfs -o ro tmpfs {plugins} && exec "$@"'
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *DEVCTL, "--root",
         str(short_root), "plugin", "serve", "--resource", RESOURCE, "--count", "1", "--no-register"],
        capture_output=True, text=True, timeout=TIMEOUT, env=devctl_env(),
    )  # fmt: skip
    sock = plugins / "devctl-example.com-gpu.sock"
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"devctl: cannot bind {sock}: {plugins} is not writable here (read-only, or another user's)"
    ]
