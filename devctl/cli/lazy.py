"""Only the module of the command that runs is imported and converted to click.

typer converts every registered function's signature to click parameters when
the app starts (type hints, defaults, validators), and importing every command
module costs more again: for devctl's twenty-odd commands that is most of the
start-up time of a command. So the app is built per command line: the root
group (devctl.cli.app) plus the commands of the one module that registers the
command named on it (``COMMAND_MODULES``). A command line that names none (the
root's help, a typo that wants its "did you mean", completion of a command's
name) gets every module. Only typer's public API: each module's
``register(app)`` adds its commands to an ordinary ``typer.Typer``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

import typer

from devctl.cli.globalopts import VALUE_FLAGS

# Which module under devctl.cli registers each command (tests/test_start.py checks this against what the
# modules register; `version` is the root's own).
COMMAND_MODULES = {
    **dict.fromkeys(("ls", "devices", "pods", "get", "topo", "plugins", "checkpoint", "snapshot"), "read"),
    **dict.fromkeys(("claims", "cdi"), "claims"),
    **dict.fromkeys(("tui", "demo"), "tui"),
    **dict.fromkeys(("events", "record"), "events"),
    **{name: name for name in ("doctor", "call", "watch", "plugin", "sim", "completion", "exporter", "fleet", "who")},
    "hw": "hw",
    "fit": "fit",
    "why": "why",
}
ROOT_COMMANDS = frozenset({"version"})


def command_name(args: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is neither a global option nor an option's value."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            return None
        elif arg.startswith("-") and arg != "-":
            skip = arg in VALUE_FLAGS  # `--root DIR`; `--root=DIR` is one word
        else:
            return arg
    return None


def modules_for(args: Sequence[str]) -> list[str]:
    """The modules whose commands a command line needs: the named command's, else all of them."""
    name = command_name(args)
    if name in ROOT_COMMANDS:
        return []
    if name in COMMAND_MODULES:
        return [COMMAND_MODULES[name]]
    return sorted(set(COMMAND_MODULES.values()))


def register(app: typer.Typer, modules: Iterable[str]) -> None:
    """Import each module (under devctl.cli) and let it add its commands to ``app``."""
    for module in modules:
        importlib.import_module(f"devctl.cli.{module}").register(app)


# ctx.meta key: the words after `devctl sim ... --`, the command the simulated node runs (devctl.cli.sim).
SIM_COMMAND = "devctl.lab.sim.command"


def cut_sim_command(args: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``devctl sim [OPTIONS] -- COMMAND...``: the words for click, and the command after ``--`` (None without).

    click would take the command's first word for a subcommand of ``sim``.
    """
    words = list(args)
    if command_name(words) != "sim" or "--" not in words:
        return words, None
    cut = words.index("--")
    return words[:cut], words[cut + 1 :]
