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


def _complete(words: str, root: Path | str) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {"_DEVCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword), "DEVCTL_ROOT": str(root)}
    out = devctl(env=env)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout.split()


def test_names_are_completed_live_from_the_node(sim_node) -> None:
    root = sim_node.root
    assert _complete("devctl ls ", root) == [
        "hardware-vendor.example/foo",
        "intel.com/sriov_netdevice",
        "nvidia.com/gpu",
    ]
    assert _complete("devctl devices nv", root) == ["nvidia.com/gpu"]
    assert "GPU-7" in _complete("devctl plugin set-health nvidia.com/gpu GPU-", root)
    assert _complete("devctl pods -n ", root) == ["inference", "ml", "monitoring"]
    assert _complete("devctl get -n ml ", root) == ["train-0", "train-1"]
    assert "ml/train-0" in _complete("devctl get ", root)


def test_a_node_that_does_not_answer_completes_nothing_silently(tmp_path: Path) -> None:
    assert _complete("devctl ls ", tmp_path) == []
    assert _complete("devctl pods -n ", tmp_path) == []
