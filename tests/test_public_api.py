"""devctl uses typer and click through their public API only (issue 30 item 5).

typer 0.26 carries its own copy of click as ``typer._click``; its classes
(``TyperGroup``, ``TyperOption``, ``CommandInfo``), its converters
(``typer.main.get_command_from_info``) and its completion classes change
without notice between releases, and pinned typer below the release that
changed them. Public means what typer documents (``typer.Typer``,
``typer.Option``, ``typer.Context``, ``typer.Exit``, ``typer.main.get_command``)
and click's methods and attributes on the objects typer hands out.
"""

from __future__ import annotations

import re
from pathlib import Path

DEVCTL = Path(__file__).resolve().parent.parent / "devctl"

# A private module or name of typer or click, as imported or used in a line of source.
PRIVATE = re.compile(
    r"\b(?:typer|click)\._\w*"  # typer._click, typer._completion_classes, click._compat, ...
    r"|\btyper\.(?:core|models)\b"  # TyperGroup, TyperOption, CommandInfo, TyperInfo
    r"|\btyper\.main\.(?!get_command\b)\w+"  # get_command_from_info, get_group_from_info, get_command_name
    r"|^\s*(?:import|from)\s+click\b"  # click itself: a user's install has only typer's copy
)


def private_uses(root: Path = DEVCTL) -> list[str]:
    """Each line of devctl's source that reaches into typer's or click's private API, as path:line: text."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_devctl_uses_no_private_api_of_typer_or_click() -> None:
    assert private_uses() == []


def test_the_check_finds_each_kind_of_private_use(tmp_path: Path) -> None:
    # The grep itself: each way devctl once reached in is found, the public ways are not.
    (tmp_path / "pkg").mkdir()
    source = tmp_path / "pkg" / "m.py"
    private = [
        "from typer._click.core import ParameterSource",
        "from typer._completion_classes import BashComplete",
        "from typer.core import TyperGroup",
        "from typer.models import CommandInfo",
        "    command = typer.main.get_command_from_info(entry)",
        "import click",
    ]
    public = [
        "import typer",
        "import typer.main",
        "    cli = typer.main.get_command(app)",
        "def f(ctx: typer.Context) -> None: ...",
        "    # click parses options per command",
    ]
    source.write_text("\n".join(private + public) + "\n")
    assert [use.split(": ", 1)[1] for use in private_uses(tmp_path / "pkg")] == [p.strip() for p in private]
