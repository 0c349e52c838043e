"""What a review of issue 15 ("Safe by construction") found still open, each as a user meets it.

Real processes against real directories: the global ``--root`` typed before
``sim`` (documented as the simulator's root, silently ignored), a user's
install, which has typer's own copy of click and no other, the one file
reader that ``plugin serve --dra --claims`` went around, and ``-w`` on a
quiet node, which never saw its reader go.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env, run_devctl
from test_files import BOUND, make

from devctl.lab.sim.thread import SimHandle

TIMEOUT = 30.0


def test_the_global_root_typed_before_sim_is_its_root_and_a_host_tree_there_is_refused(short_root: Path) -> None:
    # GIVEN a host mount holding a node's pod logs
    host = short_root / "host"
    logs = host / "var/log/pods/prod_web-0_0a1b/app"
    logs.mkdir(parents=True)
    (logs / "0.log").write_text("production\n")
    # WHEN the sim is pointed at it with the global option, before the command (kubectl's habit)
    refused = run_devctl("--root", str(host), "sim", "--", "true")
    # THEN it is refused as `sim --root` is, and the logs survive
    assert refused.exit_code == 2, refused.stderr
    assert refused.stderr.strip().startswith(f"devctl: sim: {host} holds files devctl sim did not make in this run")
    assert (logs / "0.log").read_text() == "production\n"
    # and on a new directory the node is there, not in a temp root of its own
    node = short_root / "node"
    ran = run_devctl("--root", str(node), "sim", "--", "sh", "-c", 'echo "$DEVCTL_ROOT"')
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout.strip() == str(node)


# devctl as installed by `pip install .`: typer (with its own copy of click) and no click beside it.
WITHOUT_CLICK = """
import sys
sys.modules["click"] = None  # `import click` fails, as it does where only devctl's dependencies are installed
from devctl.cli.app import main
sys.argv = ["devctl", *sys.argv[1:]]
main()
"""


def test_sim_runs_where_no_click_is_installed() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_CLICK, "sim", "--", "true"],
        capture_output=True,
        text=True,
        env=devctl_env(),
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_claims_file_that_is_not_a_file_is_one_line_not_a_hang(short_root: Path, tmp_path: Path, kind: str) -> None:
    # GIVEN `plugin serve --dra` pointed at a FIFO (open() blocked forever, SIGTERM did not end it) or /dev/zero
    path = tmp_path / "claims.yaml"
    reason = make(kind, path)
    argv = ("plugin", "serve", "--root", str(short_root), "--dra", "gpu.example.com", "--count", "1")
    result = run_devctl(*argv, "--no-register", "--claims", str(path), timeout=BOUND)
    # THEN one line through the one safe reader, exit 2, and nothing served
    assert result.exit_code == 2, result.stderr
    assert result.stderr.splitlines() == [f"devctl: --claims {path}: {reason}"]


@pytest.mark.parametrize("command", [["ls", "-w"], ["devices", "-w"], ["pods", "-w"]])
def test_a_quiet_w_ends_when_its_reader_closes_the_pipe(sim_node: SimHandle, command: list[str]) -> None:
    # GIVEN `devctl devices -w | head -1` on a node where nothing changes (it waited forever, as watch once did)
    reader, writer = os.pipe()
    proc = subprocess.Popen([*DEVCTL, *command], env=devctl_env(sim_node.root), stdout=writer, stderr=subprocess.PIPE)
    os.close(writer)
    try:
        with os.fdopen(reader, "rb") as pipe:
            assert pipe.readline().startswith(b"NAME" if command[0] == "ls" else (b"RESOURCE", b"NAMESPACE", b"POD"))
        # WHEN the reader goes away with nothing more to write
        # THEN it ends by itself, quietly, with 0
        assert proc.wait(timeout=BOUND) == 0
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stop_signal_before_the_loop_runs_ends_it_before_anything_is_made() -> None:
    """`devctl sim` Ctrl-C'd while it built its event loop: it ran its whole start-up, then exited 0, not 130."""
    import asyncio
    import signal

    from devctl.cli import signals

    saved = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    started: list[bool] = []

    async def command(stopper: signals.Stopper) -> int:
        started.append(True)  # the sim lays out its root and binds its sockets here
        await asyncio.sleep(0)
        return 0

    try:
        # GIVEN a Ctrl-C that comes while the command starts (recorded, as its handler does then)
        signals.catch_early()
        os.kill(os.getpid(), signal.SIGINT)
        # WHEN its loop runs
        code = signals.run_until_signal(command)
    finally:
        signals._early.clear()
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    # THEN it ends with 130 and the command never began
    assert code == 130
    assert started == []
