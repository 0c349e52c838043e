"""`devctl sim [--scenario FILE] [--root DIR] [-- COMMAND ARGS...]` and `devctl sim restart-kubelet`.

The simulated node runs in this process, on the CLI's event loop. Without a
command it prints ``export DEVCTL_ROOT=...`` and runs until SIGINT/SIGTERM;
with one it runs the command against the node and exits with its status.
Only typer and the standard library at module level: the simulator, gRPC and
YAML are imported inside the commands so that `devctl --help` stays fast.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.base.escape import escape
from devctl.base.path_options import PATH_OPTIONS, ROOT
from devctl.cli.common import ExitCode, GlobalOptions, fail, options, run, say
from devctl.cli.complete import namespaced_pods
from devctl.cli.lazy import SIM_COMMAND

if TYPE_CHECKING:
    from devctl.cli.signals import Stopper
    from devctl.lab.sim.scenario import Scenario

READY_TIMEOUT = 30.0
RESTART_WAIT = 10.0  # plugins register again within 5 s of kubelet.sock coming back
POD_WAIT = 50.0  # a pod operation may wait on a DRA driver: NodePrepareResources has a 45 s deadline
# Path overrides that would point the command away from the simulated node: every one but the root's.
_PATH_VARS = frozenset(option.envvar for option in PATH_OPTIONS) - {ROOT.envvar}


sim_app = typer.Typer(
    name="sim",
    invoke_without_command=True,
    subcommand_metavar="[-- COMMAND [ARGS]...] | restart-kubelet",
)


@sim_app.callback()
def sim(
    ctx: typer.Context,
    scenario: Annotated[
        str | None, typer.Option("--scenario", metavar="FILE", help="Scenario YAML [the packaged default node].")
    ] = None,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            metavar="DIR",
            help="Root of the simulated node: a new or empty directory [global --root, else a fresh temp dir; "
            "never DEVCTL_ROOT].",
        ),
    ] = None,
) -> None:
    """Run a simulated node (kubelet, device plugins, pods) on real sockets under one root.

    Runs until interrupted, or runs COMMAND (after --) against it and exits
    with its status. Without a command it prints `export DEVCTL_ROOT=...`: paste it into another
    shell and every devctl command reads the simulated node. `devctl sim
    restart-kubelet` restarts its kubelet from another shell.
    """
    if ctx.invoked_subcommand is not None:
        return
    from devctl.cli.signals import catch_early, run_until_signal

    catch_early()
    command = ctx.meta.get(SIM_COMMAND)
    if command is not None and not command:
        fail("nothing to run after --; give a command, e.g. devctl sim -- devctl ls")
    from devctl.lab.sim.scenario import ScenarioError, default_scenario, load_scenario

    try:
        node_scenario = load_scenario(scenario) if scenario else default_scenario()
    except ScenarioError as e:
        fail(f"scenario: {e}")
    opts = options(ctx)
    given = root or _global_root_given(ctx, opts)
    if given is None and os.environ.get("DEVCTL_ROOT"):
        # Most often exported from another sim: that root is in use, and a root is never taken from the environment.
        print(
            f"devctl: sim: starting a fresh node; DEVCTL_ROOT={os.environ['DEVCTL_ROOT']} from the environment "
            "is not used as its root (give --root DIR for that)",
            file=sys.stderr,
        )
    if opts.verbose:
        logging.getLogger("devctl").setLevel(logging.DEBUG)
    elif command is None:
        # In the foreground the simulator's log is what a kubelet's journal would show.
        # One line per event (a registration, an admission, a health change), not one per RPC: -v has those.
        for name in ("devctl.lab.sim", "devctl.lab.plugin"):
            logging.getLogger(name).setLevel(logging.INFO)
        for name in ("devctl.lab.plugin.rpc", "devctl.lab.plugin.dra.rpc"):
            logging.getLogger(name).setLevel(logging.WARNING)
    code = run_until_signal(lambda stopper: _serve(Path(given) if given else None, node_scenario, command, stopper))
    raise typer.Exit(code)


def _global_root_given(ctx: typer.Context, opts: GlobalOptions) -> str | None:
    """``devctl --root DIR sim``: the global option when typed on the command line, never DEVCTL_ROOT.

    The source is compared by its name: the enum's class is typer's own copy of click's, not public API
    (and a separately installed click's class would never compare equal).
    """
    source = ctx.find_root().get_parameter_source("root")
    return opts.root if source is not None and source.name == "COMMANDLINE" else None


async def _serve(root: Path | None, scenario: Scenario, command: list[str] | None, stopper: Stopper) -> int:
    """Run the node until a stop signal (or the command's end); the exit code.

    A stop signal before the node is ready ends it with 128+N; once it runs,
    a stop signal is its normal end (0). Everything it made is removed on the way out.
    """
    import asyncio

    from devctl.lab.made import Made
    from devctl.lab.plugin.server import ServeError
    from devctl.lab.sim import temproot
    from devctl.lab.sim.node import SimError, SimNode

    made = Made()
    ready = False
    try:
        node_root = root if root is not None else temproot.create("devctl-sim-", made)
        node = SimNode(node_root, scenario, made=made)
        try:
            try:
                await node.start()
            except SimError as e:  # the root cannot hold a simulated node: a usage problem
                say(f"sim: {e}")
                return int(ExitCode.USAGE)
            except (ServeError, OSError, ValueError) as e:  # a socket that cannot be served
                say(f"sim: {e}")
                return int(ExitCode.FINDINGS)
            try:
                await node.ready(READY_TIMEOUT)
            except SimError as e:
                say(f"sim: {e}")
                return int(ExitCode.FINDINGS)
            ready = True
            failed = node.device_manager.failed
            for (namespace, name), why in failed.items():
                say(f"sim: pod {namespace}/{name} not admitted: {why}")
            if command is not None:
                return await _run_command(command, node_root, stopper)
            print(f"export DEVCTL_ROOT={shlex.quote(str(node_root))}", flush=True)
            say(
                f"simulated node at {node_root}: {len(node.plugins)} device plugins, "
                f"{len(node.device_manager.running_pods())} pods running; stop with Ctrl-C. "
                "From another shell: devctl sim restart-kubelet"
            )
            await asyncio.Event().wait()  # until a stop signal cancels this task
            return int(ExitCode.OK)
        except asyncio.CancelledError:
            if stopper.received is None:
                raise
            return int(ExitCode.OK) if ready else stopper.exit_code
        finally:
            stopper.stopping()  # later signals must not cut the cleanup short
            await node.stop()
    finally:
        made.remove()


def _command_env(root: Path) -> dict[str, str]:
    """The command's environment: this node's root, no other path override, and this devctl on PATH."""
    from devctl.cli import grpclog

    env = {k: v for k, v in grpclog.child_env(os.environ).items() if k not in _PATH_VARS}
    env[ROOT.envvar] = str(root)
    # `devctl sim -- devctl ls` must find this devctl even from a venv that is not activated.
    bindir = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(bindir, "devctl")):
        env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    return env


# The command runs behind a small trampoline that asks the kernel to send it SIGTERM when the sim
# dies (PR_SET_PDEATHSIG), so that a `sim` killed with SIGKILL never leaves the command running with
# DEVCTL_ROOT pointing at a dead node. It runs in the child, so no code runs between fork and exec
# in this multi-threaded process; a sim that died before the request took hold is seen by getppid.
_ORPHAN_GUARD = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None).prctl(1,15)\n"  # PR_SET_PDEATHSIG, SIGTERM
    "if os.getppid()!=int(sys.argv[1]):sys.exit(143)\n"
    "try:os.execvpe(sys.argv[2],sys.argv[2:],os.environ)\n"
    "except PermissionError:sys.exit(126)\n"
    "except OSError:sys.exit(127)\n"
)


async def _run_command(command: list[str], root: Path, stopper: Stopper) -> int:
    import asyncio
    import shutil

    env = _command_env(root)
    if shutil.which(command[0], mode=os.F_OK, path=env.get("PATH", os.defpath)) is None:
        say(f"sim: {command[0]}: command not found")
        return 127  # as a shell says it
    if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        say(f"sim: {command[0]}: permission denied")
        return 126
    guard = [sys.executable, "-I", "-S", "-c", _ORPHAN_GUARD, str(os.getpid())]
    proc = await asyncio.create_subprocess_exec(*guard, *command, env=env)

    def pass_on(sig: signal.Signals) -> None:
        # Ctrl-C reaches the command too (same process group): its exit decides. SIGTERM and SIGHUP are passed on.
        if sig != signal.SIGINT and proc.returncode is None:
            proc.send_signal(sig)

    stopper.on_signal(pass_on)
    if stopper.received is not None and stopper.received != signal.SIGINT:
        pass_on(stopper.received)  # it came while the command was being started
    code = await proc.wait()
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell reports it


@sim_app.command("restart-kubelet")
def restart_kubelet(
    ctx: typer.Context,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Return once every plugin of the scenario registered again.")
    ] = True,
) -> None:
    """Restart the running simulated kubelet as a real restart does.

    Every socket in the plugins dir is deleted and kubelet.sock is created
    again; the checkpoint is kept and running pods keep their devices. The
    node is the one at --root (or DEVCTL_ROOT).
    """
    from devctl.lab.sim.control import SimNotRunning, request

    opts = options(ctx)
    parent = ctx.parent.params if ctx.parent is not None else {}
    root = parent.get("root") or opts.paths().root
    timeout = opts.timeout + (RESTART_WAIT if wait else 0.0)
    try:
        reply = run(request(root, {"op": "restart-kubelet", "wait": wait, "timeout": RESTART_WAIT}, timeout))
    except SimNotRunning as e:
        fail(str(e), ExitCode.NO_SOURCE)
    if not reply.get("ok"):
        fail(str(reply.get("error", "the simulated node refused")), ExitCode.FINDINGS)
    again = ", ".join(reply.get("registered") or ()) or "none yet"
    dra = ", ".join(reply.get("dra_drivers") or ())  # DRA drivers found again in plugins_registry
    print(
        escape(
            f"restarted the simulated kubelet at {root}"
            + (f"; registered again: {again}" if wait else "")
            + (f"; DRA drivers: {dra}" if wait and dra else "")
        )
    )


def _pod_request(ctx: typer.Context, message: dict[str, Any]) -> dict[str, Any]:
    """Send a pod operation to the running simulator of --root (or DEVCTL_ROOT); exit 1 with its refusal."""
    from devctl.lab.sim.control import SimNotRunning, request

    opts = options(ctx)
    parent = ctx.parent.params if ctx.parent is not None else {}
    root = parent.get("root") or opts.paths().root
    try:
        reply = run(request(root, message, opts.timeout + POD_WAIT))
    except SimNotRunning as e:
        fail(str(e), ExitCode.NO_SOURCE)
    if not reply.get("ok"):
        fail(str(reply.get("error", "the simulated node refused")), ExitCode.FINDINGS)
    return reply


@sim_app.command("delete-pod")
def delete_pod(
    ctx: typer.Context,
    pod: Annotated[
        str, typer.Argument(metavar="NS/NAME", help="The running pod to delete.", autocompletion=namespaced_pods)
    ],
) -> None:
    """Delete a running pod: its DRA claims are unprepared and its devices freed, as the kubelet does.

    A pod whose claim cannot be unprepared (its DRA driver is gone) cannot
    finish terminating: it stays, and the command says why (exit 1).
    """
    reply = _pod_request(ctx, {"op": "delete-pod", "pod": pod})
    print(escape(f"deleted pod {reply['pod']} ({reply['uid']})"))


@sim_app.command("add-pod")
def add_pod(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE", help="One pod in the scenario's pods: format (YAML).")],
) -> None:
    """Admit a pod as at start: its DRA claims prepared, then its devices allocated."""

    from devctl.core.userfiles import UserFileError, load_yaml

    try:
        data = load_yaml(file)
    except UserFileError as e:
        fail(str(e) if e.problem is None else f"{file}: not valid YAML: {e.problem}")
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict):
        fail(f"{file}: expected one pod (a mapping with namespace, name, containers)")
    reply = _pod_request(ctx, {"op": "add-pod", "pod": data})
    print(escape(f"added pod {reply['pod']} ({reply['uid']})"))


@sim_app.command("kmsg")
def kmsg(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The kernel line, e.g. an NVRM Xid line.")],
    level: Annotated[int, typer.Option("--level", min=0, max=7, help="Its syslog level (4: warning).")] = 4,
) -> None:
    """Append one record to the simulated node's kernel log (<root>/dev/kmsg), stamped now.

    devctl events and devctl record read it as the kernel's own:
    devctl sim kmsg "NVRM: Xid (PCI:0000:d0:03): 79, pid=1, GPU has fallen off the bus."
    """
    reply = _pod_request(ctx, {"op": "kmsg", "text": text, "level": level})
    print(escape(f"kernel log {reply['path']}: record {reply['seq']} appended"))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(sim_app)
