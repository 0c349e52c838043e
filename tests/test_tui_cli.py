"""`devctl demo` and `devctl tui` as a person runs them: a real process on a pseudo-terminal, keys typed in."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from devctl.lab.sim.thread import SimHandle

DEVCTL = str(Path(sys.executable).with_name("devctl"))
ANSI = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>])")


class Terminal:
    """A command on a pseudo-terminal of 100x30, as over SSH: read the screen, type keys, wait for the exit."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        # Popen, not pty.fork: this test process runs gRPC threads (the simulated node), and
        # Python code between fork and exec could wait for ever on a lock one of them held.
        self.fd, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.process = subprocess.Popen(
            [DEVCTL, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "TERM": "xterm-256color", **(env or {})},
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""
        self.status: int | None = None

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.output).decode(errors="replace")

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            with contextlib.suppress(OSError):  # the child closed the terminal
                self.output += os.read(self.fd, 65536)

    def mark(self) -> int:
        """Where the output is now: ``wait_for(..., since=mark)`` looks only at what is drawn after it."""
        return len(self.output)

    def wait_for(self, pattern: str, timeout: float = 20.0, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while pattern not in ANSI.sub(b"", self.output[since:]).decode(errors="replace"):
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(
                    f"{pattern!r} not on screen within {timeout:g}s:\n{self.text[-3000:]}\nraw: {self.output[-1500:]!r}"
                )
            self._read(0.1)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait_exit(self, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.status = self.process.returncode
                self._read(0)
                os.close(self.fd)
                return self.status
            self._read(0.1)
        self.kill()
        raise AssertionError(f"still running {timeout:g}s after it was asked to quit:\n{self.text[-2000:]}")

    def kill(self) -> None:
        if self.status is None:
            self.process.kill()
            self.status = self.process.wait()


def demo_roots(pid: int) -> list[Path]:
    """The temporary roots the demo of process ``pid`` made: another worker's demo may run meanwhile."""
    return [p for p in Path("/tmp").glob("devctl-demo-*") if owner_pid(p) == pid]


def test_demo_starts_on_a_terminal_and_q_quits_cleanly() -> None:
    term = Terminal("demo")
    term.wait_for("nvidia.com/gpu")
    term.wait_for("serving")
    roots = demo_roots(term.process.pid)
    assert len(roots) == 1, "the demo runs on a temporary root"
    term.type("3")
    term.wait_for("MISALIGNED")
    term.type("q")
    assert term.wait_exit() == 0
    assert "Traceback" not in term.text
    assert not roots[0].exists(), "the temporary root is removed on exit"


def test_tui_on_a_running_node_with_an_in_process_plugin(sim_node: SimHandle, tmp_path: Path) -> None:
    # GIVEN a simulated node, and a plugin file for a resource nobody serves yet
    config = tmp_path / "fpga.yaml"
    config.write_text("name: example.com/fpga\ndevices:\n  - {id: fpga-0, numa: 0}\n  - {id: fpga-1, numa: 1}\n")
    socket = Path(sim_node.paths.plugins_dir, "devctl-example.com-fpga.sock")
    # WHEN devctl tui serves it beside the node's own plugins
    term = Terminal("--root", str(sim_node.root), "tui", "--plugin", str(config))
    term.wait_for("example.com/fpga")
    term.wait_for("nvidia.com/gpu")
    assert socket.exists()
    # THEN the kubelet took it (its devices are allocatable), and h flips one from the keyboard
    term.type("1\x1b[H\r")  # the resources view, Home (example.com/fpga sorts first), Enter
    term.wait_for("fpga-1")
    before = term.mark()
    term.type("h")
    term.wait_for("Unhealthy", since=before)
    term.type("q")
    assert term.wait_exit() == 0
    assert not socket.exists(), "the plugin's socket is removed when the TUI quits"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEVCTL, *args], capture_output=True, text=True, timeout=60, check=False)


