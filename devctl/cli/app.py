"""The ``devctl`` command: global options, then one module per command group.

The app is built for each command line (devctl.cli.lazy): the root group here,
and the commands of the module that registers the command that runs. ``run``
adds what devctl promises on top of the click command typer makes
(``typer.main.get_command``), through click's public methods and attributes
only: the global options after the command too (devctl.cli.globalopts), each
command's examples, ``devctl`` alone is the help, a usage error escaped, a
reader that goes away a normal end. ``app`` is the whole typer app, for
embedding and in-process tests.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import typer
import typer.main

from devctl import __version__
from devctl.base.escape import escape
from devctl.cli import completion, globalopts, grpclog, lazy
from devctl.cli.common import ExitCode, GlobalOptions, begin_invocation, escape_unencodable, setup_logging
from devctl.cli.globalopts import MAX_TIMEOUT, TIMEOUT_HELP, VERBOSE_HELP
from devctl.cli.lazy import COMMAND_MODULES
from devctl.fast import interpreter

__all__ = ["COMMAND_MODULES", "ONE_ANSWER", "build", "main", "run"]

# The read commands that answer once and exit, run with the garbage collector paused (output.one_answer); those
# with -w (ls, devices, pods, claims) pause it for each answer themselves (output.rewatch).
ONE_ANSWER = frozenset({"get", "topo", "plugins", "checkpoint", "snapshot", "doctor", "cdi", "who"})


def _version(value: bool) -> None:
    if value:
        print(f"devctl {__version__}")
        raise typer.Exit(int(ExitCode.OK))


@globalopts.with_path_options  # --root, --kubelet-dir, ... (devctl.base.path_options) into **given
def main_options(
    ctx: typer.Context,
    timeout: Annotated[
        float,
        typer.Option(
            envvar="DEVCTL_TIMEOUT",
            min=0.01,
            max=MAX_TIMEOUT,
            callback=globalopts.finite,
            metavar="SECONDS",
            help=TIMEOUT_HELP,
        ),
    ] = 5.0,
    from_file: Annotated[
        str | None, typer.Option("--from", metavar="FILE", help="Read a snapshot file instead of the live node.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    **given: str | None,
) -> None:
    begin_invocation(ctx)
    setup_logging(verbose)
    grpclog.quiet()  # before any command imports grpc
    ctx.obj = GlobalOptions(given=globalopts.given_paths(given), timeout=timeout, from_file=from_file, verbose=verbose)


def version_command() -> None:
    """Print the version (as --version does)."""
    print(f"devctl {__version__}")


def _root() -> typer.Typer:
    root = typer.Typer(
        name="devctl",
        help="Inspect Kubernetes device plugins, pod resources and NUMA topology on this node.",
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    root.callback()(main_options)
    root.command("version")(version_command)
    return root


def build(modules: Iterable[str]) -> typer.Typer:
    """The typer app with the root group and the commands of ``modules`` (under devctl.cli)."""
    app = _root()
    lazy.register(app, modules)
    return app


def command(app: typer.Typer) -> Any:
    """The click command typer makes of ``app``, with devctl's additions (see the module's docstring)."""
    from devctl.cli.output import one_answer

    cli: Any = typer.main.get_command(app)
    commands = cli.commands
    listed = sorted(commands.items())  # the root's listing in name order, as `devctl --help` shows it
    commands.clear()
    commands.update(listed)
    for name, sub in listed:
        if not sub.short_help and sub.help:
            sub.short_help = sub.help.strip().split("\n")[0]  # the whole first line, not 45 characters
        if name in ONE_ANSWER and sub.callback is not None:
            sub.callback = one_answer(sub.callback)
        globalopts.attach(sub, name, cli.params)
    return cli


def for_args(args: Sequence[str]) -> Any:
    """The click command for a command line: only the module of the command it names is imported."""
    return command(build(lazy.modules_for(args)))


def _usage_error(error: Exception) -> bool:
    """Whether ``error`` is one of click's (a usage error, a bad parameter), known by what click documents of
    a ``ClickException`` (``message``, ``exit_code``, ``show``): its class is no part of typer's public API."""
    return (
        isinstance(getattr(error, "message", None), str)
        and isinstance(getattr(error, "exit_code", None), int)
        and callable(getattr(error, "show", None))
    )


def run(argv: Sequence[str]) -> int:
    """Run one command line (the words after ``devctl``) as the ``devctl`` command; its exit code."""
    args, sim_command = lazy.cut_sim_command(argv)
    cli = for_args(args)
    try:
        # `devctl` alone: the help on stdout, exit 0 (click's no_args_is_help exits 2 on stderr).
        with cli.make_context("devctl", args or ["--help"]) as ctx:
            if sim_command is not None:
                ctx.meta[lazy.SIM_COMMAND] = sim_command
            cli.invoke(ctx)
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        return 1
    except EOFError:
        print("\nAborted!", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `devctl devices | head`: click would exit 1, which devctl's contract reserves for findings. Stop
        # quietly with 0; the devnull stdout keeps the interpreter's last flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)
    except Exception as e:
        if not _usage_error(e):
            raise
        error: Any = e
        # click echoes what was typed raw in a usage error ("No such option: ..."): escape a message that needs
        # it. Its messages that quote a value already use repr; those are left as they are.
        if not error.message.isprintable():
            error.message = escape(error.message)
        error.show()
        return int(error.exit_code)
    return int(ExitCode.OK)


_whole: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    """``app``: the typer app with every command (``from devctl.cli.app import app``), built on first use."""
    global _whole
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _whole is None:
        _whole = build(sorted(set(COMMAND_MODULES.values())))
    return _whole


def main() -> None:
    interpreter.release_interrupt()  # the imports are done: Ctrl-C is KeyboardInterrupt again
    escape_unencodable()
    try:
        if completion.COMPLETE_VAR in os.environ:
            sys.exit(completion.respond(for_args))
        sys.exit(run(sys.argv[1:]))
    except KeyboardInterrupt:
        # Ctrl-C before a command installs its own handling (e.g. while importing): no traceback.
        sys.exit(130)
