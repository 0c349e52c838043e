"""`devctl plugin serve|set-health|add|remove`: the in-process device plugin and its live control.

Only typer and the standard library at module level; the plugin, gRPC and YAML
are imported inside the commands so that `devctl --help` stays fast.
"""

from __future__ import annotations

import logging
import signal
import sys
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.cli.common import ExitCode, GlobalOptions, fail, options, run

if TYPE_CHECKING:
    from devctl.plugin.spec import PluginSpec

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
        int | None, typer.Option("--count", min=0, help="Serve N devices named <name part>-0 … -N-1.")
    ] = None,
    device: Annotated[
        list[str] | None, typer.Option("--device", help="A device ID[@NUMA[+NUMA]]; repeat for more.")
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="YAML file shaped like a scenario `resources:` entry.")
    ] = None,
    socket: Annotated[
        str | None, typer.Option("--socket", help="Socket file name in the plugins dir [devctl-<resource>.sock].")
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
) -> None:
    """Serve a device plugin until SIGINT/SIGTERM, then remove its socket.

    It serves on a socket in the plugins dir, then registers with kubelet.sock,
    and registers again whenever the kubelet restarts. It refuses a resource that
    a live plugin already serves unless --force: the kubelet gives a resource to
    the newest registration.
    """
    from devctl.plugin.spec import SpecError

    opts = options(ctx)
    try:
        spec = build_spec(resource, count, device or [], config, socket, preferred, pre_start, env or [])
    except (SpecError, OSError) as e:
        fail(str(e))
    logging.getLogger("devctl.plugin").setLevel(logging.DEBUG if opts.verbose else logging.INFO)
    run(_serve(spec, opts, register=not no_register, force=force))


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

    from devctl.plugin.spec import SpecError, counted_devices, parse_device, spec_from_mapping

    if count is not None and devices:
        raise SpecError("give either --count or --device, not both")
    data: dict[str, Any] = {}
    if config is not None:
        data = _load_config(config)
    if resource is not None:
        if data.get("name", resource) != resource:
            raise SpecError(f"--resource {resource} differs from name {data['name']} in {config}")
        data["name"] = resource
    if "name" not in data:
        raise SpecError("give --resource NAME (or a config file with a name)")
    if count is None and not devices and "devices" not in data and "count" not in data:
        raise SpecError("give --count N or --device ID (or devices in the config file)")
    spec = spec_from_mapping(data)
    if count is not None:
        spec = replace(spec, devices=counted_devices(spec.resource, count))
    elif devices:
        parsed = tuple(parse_device(d) for d in devices)
        if len({d.id for d in parsed}) != len(parsed):
            raise SpecError("device IDs must be unique")
        spec = replace(spec, devices=parsed)
    envs = dict(spec.allocate.envs)
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"--env {item!r}: expected KEY=VALUE")
        envs[key] = value
    return replace(
        spec,
        socket=socket or spec.socket,
        preferred_allocation=spec.preferred_allocation if preferred is None else preferred,
        pre_start=spec.pre_start or pre_start,
        allocate=replace(spec.allocate, envs=envs),
    )


def _load_config(path: str) -> dict[str, Any]:
    import yaml

    from devctl.node.files import FileReadError, read_file
    from devctl.plugin.spec import SpecError

    try:
        data = yaml.safe_load(read_file(path))
    except FileReadError as e:
        raise SpecError(str(e)) from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping like a scenario `resources:` entry")
    return data


async def _serve(spec: PluginSpec, opts: GlobalOptions, *, register: bool, force: bool) -> None:
    import asyncio

    from devctl.plugin.control import default_control_dir
    from devctl.plugin.guard import live_server_for
    from devctl.plugin.server import DevicePluginServer, ServeError

    paths = opts.paths()
    control_dir = default_control_dir(paths.root)
    if register and not force:
        live = await live_server_for(spec.resource, paths, opts.timeout, control_dir=control_dir)
        if live is not None:
            fail(
                f"{spec.resource} is already served by the live plugin at {live}; registering it again "
                "would take it from that plugin (use --force to do it anyway)"
            )
    server = DevicePluginServer(spec, paths.plugins_dir, register=register, control_dir=control_dir)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await server.start()
    except (ServeError, OSError) as e:
        await server.stop()
        fail(str(e))
    print(
        f"devctl: serving {spec.resource} ({len(spec.devices)} devices) on {server.socket_path}; "
        f"stop with Ctrl-C. Try: devctl plugin set-health {spec.resource} ID unhealthy",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stopping.wait()
    finally:
        await server.stop()


def _control(ctx: typer.Context, resource: str, request: dict[str, Any]) -> None:
    from devctl.plugin.control import ControlError, control, default_control_dir

    opts = options(ctx)
    control_dir = default_control_dir(opts.paths().root)
    try:
        reply = run(control(control_dir, resource, request, opts.timeout))
    except ControlError as e:  # no plugin serves it, or it did not answer
        fail(str(e), ExitCode.NO_SOURCE)
    if not reply.get("ok"):
        fail(str(reply.get("error", "the plugin refused the request")))


@plugin_app.command("set-health")
def set_health(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(help="The resource a running `devctl plugin serve` serves.")],
    device_id: Annotated[str, typer.Argument(metavar="ID", help="The device to change.")],
    # Case-insensitive: a person pastes "Unhealthy" as devctl devices and the kubelet spell it.
    health: Annotated[Health, typer.Argument(help="healthy or unhealthy.", case_sensitive=False)],
) -> None:
    """Mark a device healthy or unhealthy; every open ListAndWatch stream sees it at once."""
    _control(ctx, resource, {"op": "set-health", "id": device_id, "health": health.value})
    print(f"{resource} {device_id}: {health.value.capitalize()}")


@plugin_app.command("add")
def add(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(help="The resource a running `devctl plugin serve` serves.")],
    device: Annotated[str, typer.Argument(metavar="ID[@NUMA]", help="The new device, e.g. gpu-8@1 or gpu-8@0+1.")],
    health: Annotated[Health, typer.Option("--health", help="Its health.", case_sensitive=False)] = Health.healthy,
) -> None:
    """Add a device to a running plugin."""
    from devctl.plugin.spec import SpecError, parse_device

    try:
        parsed = parse_device(device)
    except SpecError as e:
        fail(str(e))
    _control(ctx, resource, {"op": "add", "id": parsed.id, "numa": list(parsed.numa_nodes), "health": health.value})
    print(f"{resource} {parsed.id}: added")


@plugin_app.command("remove")
def remove(
    ctx: typer.Context,
    resource: Annotated[str, typer.Argument(help="The resource a running `devctl plugin serve` serves.")],
    device_id: Annotated[str, typer.Argument(metavar="ID", help="The device to remove.")],
) -> None:
    """Remove a device from a running plugin."""
    _control(ctx, resource, {"op": "remove", "id": device_id})
    print(f"{resource} {device_id}: removed")


def register(app: typer.Typer) -> None:
    """Add `devctl plugin …` to the app."""
    app.add_typer(plugin_app, name="plugin")
