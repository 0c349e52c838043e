"""``devctl call --dra DRIVER``: one RPC against a DRA driver, to debug a driver by hand.

``info`` is GetInfo on the driver's registration socket (and whether its
endpoint connects); ``health`` reads one message of its NodeWatchResources
stream (``v1``, else ``v1alpha1``) and cancels it; ``prepare`` and
``unprepare`` call NodePrepareResources / NodeUnprepareResources for one claim
and change node state, so they refuse without ``--yes`` before any socket is
touched. The driver is found by its GetInfo name, as the kubelet finds it.
Every RPC runs under ``--timeout``. The call itself is the core's use-case
(``devctl.core.calls_dra.call_driver``); this module parses, refuses and
prints. Only typer, the standard library and the call's words
(``devctl.core.callwords``) are imported at module level.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from devctl.cli.common import ExitCode, fail, say
from devctl.core.callwords import DRA_CHANGES_STATE, DRA_METHODS, DraCallResult, DraRequest, dra_refusal

if TYPE_CHECKING:
    from devctl.render.table import TableStyle

__all__ = [
    "DRA_CHANGES_STATE",
    "DRA_METHODS",
    "DraCallResult",
    "DraRequest",
    "dra_table",
    "failed",
    "parse_dra",
    "print_dra",
    "refuse_without_yes",
]


def parse_dra(args: Sequence[str], claim: str | None, uid: str | None) -> DraRequest:
    """The request after ``--dra DRIVER``; a command line that makes no sense exits 2."""
    if not args:
        fail(f"which RPC? one of {', '.join(DRA_METHODS)}")
    rpc, rest = args[0], list(args[1:])
    if rpc not in DRA_METHODS:
        fail(f"unknown DRA RPC {rpc!r}: one of {', '.join(DRA_METHODS)}")
    if rpc in ("info", "health"):
        if rest or claim or uid:
            fail(f"{rpc} takes no claim")
        return DraRequest(rpc)
    if len(rest) > 1 or (rest and claim):
        fail(f"{rpc} takes one claim: NAMESPACE/NAME (or --claim NAMESPACE/NAME)")
    name = rest[0] if rest else claim
    if not name:
        fail(f"{rpc} needs a claim: NAMESPACE/NAME, with --uid UID unless dra_manager_state has it")
    namespace, sep, short = name.partition("/")
    if not sep or not namespace or not short or "/" in short:
        fail(f"claim {name!r}: give it as NAMESPACE/NAME")
    if uid is not None and not uid:
        fail("--uid: empty")
    return DraRequest(rpc, name, uid)


def refuse_without_yes(request: DraRequest) -> None:
    """Exit 2 before touching any socket when a state-changing RPC lacks --yes."""
    why = dra_refusal(request)
    if why:
        fail(why)


def failed(result: DraCallResult) -> list[str]:
    """The per-claim errors of a prepare/unprepare reply: the driver answered, but refused."""
    claims = result.reply.get("claims", {}) if isinstance(result.reply, dict) else {}
    return [f"{result.rpc} {uid}: {c['error']}" for uid, c in claims.items() if c.get("error")]


# --- printing ------------------------------------------------------------------------------------


def print_dra(result: DraCallResult, output: str) -> ExitCode:
    """Print the reply (table, json or yaml); exit 1 when the driver refused a claim."""
    from devctl.render import structured

    if output != "table":
        doc = structured.document(
            {
                "kind": "dra",
                "socket": result.socket,
                "resource": result.driver,
                "rpc": result.rpc,
                "request": result.request,
                "reply": result.reply,
                "latency_ms": result.latency_ms,
            }
        )
        sys.stdout.write(structured.to_json(doc) if output == "json" else structured.to_yaml(doc))
    else:
        from devctl.render.style import use_color
        from devctl.render.table import TableStyle

        text = dra_table(result, TableStyle(color=use_color(sys.stdout)))
        if text:
            sys.stdout.write(text)
        else:
            say(f"{result.rpc}: the driver answered with nothing in it")
    errors = failed(result)
    for line in errors:
        say(line)
    return ExitCode.FINDINGS if errors else ExitCode.OK


def dra_table(result: DraCallResult, style: TableStyle) -> str:
    """The reply as a table: the driver's info, its devices' health, or the claim's devices."""
    from datetime import datetime, timezone

    from devctl.base.escape import escape
    from devctl.render.style import word
    from devctl.render.table import grid

    reply = result.reply
    if result.rpc == "GetInfo":
        rows = [
            ["type", reply["type"]],
            ["name", reply["name"]],
            ["endpoint", reply["endpoint"] or "(the registration socket)"],
            ["endpoint path", reply["endpoint_path"]],
            ["endpoint status", word(reply["endpoint_status"], style.color)],
            ["supported versions", ", ".join(reply["supported_versions"])],
        ]
        if reply["endpoint_error"]:
            rows.append(["endpoint error", reply["endpoint_error"]])
        return grid(["field", "value"], rows, style)
    if result.rpc == "NodeWatchResources":

        def when(t: int | None) -> str:
            if not t:
                return "<none>"
            try:
                return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S")
            except (OverflowError, OSError, ValueError):  # beyond what a date can be (2^63-1): the number as sent
                return str(t)

        rows = [
            [
                f"{d.pool}/{d.device}",
                word(d.health, style.color),
                when(d.last_updated),
                f"{d.timeout_seconds}s",
                d.message,
            ]
            for d in reply["devices"]
        ]
        return grid(["device", "health", "updated", "timeout", "message"], rows, style)
    claims = reply["claims"]
    if result.rpc == "NodePrepareResources":
        rows = [
            [uid, f"{d.pool}/{d.device}", ",".join(d.requests) or "*", ",".join(d.cdi_devices)]
            for uid, c in claims.items()
            for d in c["devices"]
        ]
        return grid(["claim uid", "device", "requests", "cdi devices"], rows, style) if rows else ""
    ok = [uid for uid, c in claims.items() if not c.get("error")]
    return "".join(f"{result.rpc} {escape(uid)}: ok\n" for uid in ok)
