"""`devctl tui [--plugin FILE]...` on the live node, and `devctl demo` on a simulated one.

Only typer and the standard library at module level: textual, gRPC and the
simulator are imported inside the commands, so that no other command (and not
`devctl --help`) ever loads textual.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, GlobalOptions, fail, options, run

if TYPE_CHECKING:
    from devctl.cli.signals import Stopper
    from devctl.lab.plugin.spec import PluginSpec
    from devctl.lab.sim.scenario import Scenario
    from devctl.tui.feeds import Feed

DEMO_READY_TIMEOUT = 30.0


def tui(
    ctx: typer.Context,
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            metavar="FILE",
            help="Also serve a device plugin from this YAML (a scenario `resources:` entry) and drive it "
            "from the keyboard. Repeatable.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Register a --plugin even if a live plugin already serves its resource.")
    ] = False,
) -> None:
    """The node's devices at a glance, live: resources, devices, pods, NUMA map, events.

    Keys: 1-5 or Tab for the views, arrows to move, Enter to open, / to filter,
    ? for help, q to quit. `devctl --from FILE tui` shows a saved snapshot instead.
    """
    from devctl.cli.signals import catch_early, run_until_signal

    opts = options(ctx)
    specs = [_plugin_spec(path) for path in plugin or []]
    if opts.from_file is not None:
        if specs:
            fail("--plugin needs the live node; it cannot be combined with --from")
        run(_run_app(_snapshot_feed(opts.from_file), f"snapshot {Path(opts.from_file).name}"))
        return
    catch_early()
    raise typer.Exit(run_until_signal(lambda stopper: _tui(opts, specs, force, stopper)))


def demo(
    ctx: typer.Context,
    scenario: Annotated[
        str | None, typer.Option("--scenario", metavar="FILE", help="Scenario YAML [the packaged default node].")
    ] = None,
) -> None:
    """The TUI on a simulated node (the default scenario), with its plugins under your keys.

    Everything runs in this process on real sockets in a temporary root, removed on exit
    (on SIGTERM or SIGHUP too; a root left by a killed demo goes at the next start).
    In the devices view: h flips a device's health, a adds a device, x removes one.
    """
    from devctl.cli.signals import catch_early, run_until_signal

    catch_early()
    from devctl.lab.sim.scenario import ScenarioError, default_scenario, load_scenario

    opts = options(ctx)
    try:
        chosen = load_scenario(scenario) if scenario else default_scenario()
    except (ScenarioError, OSError) as e:
        fail(str(e))
    raise typer.Exit(run_until_signal(lambda stopper: _demo(opts, chosen, stopper)))


def _plugin_spec(path: str) -> PluginSpec:
    from devctl.cli.plugin import build_spec
    from devctl.lab.plugin.spec import PluginSpecError

    try:
        return build_spec(None, None, [], path, None, None, False, [])
    except (PluginSpecError, OSError) as e:
        fail(f"--plugin {path}: {e}")


def _snapshot_feed(path: str) -> Feed:
    from devctl.core.collect import SnapshotError, load_snapshot
    from devctl.tui.feeds import SnapshotFeed

    try:
        return SnapshotFeed(load_snapshot(path))
    except SnapshotError as e:
        fail(str(e), ExitCode.NO_SOURCE)


async def _run_app(feed: Feed, label: str, stopper: Stopper | None = None) -> None:
    """Run the app on this loop with every log record going to its event log instead of the terminal.

    With ``stopper``, a stop signal (SIGTERM, SIGHUP: the SSH session dropped)
    exits the app as ``q`` does, so that it restores the terminal, and then the
    caller's cleanup runs.
    """
    from devctl.tui.app import make_app
    from devctl.tui.feeds import captured_logs

    with captured_logs() as logs:
        app = make_app(feed, label=label, logs=logs)
        if stopper is not None:
            if stopper.received is not None:
                return  # it came while the node or plugins were starting
            stopper.on_signal(lambda sig: app.exit() if app.started else None, repeat=True)
        try:
            await app.run_async()
        finally:
            if stopper is not None:
                stopper.stopping()


async def _tui(opts: GlobalOptions, specs: list[PluginSpec], force: bool, stopper: Stopper) -> int:
    from devctl.core.guard import live_server_for
    from devctl.lab.plugin.control import default_control_dir
    from devctl.lab.plugin.server import DevicePluginServer, ServeError
    from devctl.tui.feeds import NodeFeed, PluginControls

    paths = opts.paths()
    control_dir = default_control_dir(paths.root)
    servers: dict[str, DevicePluginServer] = {}
    try:
        for spec in specs:
            if spec.resource in servers:
                fail(f"--plugin: {spec.resource} is given twice")
            if not force:
                live = await live_server_for(spec.resource, paths, opts.timeout)
                if live is not None:
                    fail(live.refusal(spec.resource, "serving it here"))
            server = DevicePluginServer(spec, paths.plugins_dir, control_dir=control_dir)
            servers[spec.resource] = server
            try:
                await server.start()
            except (ServeError, OSError) as e:
                fail(f"--plugin {spec.resource}: {e}")
        controls = PluginControls(servers) if servers else None
        # A real node's plugins may list thousands of devices: follow them in a child process.
        feed = NodeFeed(paths, opts.timeout, controls=controls, watch_subprocess=True)
        await _run_app(feed, f"node {paths.root}", stopper)
    finally:
        stopper.stopping()
        for server in servers.values():
            await server.stop()
    return stopper.exit_code


async def _demo(opts: GlobalOptions, scenario: Scenario, stopper: Stopper) -> int:
    from devctl.lab.made import Made
    from devctl.lab.sim import temproot
    from devctl.lab.sim.node import SimError, SimNode
    from devctl.tui.dra import DraHandle
    from devctl.tui.feeds import NodeFeed, PluginControls, PluginHandle

    made = Made()
    try:
        # A short path under /tmp: a unix socket path has at most 107 bytes.
        node = SimNode(temproot.create("devctl-demo-", made), scenario, made=made)
        try:
            try:
                await node.start()
                await node.ready(DEMO_READY_TIMEOUT)
            except SimError as e:
                fail(f"the simulated node did not start: {e}", ExitCode.NO_SOURCE)
            # The keys drive the device plugins and the DRA drivers alike (h, a, x in the Devices view).
            handles: dict[str, PluginHandle] = {**node.plugins}
            handles.update((name, DraHandle(d)) for name, d in node.dra_drivers.items())
            feed = NodeFeed(node.paths, opts.timeout, controls=PluginControls(handles))
            await _run_app(feed, "demo (simulated node)", stopper)
        finally:
            stopper.stopping()
            await node.stop()
    finally:
        made.remove()
    return stopper.exit_code


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("tui")(tui)
    app.command("demo")(demo)
