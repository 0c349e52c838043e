#!/usr/bin/env python3
"""Regenerate devctl/cli/helptext.py: ``devctl --help`` as the typer app prints it at 80 columns.

devctl.cli.start prints that text for ``devctl``, ``--help`` and ``-h`` without
importing typer. The text comes from running the app itself (never written by
hand), so run this after changing a global option or a command's first line of
help. ``--check`` fails when the committed file differs, as tests/test_start.py does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELPTEXT = ROOT / "devctl" / "cli" / "helptext.py"

# The typer app's own entry (not devctl.cli.start, which would print the stored text).
_RUN_APP = "import sys; from devctl.cli.app import main; sys.argv[0] = 'devctl'; main()"


def typer_help() -> str:
    """What the typer app prints for ``devctl --help`` at 80 columns, with no DEVCTL_* setting of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    env.update(COLUMNS="80", NO_COLOR="1", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _RUN_APP, "--help"], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    return out.stdout


def module_text(help_text: str) -> str:
    """A Python module holding ``help_text`` as TOP_HELP, one source line per line of help (diffs read as text)."""
    lines = "".join(f"    {line!r}\n" for line in help_text.splitlines(keepends=True))
    return (
        '"""``devctl --help`` at 80 columns, for devctl.cli.start; made by scripts/gen_help.py, do not edit."""\n'
        "\n"
        f"TOP_HELP = (\n{lines})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if devctl/cli/helptext.py is stale")
    wanted = module_text(typer_help())
    if parser.parse_args().check:
        if not HELPTEXT.exists() or HELPTEXT.read_text() != wanted:
            sys.exit(f"{HELPTEXT.relative_to(ROOT)} is stale: run python scripts/gen_help.py")
        return
    HELPTEXT.write_text(wanted)


if __name__ == "__main__":
    main()
