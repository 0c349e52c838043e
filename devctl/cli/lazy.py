"""A root command group that turns a command into a click command only when it is used.

typer converts every registered function's signature to click parameters when
the app starts (type hints, defaults, validators): for devctl's twenty-odd
commands that is most of the start-up time of ``devctl --help``, which needs
only each command's name and first line of help. Commands register on an
ordinary ``typer.Typer`` (``commands``); this group reads that registry and
converts just the command that runs. A subclass names the module that
registers each command (``modules``): only the module of the command that runs
is imported, the others only for a listing of every command.
"""

from __future__ import annotations

import importlib
import inspect
from typing import ClassVar

import typer
import typer.main
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

# Where the command modules register (see devctl.cli.app).
commands = typer.Typer()


def _name(entry: CommandInfo | TyperInfo) -> str:
    if isinstance(entry, CommandInfo):
        return entry.name or typer.main.get_command_name(entry.callback.__name__)
    typer_instance = entry.typer_instance
    name = entry.name if isinstance(entry.name, str) else None
    if not name and typer_instance is not None and isinstance(typer_instance.info.name, str):
        name = typer_instance.info.name
    if not name:
        raise ValueError("a command group needs a name")
    return name


def _short_help(entry: CommandInfo | TyperInfo) -> str:
    """The first line of the help typer would show: the help text, else the function's docstring."""
    # Unset TyperInfo fields hold typer's DefaultPlaceholder objects, hence the type checks.
    candidates: list[object] = [entry.help]
    if isinstance(entry, TyperInfo) and entry.typer_instance is not None:
        typer_instance = entry.typer_instance
        callback = typer_instance.registered_callback
        candidates += [typer_instance.info.help, callback.help if callback else None]
        candidates.append(callback.callback if callback else None)
    else:
        candidates.append(entry.callback)
    for candidate in candidates:
        text = candidate if isinstance(candidate, str) else inspect.getdoc(candidate) if callable(candidate) else None
        if text:
            return text.strip().split("\n")[0]
    return ""


def _entries() -> dict[str, CommandInfo | TyperInfo]:
    found: dict[str, CommandInfo | TyperInfo] = {}
    for entry in (*commands.registered_commands, *commands.registered_groups):
        found[_name(entry)] = entry
    return found


_imported: set[str] = set()


def _import(module: str) -> None:
    """Import ``module`` (under devctl.cli) and let it register its commands, once."""
    if module not in _imported:
        _imported.add(module)
        importlib.import_module(f"devctl.cli.{module}").register(commands)


class LazyGroup(TyperGroup):
    """The root group: lists commands from the registry, imports and converts one on demand."""

    # Command name -> the module under devctl.cli whose register(commands) adds it.
    modules: ClassVar[dict[str, str]] = {}

    def _import_all(self) -> None:
        for module in sorted(set(self.modules.values())):
            _import(module)

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return sorted(set(self.modules) | set(_entries()))

    def get_command(self, ctx: typer.Context, cmd_name: str):  # type: ignore[override]
        if cmd_name in self.modules:
            _import(self.modules[cmd_name])
        entry = _entries().get(cmd_name)
        if entry is None:
            return None
        if isinstance(entry, CommandInfo):
            command = typer.main.get_command_from_info(entry, pretty_exceptions_short=True, rich_markup_mode=None)
        else:
            command = typer.main.get_group_from_info(
                entry, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=None
            )
        command.name = cmd_name
        return command

    def format_commands(self, ctx: typer.Context, formatter) -> None:  # type: ignore[override]
        self._import_all()
        rows = [(name, _short_help(entry)) for name, entry in sorted(_entries().items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
