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
import math
from collections.abc import Callable
from typing import Any

import typer

from devctl.cli.common import GlobalOptions, options, setup_logging

# gRPC takes no deadline much beyond this (1e10 s fails every call at once), and
# inf or NaN would be none at all: every RPC has a deadline.
MAX_TIMEOUT = 86400.0

# (GlobalOptions field, flags, metavar, help): the same words as the root group's help.
_PATH_OPTIONS = (
    ("root", ("--root",), "DIR", "The host's filesystem root [default: / or /host]."),
    ("kubelet_dir", ("--kubelet-dir",), "DIR", "The kubelet's --root-dir [<root>/var/lib/kubelet]."),
    ("plugins_dir", ("--plugins-dir",), "DIR", "Device plugin sockets [<root>/var/lib/kubelet/device-plugins]."),
    (
        "pod_resources",
        ("--pod-resources",),
        "PATH",
        "The pod-resources socket [<kubelet-dir>/pod-resources/kubelet.sock].",
    ),
    ("sysfs", ("--sysfs",), "DIR", "Host topology [<root>/sys]."),
    ("pod_logs", ("--pod-logs",), "DIR", "Per-pod log dirs [<root>/var/log/pods]."),
    ("proc", ("--proc",), "DIR", "Processes, for who holds a device [<root>/proc]."),
    (
        "runtime_endpoint",
        ("--runtime-endpoint",),
        "PATH",
        "The CRI socket [the first of <root>/run/containerd/containerd.sock, <root>/run/crio/crio.sock].",
    ),
    (
        "cdi_dirs",
        ("--cdi-dirs",),
        "DIR[:DIR]",
        "CDI spec dirs, lowest priority first [<root>/etc/cdi:<root>/var/run/cdi].",
    ),
    ("from_file", ("--from",), "FILE", "Read a snapshot file instead of the live node."),
)
TIMEOUT_HELP = "Deadline of each RPC, in seconds."
VERBOSE_HELP = "Log each RPC and source to stderr."

# Marks the copies, so a command converted twice is not given them twice.
_GLOBAL = "devctl_global"


def finite(value: float | None) -> float | None:
    """A number of seconds that is one: NaN passes every range check (each comparison with it is false)."""
    if value is not None and math.isnan(value):
        raise typer.BadParameter("not a number of seconds")
    return value


def _override(field: str) -> Callable[[typer.Context, typer.CallbackParam, object], object]:
    def callback(ctx: typer.Context, param: typer.CallbackParam, value: object) -> object:
        if value is None or value is False:
            return value  # not given after the command: the root group's value stands
        if field == "timeout":
            finite(value)  # type: ignore[arg-type]
        root = ctx.find_root()
        current = root.obj if isinstance(root.obj, GlobalOptions) else options(ctx)
        changes: dict[str, Any] = {field: value}
        root.obj = dataclasses.replace(current, **changes)
        if field == "verbose" and not current.verbose:
            setup_logging(True, again=True)
        return value

    return callback


# The root group's parameters that every command takes too (their names are GlobalOptions' fields).
GLOBAL_FIELDS = (*(field for field, *_ in _PATH_OPTIONS), "timeout", "verbose")


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
VALUE_FLAGS = frozenset({*(flag for _, flags, *_ in _PATH_OPTIONS for flag in flags), "--timeout"})
