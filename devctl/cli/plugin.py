"""`devctl plugin serve|set-health|add|remove`: the in-process device plugin and its live control.

Only typer and the standard library at module level; the plugin, gRPC and YAML
are imported inside the commands so that `devctl --help` stays fast.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.base.escape import escape
from devctl.cli.common import ExitCode, GlobalOptions, fail, options, run, say
from devctl.cli.complete import device_ids, resources

if TYPE_CHECKING:
    from devctl.cli.signals import Stopper
    from devctl.lab.plugin.spec import PluginSpec

plugin_app = typer.Typer(
    name="plugin",
    help="Run a device plugin in this process, and change its devices from another shell.",
    no_args_is_help=True,
)


class Health(str, Enum):
    healthy = "healthy"
    unhealthy = "unhealthy"


@plugin_app.command("serve")
def serve(
    ctx: typer.Context,
    resource: Annotated[
        str | None, typer.Option("--resource", help="Extended resource name, e.g. example.com/gpu.")
    ] = None,
    count: Annotated[
        int | None,
        typer.Option("--count", min=0, help="Serve N devices named <name part>-0 … -N-1 (at most 100,000)."),
    ] = None,
    device: Annotated[
        list[str] | None, typer.Option("--device", help="A device ID[@NUMA[+NUMA]]; repeat for more.")
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--config", metavar="FILE", help="YAML file shaped like a scenario `resources:` entry."),
    ] = None,
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket", metavar="NAME", help="Socket file name in the plugins dir, no '/' [devctl-<resource>.sock]."
        ),
    ] = None,
    preferred: Annotated[
        bool | None, typer.Option("--preferred/--no-preferred", help="Offer GetPreferredAllocation [on].")
    ] = None,
    pre_start: Annotated[bool, typer.Option("--pre-start", help="Ask the kubelet for PreStartContainer.")] = False,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="KEY=VALUE given to each container; {ids} becomes the device IDs. Repeatable."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Register even if a live plugin already serves the resource.")
    ] = False,
    no_register: Annotated[
        bool, typer.Option("--no-register", help="Only serve the socket; do not register with the kubelet.")
    ] = False,
    dra: Annotated[
        str | None,
        typer.Option("--dra", metavar="DRIVER", help="Serve a DRA driver (e.g. gpu.example.com) instead: docs/dra.md."),
    ] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="With --dra: the pool name [the host name].")] = None,
    no_health: Annotated[bool, typer.Option("--no-health", help="With --dra: no health stream service.")] = False,
    claims: Annotated[
        str | None, typer.Option("--claims", metavar="FILE", help="With --dra: claim UID -> device names (YAML).")
    ] = None,
) -> None:
    """Serve a device plugin (or with --dra a DRA driver) until SIGINT, SIGTERM or SIGHUP, then remove its sockets.

    It serves on a socket in the plugins dir, then registers with kubelet.sock,
    and registers again whenever the kubelet restarts. It refuses a resource that
    a live plugin already serves unless --force: the kubelet gives a resource to
    the newest registration.
    """
    from devctl.cli.signals import catch_early, run_until_signal
    from devctl.lab.plugin.spec import PluginSpecError

    catch_early()
    opts = options(ctx)
    if dra is not None:  # the DRA driver has its own module; the device plugin flags below do not apply
        from devctl.cli.plugin_dra import serve_dra

        plugin_only: dict[str, object] = {"--resource": resource, "--config": config, "--socket": socket, "--env": env}
        plugin_only.update({"--preferred": preferred, "--pre-start": pre_start or None, "--force": force or None})
        if given := [flag for flag, value in plugin_only.items() if value]:
            fail(f"--dra serves a DRA driver: {', '.join(given)} belong(s) to a device plugin")

        serve_dra(opts, dra, count, device or [], pool, not no_health, claims, register=not no_register)
        return
    if given := [f for f, v in {"--pool": pool, "--no-health": no_health, "--claims": claims}.items() if v]:
        fail(f"{', '.join(given)} go(es) with --dra DRIVER")
    try:
        spec = build_spec(resource, count, device or [], config, socket, preferred, pre_start, env or [])
    except (PluginSpecError, OSError) as e:
        fail(str(e))
    logging.getLogger("devctl.lab.plugin").setLevel(logging.DEBUG if opts.verbose else logging.INFO)
    code = run_until_signal(lambda stopper: _serve(spec, opts, stopper, register=not no_register, force=force))
    raise typer.Exit(code)


def build_spec(
    resource: str | None,
    count: int | None,
    devices: list[str],
    config: str | None,
    socket: str | None,
    preferred: bool | None,
    pre_start: bool,
    env: list[str],
) -> PluginSpec:
    """The PluginSpec the flags describe: the config file first, then each flag given on top of it."""
    from dataclasses import replace

    from devctl.lab.plugin.spec import (
        PluginSpecError,
        counted_devices,
        parse_device,
        socket_name_error,
        spec_from_mapping,
    )

    if count is not None and devices:
        raise PluginSpecError("give either --count or --device, not both")
    if socket is not None and (why := socket_name_error(socket)) is not None:
        raise PluginSpecError(f"--socket: {why}")
    data: dict[str, Any] = {}
    if config is not None:
        data = _load_config(config)
    if resource is not None:
        if data.get("name", resource) != resource:
            raise PluginSpecError(f"--resource {resource} differs from name {data['name']} in {config}")
        data["name"] = resource
    if "name" not in data:
        raise PluginSpecError("give --resource NAME (or a config file with a name)")
    if count is None and not devices and "devices" not in data and "count" not in data:
        raise PluginSpecError("give --count N or --device ID (or devices in the config file)")
    spec = spec_from_mapping(data)
    if count is not None:
        spec = replace(spec, devices=counted_devices(spec.resource, count))
    elif devices:
        parsed = tuple(parse_device(d) for d in devices)
        if len({d.id for d in parsed}) != len(parsed):
            raise PluginSpecError("device IDs must be unique")
        spec = replace(spec, devices=parsed)
    envs = dict(spec.allocate.envs)
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PluginSpecError(f"--env {item!r}: expected KEY=VALUE")
        envs[key] = value
    return replace(
        spec,
        socket=socket or spec.socket,
        preferred_allocation=spec.preferred_allocation if preferred is None else preferred,
        pre_start=spec.pre_start or pre_start,
        allocate=replace(spec.allocate, envs=envs),
    )


def _load_config(path: str) -> dict[str, Any]:

    from devctl.core.userfiles import UserFileError, load_yaml
    from devctl.lab.plugin.spec import PluginSpecError

    try:
        data = load_yaml(path)
    except UserFileError as e:
        raise PluginSpecError(str(e) if e.problem is None else f"{path}: not valid YAML: {e.problem}") from None
    if not isinstance(data, dict):
        raise PluginSpecError(f"{path}: expected a mapping like a scenario `resources:` entry")
    return data


async def _serve(spec: PluginSpec, opts: GlobalOptions, stopper: Stopper, *, register: bool, force: bool) -> int:
    import asyncio

    from devctl.core.guard import live_server_for
    from devctl.lab.plugin.control import default_control_dir
    from devctl.lab.plugin.server import DevicePluginServer, ServeError

    paths = opts.paths()
    control_dir = default_control_dir(paths.root)
    if register and not force:
        live = await live_server_for(spec.resource, paths, opts.timeout)
        if live is not None:
            fail(live.refusal(spec.resource, "registering it again"))
    server = DevicePluginServer(spec, paths.plugins_dir, register=register, control_dir=control_dir)
    try:
        try:
            await server.start()
        except (ServeError, OSError) as e:
            fail(str(e))
        say(
            f"serving {spec.resource} ({len(spec.devices)} devices) on {server.socket_path}; "
            f"stop with Ctrl-C. Try: devctl plugin set-health {spec.resource} ID unhealthy"
        )
        await asyncio.Event().wait()  # until a stop signal cancels this task
    except asyncio.CancelledError:
        if stopper.received is None:
            raise
        return int(ExitCode.OK)  # a stop signal is how a plugin ends
    finally:
        stopper.stopping()
        await server.stop()
    return int(ExitCode.OK)


def _control(ctx: typer.Context, resource: str, request: dict[str, Any]) -> None:
    from devctl.lab.plugin.control import ControlError, NoPlugin, control, default_control_dir

    opts = options(ctx)
    control_dir = default_control_dir(opts.paths().root)
    try:
        reply = run(control(control_dir, resource, request, opts.timeout))
    except NoPlugin as e:  # a resource name that does not exist: exit 1, as in ls
        fail(str(e), ExitCode.FINDINGS)
    except ControlError as e:  # a plugin that may not be asked or did not answer
        fail(str(e), ExitCode.NO_SOURCE)
    if not reply.get("ok"):
        code = ExitCode.FINDINGS if reply.get("unknown") else ExitCode.USAGE  # an unknown device ID, as in ls
        fail(str(reply.get("error", "the plugin refused the request")), code)


@plugin_app.command("set-health")
def set_health(
    ctx: typer.Context,
    resource: Annotated[
        str, typer.Argument(help="The resource a running `devctl plugin serve` serves.", autocompletion=resources)
    ],
    device_id: Annotated[str, typer.Argument(metavar="ID", help="The device to change.", autocompletion=device_ids)],
    # Case-insensitive: a person pastes "Unhealthy" as devctl devices and the kubelet spell it.
    health: Annotated[Health, typer.Argument(help="healthy or unhealthy.", case_sensitive=False)],
) -> None:
    """Mark a device healthy or unhealthy; every open ListAndWatch stream sees it at once."""
    _control(ctx, resource, {"op": "set-health", "id": device_id, "health": health.value})
    print(escape(f"{resource} {device_id}: {health.value.capitalize()}"))


@plugin_app.command("add")
def add(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(help="The resource a running `devctl plugin serve` serves.")],
    device: Annotated[str, typer.Argument(metavar="ID[@NUMA]", help="The new device, e.g. gpu-8@1 or gpu-8@0+1.")],
    health: Annotated[Health, typer.Option("--health", help="Its health.", case_sensitive=False)] = Health.healthy,
) -> None:
    """Add a device to a running plugin."""
    from devctl.lab.plugin.spec import PluginSpecError, parse_device

    try:
        parsed = parse_device(device)
    except PluginSpecError as e:
        fail(str(e))
    _refuse_absent_numa(options(ctx).paths().sysfs, parsed.numa_nodes)
    _control(ctx, resource, {"op": "add", "id": parsed.id, "numa": list(parsed.numa_nodes), "health": health.value})
    print(escape(f"{resource} {parsed.id}: added"))


def _refuse_absent_numa(sysfs: str, nodes: tuple[int, ...]) -> None:
    """Usage error when the host (its sysfs) has no such NUMA node; no check when sysfs says nothing."""
    from devctl.core.names import numa_nodes

    known = numa_nodes(sysfs)
    if known is None:
        return
    absent = [n for n in nodes if n not in known]
    if known and absent:
        have = ", ".join(str(n) for n in sorted(known))
        fail(f"NUMA node {absent[0]} does not exist on this host (its nodes: {have}; read from {sysfs})")


@plugin_app.command("remove")
def remove(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(help="The resource a running `devctl plugin serve` serves.")],
    device_id: Annotated[str, typer.Argument(metavar="ID", help="The device to remove.")],
) -> None:
    """Remove a device from a running plugin."""
    _control(ctx, resource, {"op": "remove", "id": device_id})
    print(escape(f"{resource} {device_id}: removed"))


def register(app: typer.Typer) -> None:
    """Add `devctl plugin …` to the app."""
    app.add_typer(plugin_app, name="plugin")
