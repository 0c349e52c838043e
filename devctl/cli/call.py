"""``devctl call``: one DevicePlugin RPC against one plugin, to debug a plugin by hand.

``devctl call RESOURCE RPC ...`` finds the resource's socket the way ``devctl
plugins`` names sockets; ``devctl call --socket PATH RPC ...`` skips that. The
command parses, refuses what it must (``allocate`` and ``prestart`` without
``--yes``), makes the call through the core's use-case (``devctl.core.calls``)
and prints the reply. ``devctl call --dra DRIVER RPC ...`` calls a DRA driver
instead (``call_dra``, ``devctl.core.calls_dra``). Only typer, the standard
library and the call's words (``devctl.core.callwords``) are imported at module level.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from devctl.cli.common import AS_ROOT, ExitCode, fail, options, run, socket_path
from devctl.cli.complete import call_words, drivers
from devctl.core.callwords import CHANGES_STATE, METHODS, CallResult, Request, refusal

if TYPE_CHECKING:
    from devctl.cli.common import GlobalOptions
    from devctl.core.calls import RpcFailure
    from devctl.render.table import TableStyle

__all__ = [
    "CHANGES_STATE",
    "METHODS",
    "CallOutput",
    "CallResult",
    "Request",
    "call",
    "parse",
    "register",
    "reply_table",
]


class CallOutput(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


def call(
    ctx: typer.Context,
    args: Annotated[
        list[str],
        typer.Argument(
            metavar="[RESOURCE] RPC [ID...]",
            help="The resource (unless --socket or --dra), then options, list, preferred, allocate or prestart, "
            "then device IDs (allocate, prestart; candidates for preferred). "
            "With --dra: info, health, prepare or unprepare, then the claim as NAMESPACE/NAME.",
            show_default=False,
            autocompletion=call_words,
        ),
    ],
    socket: Annotated[
        str | None,
        typer.Option("--socket", metavar="PATH", help="Call this socket (a bare name is in the plugins dir)."),
    ] = None,
    available: Annotated[
        list[str] | None,
        typer.Option("--available", metavar="ID", help="preferred: candidate devices; repeatable, or comma-separated."),
    ] = None,
    must_include: Annotated[
        list[str] | None,
        typer.Option("--must-include", metavar="ID", help="preferred: devices chosen already; repeatable."),
    ] = None,
    size: Annotated[
        int | None, typer.Option("--size", min=1, metavar="N", help="preferred: how many devices the container needs.")
    ] = None,
    dra: Annotated[
        str | None,
        typer.Option(
            "--dra",
            metavar="DRIVER",
            help="Call this DRA driver (its GetInfo name), not a device plugin.",
            autocompletion=drivers,
        ),
    ] = None,
    claim: Annotated[
        str | None,
        typer.Option("--claim", metavar="NAMESPACE/NAME", help="--dra prepare/unprepare: the claim."),
    ] = None,
    uid: Annotated[
        str | None,
        typer.Option(
            "--uid", metavar="UID", help="--dra prepare/unprepare: the claim's UID [default: from dra_manager_state]."
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", "-y", help="Really call allocate, prestart, or a DRA prepare/unprepare: they change device state."
        ),
    ] = False,
    output: Annotated[CallOutput, typer.Option("--output", "-o", help="table, json or yaml.")] = CallOutput.table,
) -> None:
    """Make one RPC against a device plugin or a DRA driver (--dra) and print the reply.

    A plugin: options, list, preferred, allocate, prestart.

    list is the first ListAndWatch list. preferred asks GetPreferredAllocation
    with --available, --must-include and --size. allocate and prestart take
    device IDs and need --yes, because a plugin may change a device's state
    for them. With --dra DRIVER: info (GetInfo on its registration socket),
    health (one NodeWatchResources message), prepare and unprepare (one claim,
    NAMESPACE/NAME; they need --yes). Exit 3 when the plugin cannot be reached
    or does not answer in --timeout; exit 1 when it answers with an error.
    """
    opts = options(ctx)
    if opts.from_file:
        fail("--from: call talks to a live plugin; a snapshot file has none")
    if dra is not None:
        if socket is not None or available or must_include or size is not None:
            fail("--dra calls a DRA driver: --socket, --available, --must-include and --size belong to device plugins")
        _call_dra(opts, dra, args, claim, uid, yes, output)
    if claim is not None or uid is not None:
        fail("--claim and --uid belong to --dra prepare and unprepare")
    resource, request = parse(args, socket, available or [], must_include or [], size)
    why = refusal(request)
    if why is not None and not yes:
        fail(why)
    from devctl.core.calls import RpcFailure, UnknownResource, call_plugin

    paths = opts.paths()
    path = socket_path(socket, paths.plugins_dir) if socket is not None else None
    try:
        result = run(call_plugin(paths, opts.timeout, resource, path, request, changes_state=yes))
    except RpcFailure as e:
        fail(e.message, _exit_code(e))
    except UnknownResource as e:
        fail(str(e), ExitCode.FINDINGS)
    _print(result, output)


def _call_dra(
    opts: GlobalOptions,
    driver: str,
    args: Sequence[str],
    claim: str | None,
    uid: str | None,
    yes: bool,
    output: CallOutput,
) -> NoReturn:
    """``call --dra``: parse, refuse a state change without --yes (before any socket), call, print, exit."""
    from devctl.cli.call_dra import parse_dra, print_dra, refuse_without_yes

    request = parse_dra(args, claim, uid)
    if not yes:
        refuse_without_yes(request)
    from devctl.core.calls import RpcFailure
    from devctl.core.calls_dra import NotOffered, RegistryDenied, UnknownClaim, UnknownDriver, call_driver

    try:
        result = run(call_driver(opts.paths(), opts.timeout, driver, request, changes_state=yes))
    except RegistryDenied as e:
        fail(f"{e.message}: {AS_ROOT}", _exit_code(e))
    except RpcFailure as e:
        fail(e.message, _exit_code(e))
    except (UnknownDriver, UnknownClaim, NotOffered) as e:
        fail(str(e), ExitCode.FINDINGS)
    raise typer.Exit(int(print_dra(result, output.value)))


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(i for v in values for i in v.split(",") if i)


def parse(
    args: Sequence[str], socket: str | None, available: Sequence[str], must_include: Sequence[str], size: int | None
) -> tuple[str | None, Request]:
    """The resource (None with --socket) and the request; a command line that makes no sense exits 2."""
    rest = list(args)
    resource = None
    if socket is None:
        if not rest or rest[0] in METHODS:
            fail("name the plugin: a RESOURCE (e.g. nvidia.com/gpu) or --socket PATH, before the RPC")
        resource = rest.pop(0)
    elif rest and "/" in rest[0]:
        fail(f"give a RESOURCE or --socket, not both ({rest[0]} and --socket {socket})")
    if not rest:
        fail(f"which RPC? one of {', '.join(METHODS)}")
    rpc, ids = rest[0], _split(rest[1:])
    if rpc not in METHODS:
        fail(f"unknown RPC {rpc!r}: one of {', '.join(METHODS)}")
    if rpc != "preferred" and (available or must_include or size is not None):
        fail("--available, --must-include and --size belong to preferred")
    if rpc in ("options", "list") and ids:
        fail(f"{rpc} takes no device IDs")
    if rpc in CHANGES_STATE and not ids:
        fail(f"{rpc} needs the device IDs to {rpc}")
    if rpc == "preferred":
        candidates = tuple(dict.fromkeys((*ids, *_split(available))))
        if not candidates or size is None:
            fail("preferred needs the candidates (--available ID...) and the request's --size N")
        return resource, Request(rpc, available=candidates, must_include=_split(must_include), size=size)
    return resource, Request(rpc, device_ids=ids)


def _exit_code(e: RpcFailure) -> ExitCode:
    """3 when the plugin could not be reached or gave no usable reply; 1 when it answered with an error status."""
    from devctl.core.calls import unreachable

    return ExitCode.NO_SOURCE if unreachable(e) else ExitCode.FINDINGS


# --- printing ------------------------------------------------------------------------------------


def _print(result: CallResult, output: CallOutput) -> None:
    from devctl.render import structured

    if output != CallOutput.table:
        doc = structured.document(
            {
                "socket": result.socket,
                "resource": result.resource,
                "rpc": METHODS[result.request.rpc],
                "request": result.request.plain(),
                "reply": result.reply,
                "latency_ms": result.latency_ms,
            }
        )
        sys.stdout.write(structured.to_json(doc) if output == CallOutput.json else structured.to_yaml(doc))
        return
    from devctl.render.style import use_color
    from devctl.render.table import TableStyle

    text = reply_table(result, TableStyle(color=use_color(sys.stdout)))
    if text:
        sys.stdout.write(text)
    else:
        print(f"{METHODS[result.request.rpc]}: the plugin answered with nothing in it", file=sys.stderr)


def reply_table(result: CallResult, style: TableStyle) -> str:
    """The reply as a table: options, devices, preferred IDs, or what Allocate gives the container."""
    from devctl.base.escape import escape
    from devctl.render.style import word
    from devctl.render.table import grid

    rpc, reply = result.request.rpc, result.reply
    if rpc == "options":

        def flag(on: bool) -> str:
            return word("yes" if on else "no", style.color)

        row = [flag(reply.pre_start_required), flag(reply.get_preferred_allocation_available)]
        return grid(["pre-start-required", "preferred-allocation"], [row], style)
    if rpc == "list":
        rows = [[d.id, word(d.health, style.color), ",".join(map(str, d.numa_nodes))] for d in reply["devices"]]
        return grid(["id", "health", "numa"], rows, style)
    if rpc == "preferred":
        return grid(["preferred"], [[i] for i in reply["device_ids"]], style)
    if rpc == "allocate":
        rows = [
            *(["env", k, v] for k, v in reply.envs.items()),
            *(["device", d.container_path, f"{d.host_path} {d.permissions}"] for d in reply.devices),
            *(["mount", m.container_path, m.host_path + (" ro" if m.read_only else "")] for m in reply.mounts),
            *(["annotation", k, v] for k, v in reply.annotations.items()),
            *(["cdi", name, ""] for name in reply.cdi_devices),
        ]
        return grid(["kind", "name", "value"], rows, style)
    return f"{METHODS[rpc]} {escape(','.join(result.request.device_ids))}: ok\n"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("call")(call)
