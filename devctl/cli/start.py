"""The ``devctl`` command's entry point: what needs no parsing is answered before typer is imported.

``devctl --version``, ``devctl version`` and the top-level help (``devctl``,
``--help``, ``-h``) are what a person types to see whether devctl is there and
what it does. Importing typer and the command modules costs more than the
100 ms those answers may take on a 2-core node (docs/performance.md), so they
are printed here from the standard library alone: the version from
``devctl.__version__``, the help from devctl.cli.helptext, which
scripts/gen_help.py makes from the typer app itself (a test keeps it current).
Every other command line goes to the typer app (devctl.cli.app) unchanged.
"""

from __future__ import annotations

import os
import sys

from devctl import __version__
from devctl.fast import interpreter

# The variable the shell completion scripts set (devctl.cli.completion.COMPLETE_VAR): typer must answer those.
_COMPLETE_VAR = "_DEVCTL_COMPLETE"

# click wraps help to the terminal's width, at most 80 columns (less 2): the stored text is that at 80 or wider.
HELP_COLUMNS = 80


def _columns() -> int:
    """The terminal's width as click measures it (shutil.get_terminal_size: $COLUMNS, the terminal, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (ValueError, OSError):
            columns = 0
    return columns or 80


def fast_answer(args: list[str]) -> str | None:
    """The whole output for a command line answered without typer, or None when the app must run."""
    if _COMPLETE_VAR in os.environ:
        return None
    if args in (["--version"], ["version"]):
        return f"devctl {__version__}\n"
    if args in ([], ["--help"], ["-h"]) and _columns() >= HELP_COLUMNS:
        from devctl.cli.helptext import TOP_HELP

        return TOP_HELP
    return None


def main() -> None:
    interpreter.guard_start_up()
    answer = fast_answer(sys.argv[1:])
    if answer is None:
        with interpreter.for_a_command():
            from devctl.cli.app import main as app_main

            app_main()
        return
    try:
        sys.stdout.write(answer)
        sys.stdout.flush()
    except BrokenPipeError:
        # `devctl --help | head -1`: a reader that goes away is a normal end (as in devctl.cli.app); the devnull
        # stdout keeps the interpreter's last flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