def test_bad_input_is_one_line_and_an_exit_code(tmp_path: Path) -> None:
    missing = run("tui", "--plugin", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("devctl: --plugin ") and len(missing.stderr.strip().splitlines()) == 1

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: not a resource name\ncount: 1\n")
    invalid = run("tui", "--plugin", str(bad))
    assert invalid.returncode == 2 and "extended resource name" in invalid.stderr

    no_snapshot = run("--from", str(tmp_path / "nope.json"), "tui")
    assert no_snapshot.returncode == 3 and len(no_snapshot.stderr.strip().splitlines()) == 1

    bad_scenario = run("demo", "--scenario", str(tmp_path / "nope.yaml"))
    assert bad_scenario.returncode == 2 and "Traceback" not in bad_scenario.stderr


def test_a_plugin_that_a_live_plugin_serves_is_refused(sim_node: SimHandle, tmp_path: Path) -> None:
    config = tmp_path / "gpu.yaml"
    config.write_text("name: nvidia.com/gpu\ncount: 1\n")
    refused = run("--root", str(sim_node.root), "tui", "--plugin", str(config))
    assert refused.returncode == 2
    assert "already served by the live plugin" in refused.stderr and "--force" in refused.stderr


def test_a_saved_snapshot_opens_without_a_node(sim_node: SimHandle, tmp_path: Path) -> None:
    saved = tmp_path / "node.json"
    assert run("--root", str(sim_node.root), "snapshot", "-f", str(saved)).returncode == 0
    term = Terminal("--from", str(saved), "tui")
    term.wait_for("snapshot node.json")
    term.wait_for("nvidia.com/gpu")
    term.type("q")
    assert term.wait_exit() == 0


@pytest.mark.parametrize(
    ("code", "allowed"),
    [
        ("import devctl.cli.tui", False),  # the command module: typer and the standard library only
        ("import devctl.tui.state, devctl.tui.feeds", False),  # the data side: no widgets, no textual
        ("import devctl.tui.app", True),
    ],
)
def test_textual_is_imported_only_by_the_app(code: str, allowed: bool) -> None:
    probe = f"{code}; import sys, json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('textual'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert bool(json.loads(out.stdout)) == allowed


@pytest.mark.parametrize("terminal_gone", [False, True])
def test_a_hang_up_ends_the_demo_restores_the_terminal_and_removes_its_root(terminal_gone: bool) -> None:
    """SIGHUP (the SSH session dropped) ends the demo as q does: terminal restored, temporary root removed."""
    term = Terminal("demo")
    term.wait_for("serving")
    term.wait_for("Resources")  # the app is up and drawing: this is the hang-up of a running TUI
    roots = demo_roots(term.process.pid)
    assert len(roots) == 1
    before = term.mark()
    if terminal_gone:
        os.close(term.fd)  # the far end of the terminal is gone: every write to it fails
        term.fd = os.open(os.devnull, os.O_RDONLY)
    term.process.send_signal(signal.SIGHUP)
    assert term.wait_exit() == 128 + signal.SIGHUP
    assert not roots[0].exists()
    if not terminal_gone:
        assert b"\x1b[?1049l" in term.output[before:], "the alternate screen is left: the terminal is restored"
        assert "Traceback" not in term.text


@pytest.mark.parametrize("moment", [b"", b"\x1b[?1049h"], ids=["first-output", "app-starting"])
def test_a_hang_up_during_start_up_still_ends_the_demo(moment: bytes) -> None:
    """A hang-up that lands while the node or the app is still starting ends the demo all the same.

    The app's exit, asked before it reads its messages, could be lost: the demo then ran on with no
    terminal. "first-output" signals as soon as anything is drawn, "app-starting" when the app has
    entered the alternate screen and may not yet read its messages.
    """
    term = Terminal("demo")
    deadline = time.monotonic() + 30
    while moment not in term.output or not term.output:
        assert time.monotonic() < deadline, f"{moment!r} never drawn:\n{term.text[-2000:]}"
        term._read(0.01)
    roots = demo_roots(term.process.pid)
    term.process.send_signal(signal.SIGHUP)
    assert term.wait_exit(timeout=20) == 128 + signal.SIGHUP
    assert all(not root.exists() for root in roots)
    assert "Traceback" not in term.text


def owner_pid(root: Path) -> int | None:
    try:
        return json.loads((root / ".devctl-owner").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_tui_plugin_and_removes_its_sockets(sim_node: SimHandle, tmp_path: Path, sig: int) -> None:
    config = tmp_path / "fpga.yaml"
    config.write_text("name: example.com/fpga\ncount: 2\n")
    socket = Path(sim_node.paths.plugins_dir, "devctl-example.com-fpga.sock")
    control = Path(sim_node.root, "run/devctl/plugins/devctl-example.com-fpga.sock.ctl")
    term = Terminal("--root", str(sim_node.root), "tui", "--plugin", str(config))
    term.wait_for("example.com/fpga")
    assert socket.exists() and control.exists()
    before = term.mark()
    term.process.send_signal(sig)
    assert term.wait_exit() == 128 + sig
    assert b"\x1b[?1049l" in term.output[before:]
    assert not socket.exists() and not control.exists()
