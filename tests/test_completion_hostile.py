"""Shell completion against hostile device IDs: a real shell on a pseudo-terminal presses Tab, then Enter.

The checkpoint of a node root holds device IDs that are shell code, glob
patterns, quotes, terminal escapes and bidi overrides. Each shell (bash, zsh,
fish: each skipped, saying why, when it is not installed) sources the shipped
script, completes ``devctl plugin set-health evil.example/dev pN`` with Tab and
runs the line with Enter, ``devctl`` there being a shell function that only
prints its arguments (the completion itself calls the real devctl through
PATH). The test checks what a person would: the arguments the command got, no
file the IDs' code would create, and no escape sequence of theirs reaching the
terminal.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from devctl.node.checkpoint import write_checkpoint

COMPLETIONS = Path(__file__).resolve().parent.parent / "completions"
RESOURCE = "evil.example/dev"

# typed prefix -> the device ID (None: not offered, the line stays as typed)
HOSTILE = {
    "p1": "p1-x;touch PWNED1",
    "p2": "p2-$(touch PWNED2)",
    "p3": "p3-a'b",
    "p4": "p4-`touch PWNED4`",
    "p5": "p5-\x1b]0;x\x07",
    "p6": "p6-a b *",
    "p7": "p7-x\\",
    "p8": "p8-\u202eevil",
    "p9": 'p9-"; touch PWNED9; "',
}
REFUSED = {"p5", "p8"}
EXPECTED = {prefix: prefix if prefix in REFUSED else value for prefix, value in HOSTILE.items()}

# What each shell is told before the first Tab: the script, and `devctl` as a function printing its arguments.
SETUP = {
    "bash": (
        ["bash", "--norc", "--noprofile", "-i"],
        "source {script}; devctl() {{ printf '%s%s' AR GV; printf '[%s]' \"$@\"; printf '\\n'; }}; PS1='$ '\n",
    ),
    "zsh": (
        ["zsh", "-f", "-i"],
        "autoload -Uz compinit; compinit -u -D; source {script};"
        " devctl() {{ printf '%s%s' AR GV; printf '[%s]' \"$@\"; printf '\\n'; }}; PROMPT='$ '\n",
    ),
    "fish": (
        ["fish", "--no-config", "-i"],
        "source {script}; function devctl; printf '%s%s' AR GV; printf '[%s]' $argv; printf '\\n'; end\n",
    ),
}
ARGV = re.compile(rb"ARGV((?:\[[^\]\r\n]*\])*)\r?\n")


def _evil_root(root: Path) -> None:
    plugins = root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    write_checkpoint(str(plugins / "kubelet_internal_checkpoint"), [], {RESOURCE: list(HOSTILE.values())})


def _bin(path: Path) -> Path:
    path.mkdir()
    devctl = path / "devctl"
    devctl.write_text(f'#!/bin/sh\nexec {sys.executable} -m devctl "$@"\n')
    devctl.chmod(0o755)
    return path


class Terminal:
    """A shell on a pseudo-terminal: keys written, everything it shows kept."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        import pty

        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)

        def controlling_terminal() -> None:  # a session of its own, the pseudo-terminal its controlling one (fish)
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, preexec_fn=controlling_terminal
        )
        os.close(slave)
        self.shown = b""

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def until(self, pattern: re.Pattern[bytes], start: int, timeout: float = 30.0) -> re.Match[bytes] | None:
        """The first match of ``pattern`` in what was shown from ``start`` on, None if none within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            found = pattern.search(self.shown, start)
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    self.shown += os.read(self.master, 65536)
                except BlockingIOError:
                    pass
                except OSError:  # the shell is gone (EIO)
                    return None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self.master)


def _args(match: re.Match[bytes]) -> list[str]:
    return re.findall(r"\[([^\]]*)\]", match.group(1).decode())


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_tab_then_enter_never_runs_nor_prints_a_hostile_device_id(shell: str, tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (apt-get install -y {shell})")
    # GIVEN a node whose checkpoint registers device IDs that are shell code and terminal escapes
    root = tmp_path / "root"
    _evil_root(root)
    work = tmp_path / "cwd"
    work.mkdir()
    bindir = _bin(tmp_path / "bin")
    env = {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TERM": "xterm",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "DEVCTL_ROOT": str(root),
        "DEVCTL_COMPLETE_TIMEOUT": "20",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    argv, setup = SETUP[shell]
    term = Terminal(argv, work, env)
    try:
        term.type(setup.format(script=COMPLETIONS / f"devctl.{shell}"))
        term.type("devctl ready\n")
        ready = term.until(ARGV, 0)
        assert ready is not None, f"{shell} did not start; it showed {term.shown[-2000:]!r}"
        start = ready.end()
        # WHEN each ID is completed from its prefix with Tab and the line is run with Enter
        got: dict[str, list[str] | None] = {}
        for prefix in HOSTILE:
            term.type(f"devctl plugin set-health {RESOURCE} {prefix}\t\n")
            found = term.until(ARGV, start)
            if found is None:  # the shell waits for more (a quote left open), or ended
                got[prefix] = None
                break
            start = found.end()
            got[prefix] = _args(found)
    finally:
        term.close()
    # THEN each ID reached the command as the one word it is, or (controls, bidi) was not offered at all
    for prefix, expected in EXPECTED.items():
        assert got.get(prefix) == ["plugin", "set-health", RESOURCE, expected], prefix
    # and nothing an ID holds ran, nor reached the terminal
    assert sorted(p.name for p in tmp_path.rglob("PWNED*")) == []
    assert b"]0;x" not in term.shown and "\u202e".encode() not in term.shown


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_call_back_prints_no_control_byte(shell: str, tmp_path: Path) -> None:
    # What devctl answers each shell's script (no shell needed): the printable IDs, never a control or bidi mark.
    _evil_root(tmp_path)
    line = f"devctl plugin set-health {RESOURCE} p"
    env = {
        **os.environ,
        "DEVCTL_ROOT": str(tmp_path),
        "DEVCTL_COMPLETE_TIMEOUT": "20",
        "_DEVCTL_COMPLETE": f"complete_{shell}",
    }
    env |= {"COMP_WORDS": line, "COMP_CWORD": "4"} if shell == "bash" else {"_TYPER_COMPLETE_ARGS": line}
    env |= {"_TYPER_COMPLETE_FISH_ACTION": "get-args"} if shell == "fish" else {}
    out = subprocess.run([sys.executable, "-m", "devctl"], capture_output=True, text=True, timeout=60, env=env)
    assert (out.returncode, out.stderr) == (0, "")
    lines = out.stdout.splitlines()
    assert len(lines) == len(HOSTILE) - len(REFUSED)
    assert all(line.isprintable() for line in lines), lines
    if shell == "bash":  # pre-quoted: bash inserts COMPREPLY as it is
        assert "p1-x\\;touch\\ PWNED1" in lines and "p3-a\\'b" in lines
    else:  # raw: compadd and fish quote what they insert
        assert "p1-x;touch PWNED1" in lines and "p3-a'b" in lines
