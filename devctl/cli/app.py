"""The ``devctl`` command: global options, then one module per command group."""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated

import typer

# typer carries its own copy of click (typer._click); its usage errors are these.
from typer._click.exceptions import ClickException

from devctl import __version__, quiet_interrupt
from devctl.cli import completion, globalopts, grpclog
from devctl.cli.common import ExitCode, GlobalOptions, begin_invocation, escape_unencodable, setup_logging
from devctl.cli.globalopts import MAX_TIMEOUT, TIMEOUT_HELP, VERBOSE_HELP
from devctl.cli.lazy import LazyGroup, commands
from devctl.escape import escape


def _escape_usage_error(error: ClickException) -> None:
    """click echoes what was typed raw in a usage error ("No such option: ..."): escape a message that needs it.

    Its messages that quote a value already use ``repr``; those are left as they are.
    """
    if not error.message.isprintable():
        error.message = escape(error.message)


# Which module under devctl.cli registers each command: only the one that runs is imported
# (tests/test_start.py checks this against what the modules register).
COMMAND_MODULES = {
    **dict.fromkeys(("ls", "devices", "pods", "get", "topo", "plugins", "checkpoint", "snapshot"), "read"),
    **dict.fromkeys(("claims", "cdi"), "claims"),
    **dict.fromkeys(("tui", "demo"), "tui"),
    **{name: name for name in ("doctor", "call", "watch", "plugin", "sim", "completion", "exporter", "fleet", "who")},
}


# The read commands that answer once and exit, run with the garbage collector paused (output.one_answer); those
# with -w (ls, devices, pods, claims) pause it for each answer themselves (output.rewatch).
ONE_ANSWER = frozenset({"get", "topo", "plugins", "checkpoint", "snapshot", "doctor", "cdi", "who"})


class DevctlGroup(LazyGroup):
    """The root group: a reader that goes away is a normal end, as it is for ``devctl watch``; usage errors escaped."""

    modules = COMMAND_MODULES

    def get_command(self, ctx: typer.Context, cmd_name: str):  # type: ignore[override]
        command = super().get_command(ctx, cmd_name)
        if command is None:
            return None
        if cmd_name in ONE_ANSWER and command.callback is not None:
            from devctl.cli.output import one_answer

            command.callback = one_answer(command.callback)
        return globalopts.attach(command, cmd_name)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        if not args and not ctx.resilient_parsing:
            # `devctl` alone: the help on stdout, exit 0 (click's no_args_is_help exits 2 on stderr).
            print(ctx.get_help())
            ctx.exit(int(ExitCode.OK))
        try:
            return super().parse_args(ctx, args)
        except ClickException as e:
            _escape_usage_error(e)
            raise

    def invoke(self, ctx: typer.Context) -> object:
        try:
            return super().invoke(ctx)
        except ClickException as e:
            _escape_usage_error(e)
            raise
        except BrokenPipeError:
            # `devctl devices | head`: click would exit 1, which devctl's contract
            # reserves for findings. Stop quietly with 0; the devnull stdout keeps
            # the interpreter's last flush from failing again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(int(ExitCode.OK)) from None


app = typer.Typer(
    cls=DevctlGroup,
    name="devctl",
    help="Inspect Kubernetes device plugins, pod resources and NUMA topology on this node.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"devctl {__version__}")
        raise typer.Exit(int(ExitCode.OK))


@app.callback()
def main_options(
    ctx: typer.Context,
    root: Annotated[
        str | None,
        typer.Option(envvar="DEVCTL_ROOT", metavar="DIR", help="The host's filesystem root [default: / or /host]."),
    ] = None,
    kubelet_dir: Annotated[
        str | None,
        typer.Option(
            envvar="DEVCTL_KUBELET_DIR", metavar="DIR", help="The kubelet's --root-dir [<root>/var/lib/kubelet]."
        ),
    ] = None,
    plugins_dir: Annotated[
        str | None,
        typer.Option(
            envvar="DEVCTL_PLUGINS_DIR",
            metavar="DIR",
            help="Device plugin sockets [<root>/var/lib/kubelet/device-plugins].",
        ),
    ] = None,
    pod_resources: Annotated[
        str | None,
        typer.Option(
            envvar="DEVCTL_POD_RESOURCES",
            metavar="PATH",
            help="The pod-resources socket [<kubelet-dir>/pod-resources/kubelet.sock].",
        ),
    ] = None,
    sysfs: Annotated[
        str | None, typer.Option(envvar="DEVCTL_SYSFS", metavar="DIR", help="Host topology [<root>/sys].")
    ] = None,
    pod_logs: Annotated[
        str | None,
        typer.Option(envvar="DEVCTL_POD_LOGS", metavar="DIR", help="Per-pod log dirs [<root>/var/log/pods]."),
    ] = None,
    proc: Annotated[
        str | None,
        typer.Option(
            "--proc", envvar="DEVCTL_PROC", metavar="DIR", help="Processes, for who holds a device [<root>/proc]."
        ),
    ] = None,
    runtime_endpoint: Annotated[
        str | None,
        typer.Option(
            envvar="DEVCTL_RUNTIME_ENDPOINT",
            metavar="PATH",
            help="The CRI socket [the first of <root>/run/containerd/containerd.sock, <root>/run/crio/crio.sock].",
        ),
    ] = None,
    cdi_dirs: Annotated[
        str | None,
        typer.Option(
            envvar="DEVCTL_CDI_DIRS",
            metavar="DIR[:DIR]",
            help="CDI spec dirs, lowest priority first [<root>/etc/cdi:<root>/var/run/cdi].",
        ),
    ] = None,
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
) -> None:
    begin_invocation(ctx)
    setup_logging(verbose)
    grpclog.quiet()  # before any command imports grpc
    ctx.obj = GlobalOptions(
        root=root,
        kubelet_dir=kubelet_dir,
        plugins_dir=plugins_dir,
        pod_resources=pod_resources,
        sysfs=sysfs,
        pod_logs=pod_logs,
        proc=proc,
        runtime_endpoint=runtime_endpoint,
        cdi_dirs=cdi_dirs,
        timeout=timeout,
        from_file=from_file,
        verbose=verbose,
    )


def version_command() -> None:
    """Print the version (as --version does)."""
    print(f"devctl {__version__}")


commands.command("version")(version_command)


def main() -> None:
    if signal.getsignal(signal.SIGINT) is quiet_interrupt:  # the imports are done: Ctrl-C is KeyboardInterrupt again
        signal.signal(signal.SIGINT, signal.default_int_handler)
    completion.enable_runtime_completion()
    escape_unencodable()
    try:
        app(prog_name="devctl")
    except KeyboardInterrupt:
        # Ctrl-C before a command installs its own handling (e.g. while importing): no traceback.
        sys.exit(130)
