"""What a read command says on a terminal while it waits: one line after half a second, erased when done."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from helpers import DEVCTL, devctl_env

from devctl.cli.progress import DELAY, Waiting, waiting_text
from devctl.core.collect import Progress
from devctl.lab.sim.thread import SimHandle


@pytest.fixture
def hung_socket(sim_node: SimHandle) -> Iterator[str]:
    """A socket in the plugins dir that accepts connections and never answers (a plugin stuck in a lock)."""
    path = str(sim_node.root / "var/lib/kubelet/device-plugins/hung.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    try:
        yield path
    finally:
        sock.close()


def run_on_terminal(root: Path, *args: str) -> tuple[int, bytes, str]:
    """``devctl ARGS`` with stderr on a pseudo-terminal: exit code, what the terminal got, stdout."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*DEVCTL, *args], env=devctl_env(root), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=30)
    reader.join(10)
    os.close(master)
    return proc.returncode, bytes(got), out.decode()


def test_a_wait_on_a_hung_socket_is_said_on_the_terminal_then_erased(sim_node: SimHandle, hung_socket: str) -> None:
    # GIVEN a node with a hung plugin socket; WHEN `ls` waits for it (up to --timeout) on a terminal
    started = time.monotonic()
    _, terminal, out = run_on_terminal(sim_node.root, "--timeout", "2", "ls")
    assert time.monotonic() - started >= 2.0
    # THEN the terminal was told what it waits for, updated in place ...
    text = terminal.decode(errors="replace")
    assert re.search(r"devctl: waiting for [^\r]*hung\.sock[^\r]*… 1 s", text)
    assert text.count("\r\x1b[K") >= 3
    # ... and the line is gone at the end: erased after its last update, before the warning about the socket
    last = text.rindex("waiting for hung.sock")
    assert "\r\x1b[K" in text[last:]
    assert "\r\x1b[K" + "devctl: waiting" not in text[text.rindex("\r\x1b[K") :]
    assert "nvidia.com/gpu" in out


def nothing() -> NoReturn:
    raise AssertionError("the waiting line never needs the partial snapshot")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_line_comes_only_past_half_a_second_and_goes_when_nothing_is_pending() -> None:
    # GIVEN the waiting line of a command on a terminal, waiting for one socket
    stream = _Terminal()
    waiting = Waiting(stream)
    waiting.update(Progress(frozenset({"/x/hung.sock"}), nothing))
    shower = asyncio.ensure_future(waiting.run())
    try:
        # WHEN less than half a second passed, THEN nothing is written
        await asyncio.sleep(DELAY / 2)
        assert stream.getvalue() == ""
        # WHEN it waits longer, THEN the line comes
        while "waiting for hung.sock" not in stream.getvalue():  # noqa: ASYNC110 a condition on a plain buffer
            await asyncio.sleep(0.02)
        # WHEN the socket answered, THEN the line is erased
        waiting.update(Progress(frozenset(), nothing))
        while not stream.getvalue().endswith("\r\x1b[K"):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    finally:
        shower.cancel()
        waiting.clear()


def test_nothing_is_written_when_stderr_is_not_a_terminal(sim_node: SimHandle, hung_socket: str) -> None:
    done = subprocess.run(
        [*DEVCTL, "--timeout", "1.5", "ls"], env=devctl_env(sim_node.root), capture_output=True, timeout=30
    )
    assert b"waiting for" not in done.stderr and b"\x1b" not in done.stderr


def test_the_line_names_sockets_by_file_and_fits_the_terminal() -> None:
    pending = Progress(frozenset({"/x/hung.sock", "plugins", "pod-resources"}), nothing)
    assert waiting_text(pending.names(), 3.2, 80) == "devctl: waiting for hung.sock, pod-resources… 3 s"
    many = Progress(frozenset({f"/x/p{i}.sock" for i in range(5)}), nothing).names()
    assert waiting_text(many, 1, 80) == "devctl: waiting for p0.sock, p1.sock, p2.sock and 2 more… 1 s"
    assert len(waiting_text(many, 1, 30)) == 29
    assert "\x1b" not in waiting_text(["\x1b[2J.sock"], 1, 80)
