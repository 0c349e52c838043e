"""The global options after the command too: ``devctl ls --root /host`` as well as ``devctl --root /host ls``.

click parses options per command, so an option of the root group is unknown
after the command's name. kubectl users put flags anywhere; this module adds a
copy of each global option to every command (and every subcommand of a group)
of the click command typer made (``typer.main.get_command``): a copy of the
root group's own option object, so it shows and checks what the root's does
(metavar, help, the range of ``--timeout``). A copy given on the command line
replaces what the root group read (its value, its environment variable, its
default); one not given changes nothing. A command that has an option of the
same name (``devctl sim --root DIR``) keeps its own.

Only typer's public API and click's public attributes of the objects typer
hands out (a command's ``params``, ``epilog``, ``commands``; a parameter's
``callback``, ``default``, ``envvar``, ``expose_value``): no class of typer's
private click copy. Only typer and the standard library are imported: this is
on the start-up path.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Optional

import typer

from devctl.base.path_options import PATH_NAMES, PATH_OPTIONS
from devctl.cli.common import GlobalOptions, options, setup_logging

# gRPC takes no deadline much beyond this (1e10 s fails every call at once), and
# inf or NaN would be none at all: every RPC has a deadline.
MAX_TIMEOUT = 86400.0

TIMEOUT_HELP = "Deadline of each RPC, in seconds."
VERBOSE_HELP = "Log each RPC and source to stderr."

# Marks the copies, so a command converted twice is not given them twice.
_GLOBAL = "devctl_global"


def finite(value: float | None) -> float | None:
    """A number of seconds that is one: NaN passes every range check (each comparison with it is false)."""
    if value is not None and math.isnan(value):
        raise typer.BadParameter("not a number of seconds")
    return value


def with_path_options(callback: Callable[..., None]) -> Callable[..., None]:
    """``callback`` (the root group's) taking the node-path options as well, into its ``**given``.

    typer makes a command's options from its callback's signature, and Python's ``inspect.signature``
    reads a function's ``__signature__`` first: the signature is given one parameter per row of
    devctl.base.path_options, in its order after the context, so the table is their one declaration.
    """
    signature = inspect.signature(callback, eval_str=True)
    first, *rest = (p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD)
    made = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=None,
            annotation=Annotated[
                Optional[str],  # noqa: UP045 (a runtime type for typer, not an annotation)
                typer.Option(option.flag, envvar=option.envvar, metavar=option.metavar, help=option.help),
            ],
        )
        for option in PATH_OPTIONS
    ]
    callback.__signature__ = signature.replace(parameters=[first, *made, *rest])  # type: ignore[attr-defined]
    return callback


def given_paths(values: Mapping[str, object]) -> dict[str, str]:
    """The node paths among a command's parameter values, by name: those given (typed or from a variable)."""
    return {name: value for name, value in values.items() if name in PATH_NAMES and isinstance(value, str) and value}


def _override(field: str) -> Callable[[typer.Context, typer.CallbackParam, object], object]:
    def callback(ctx: typer.Context, param: typer.CallbackParam, value: object) -> object:
        if value is None or value is False:
            return value  # not given after the command: the root group's value stands
        if field == "timeout":
            finite(value)  # type: ignore[arg-type]
        root = ctx.find_root()
        current = root.obj if isinstance(root.obj, GlobalOptions) else options(ctx)
        changes: dict[str, Any] = {field: value}
        if field in PATH_NAMES:
            changes = {"given": {**current.given, field: value}}
        root.obj = dataclasses.replace(current, **changes)
        if field == "verbose" and not current.verbose:
            setup_logging(True, again=True)
        return value

    return callback


# The root group's parameters that every command takes too (their names are GlobalOptions' fields).
GLOBAL_FIELDS = (*(option.name for option in PATH_OPTIONS), "from_file", "timeout", "verbose")


def _flags(param: Any) -> set[str]:
    return {*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())}


def _copies(root_params: list[Any], taken: set[str]) -> list[Any]:
    """The root group's global options as a command's own, leaving out any name the command already has."""
    made: list[Any] = []
    for param in root_params:
        if param.name not in GLOBAL_FIELDS or taken & _flags(param):
            continue
        own = copy.copy(param)
        own.callback = _override(param.name)
        own.expose_value = False
        own.envvar = None  # the root read the environment; a copy only counts when typed after the command
        own.default = False if param.name == "verbose" else None
        own.required = False
        setattr(own, _GLOBAL, True)
        made.append(own)
    return made


def attach(command: Any, path: str, root_params: list[Any]) -> Any:
    """Give ``command`` (and, for a group, each of its commands) the global options it lacks.

    ``root_params`` are the root group's parameters, whose global options are copied.
    ``path`` is the command as typed after ``devctl`` (``plugin add``): its examples
    (devctl.cli.examples) end its help. A group's commands also get their whole
    first paragraph of help as the line of its listing.
    """
    from devctl.cli.examples import epilog

    command.epilog = command.epilog or epilog(path)
    subcommands = getattr(command, "commands", None)
    if isinstance(subcommands, dict):  # a group
        for name, sub in subcommands.items():
            if not sub.short_help and sub.help:
                # The group's listing shows the whole first paragraph, as `devctl --help` does, not 45 characters.
                sub.short_help = " ".join(sub.help.strip().split("\n\n")[0].split())
            attach(sub, f"{path} {name}", root_params)
        return command
    if any(getattr(p, _GLOBAL, False) for p in command.params):
        return command
    taken = {flag for p in command.params for flag in _flags(p)}
    command.params.extend(_copies(root_params, taken))
    return command


# The global options that take a value (the rest are flags): how devctl.cli.lazy finds the command's name.
VALUE_FLAGS = frozenset({*(option.flag for option in PATH_OPTIONS), "--from", "--timeout"})
