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
