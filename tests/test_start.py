"""The entry point answers --version, version and the top-level help without typer, and says what typer would.

The help text devctl.cli.start prints is generated from the typer app (scripts/gen_help.py); these tests
regenerate it and compare, so a changed option or command summary cannot leave the fast answer stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devctl import __version__
from devctl.cli.helptext import TOP_HELP

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_help  # noqa: E402

# The typer app's own entry point, beside `python -m devctl` (devctl.cli.start).
APP = "import sys; from devctl.cli.app import main; sys.argv[0] = 'devctl'; main()"


def run(argv: list[str], columns: str = "80", **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**clean, "COLUMNS": columns, "NO_COLOR": "1", **env}
    )


def test_the_stored_help_is_what_the_typer_app_prints_now():
    assert gen_help.typer_help() == TOP_HELP, "devctl/cli/helptext.py is stale: run python scripts/gen_help.py"
    assert (ROOT / "devctl" / "cli" / "helptext.py").read_text() == gen_help.module_text(TOP_HELP)


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"], ["--version"], ["version"]])
@pytest.mark.parametrize("columns", ["80", "200", "60"])
def test_the_fast_answers_are_the_apps_own(args, columns):
    fast = run([sys.executable, "-m", "devctl", *args], columns)
    typer_app = run([sys.executable, "-c", APP, *args], columns)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer_app.returncode, typer_app.stdout, typer_app.stderr)
    assert fast.returncode == 0
    if args == ["--version"]:
        assert fast.stdout == f"devctl {__version__}\n"


def test_help_of_a_command_and_usage_errors_still_come_from_typer():
    assert "Usage: devctl ls" in run([sys.executable, "-m", "devctl", "ls", "--help"]).stdout
    wrong = run([sys.executable, "-m", "devctl", "--version", "extra"])
    assert (wrong.returncode, wrong.stdout) == (0, f"devctl {__version__}\n")  # click's eager --version, as before
    bad = run([sys.executable, "-m", "devctl", "--nope"])
    assert bad.returncode == 2 and "No such option" in bad.stderr


def test_a_reader_that_goes_away_ends_the_help_quietly():
    # `devctl --help | head -1`: the pipe closes before the help is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "devctl", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(60) == 0
    assert err == b""


def test_each_command_is_registered_by_the_module_the_app_names():
    # The app imports only the module of the command that runs: its table must name every command's module.
    probe = (
        "import json\n"
        "from devctl.cli.app import COMMAND_MODULES, build, command\n"
        "def names(modules):\n"
        "    return set(command(build(modules)).commands)\n"
        "bare = names([])\n"
        "added = {'app': sorted(bare)}\n"
        "for module in sorted(set(COMMAND_MODULES.values())):\n"
        "    added[module] = sorted(names([module]) - bare)\n"
        "print(json.dumps([COMMAND_MODULES, added]))\n"
    )
    out = run([sys.executable, "-c", probe])
    table, added = json.loads(out.stdout)
    assert added.pop("app") == ["version"]
    assert added == {m: sorted(n for n, owner in table.items() if owner == m) for m in set(table.values())}
