"""The global options after the command too: ``devctl ls --root /host`` as well as ``devctl --root /host ls``.

click parses options per command, so an option of the root group is unknown
after the command's name. kubectl users put flags anywhere; this module adds a
copy of each global option to every command (and every subcommand of a group)
when the lazy group converts it. A copy given on the command line replaces
what the root group read (its value, its environment variable, its default);
one not given changes nothing. A command that has an option of the same name
(``devctl sim --root DIR``) keeps its own.

Only typer and the standard library are imported: this is on the start-up path.
"""

from __future__ import annotations

import dataclasses
import math

import typer

# typer carries its own copy of click; the parameters of its commands are these.
from typer._click.core import Command, Context, Parameter
from typer._click.types import FloatRange
from typer.core import TyperGroup, TyperOption

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


def _override(field: str):
    def callback(ctx: Context, param: Parameter, value: object) -> object:
        if value is None or value is False:
            return value  # not given after the command: the root group's value stands
        if field == "timeout":
            finite(value)  # type: ignore[arg-type]
        root = ctx.find_root()
        current = root.obj if isinstance(root.obj, GlobalOptions) else options(ctx)
        root.obj = dataclasses.replace(current, **{field: value})
        if field == "verbose" and not current.verbose:
            setup_logging(True, again=True)
        return value

    return callback


def _copies(taken: set[str]) -> list[TyperOption]:
    """The global options as a command's own, leaving out any name the command already has."""
    made: list[TyperOption] = []
    for field, flags, metavar, help_text in _PATH_OPTIONS:
        if not taken & set(flags):
            made.append(
                TyperOption(
                    param_decls=list(flags),
                    metavar=metavar,
                    help=help_text,
                    expose_value=False,
                    callback=_override(field),
                )
            )
    if "--timeout" not in taken:
        made.append(
            TyperOption(
                param_decls=["--timeout"],
                type=FloatRange(min=0.01, max=MAX_TIMEOUT),
                metavar="SECONDS",
                help=TIMEOUT_HELP,
                expose_value=False,
                callback=_override("timeout"),
            )
        )
    if not taken & {"--verbose", "-v"}:
        made.append(
            TyperOption(
                param_decls=["--verbose", "-v"],
                is_flag=True,
                default=False,
                help=VERBOSE_HELP,
                expose_value=False,
                callback=_override("verbose"),
            )
        )
    for option in made:
        setattr(option, _GLOBAL, True)
    return made


def attach(command: Command, path: str) -> Command:
    """Give ``command`` (and, for a group, each of its commands) the global options it lacks.

    ``path`` is the command as typed after ``devctl`` (``plugin add``): its examples
    (devctl.cli.examples) end its help. A group's commands also get their whole
    first paragraph of help as the line of its listing.
    """
    from devctl.cli.examples import epilog

    command.epilog = command.epilog or epilog(path)
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            if not sub.short_help and sub.help:
                # The group's listing shows the whole first paragraph, as `devctl --help` does, not 45 characters.
                sub.short_help = " ".join(sub.help.strip().split("\n\n")[0].split())
            attach(sub, f"{path} {name}")
        return command
    if any(getattr(p, _GLOBAL, False) for p in command.params):
        return command
    taken = {flag for p in command.params for flag in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
    command.params.extend(_copies(taken))
    return command
