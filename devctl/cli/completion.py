"""`devctl completion bash|zsh|fish`: print the shell completion script (also shipped in completions/)."""

from __future__ import annotations

import os
from enum import Enum

import typer

# The shell scripts call devctl back with this variable set; typer then completes.
COMPLETE_VAR = "_DEVCTL_COMPLETE"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def enable_runtime_completion() -> None:
    """Answer a completion request from the shell scripts (typer only does this when it adds its own options)."""
    if COMPLETE_VAR in os.environ:
        from typer.completion import completion_init

        completion_init()


def completion(shell: Shell = typer.Argument(..., help="The shell to print the script for.")) -> None:
    """Print the completion script, e.g. `devctl completion bash > /etc/bash_completion.d/devctl`."""
    from typer.completion import get_completion_script

    print(get_completion_script(prog_name="devctl", complete_var=COMPLETE_VAR, shell=shell.value).rstrip("\n"))


def register(app: typer.Typer) -> None:
    app.command("completion")(completion)
