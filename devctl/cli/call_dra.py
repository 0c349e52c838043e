"""``devctl call --dra DRIVER``: one RPC against a DRA driver, to debug a driver by hand.

``info`` is GetInfo on the driver's registration socket (and whether its
endpoint connects); ``health`` reads one message of its NodeWatchResources
stream (``v1``, else ``v1alpha1``) and cancels it; ``prepare`` and
``unprepare`` call NodePrepareResources / NodeUnprepareResources for one claim
and change node state, so they refuse without ``--yes`` before any socket is
touched. The driver is found by its GetInfo name, as the kubelet finds it.
Every RPC runs under ``--timeout``. Only typer and the standard library are
imported at module level.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devctl.cli.common import AS_ROOT, ExitCode, fail, say

if TYPE_CHECKING:
    from devctl.model import NodePaths
    from devctl.node.dra import Driver
    from devctl.node.dra_call import ClaimRef
    from devctl.render.table import TableStyle

# The RPC words after ``--dra DRIVER`` and what they call.
DRA_METHODS = {
    "info": "GetInfo",
    "health": "NodeWatchResources",
    "prepare": "NodePrepareResources",
    "unprepare": "NodeUnprepareResources",
}
# A driver sets devices up and writes CDI specs for a claim, or tears them down:
# the node's state changes under the kubelet's feet, so these need --yes.
DRA_CHANGES_STATE = {
    "prepare": "sets up the claim's devices and writes their CDI specs",
    "unprepare": "tears down the claim's devices and removes their CDI specs, even while a pod uses them",
}


@dataclass(frozen=True)
class DraRequest:
    """What the command line asks of the driver: the RPC word and, for prepare/unprepare, the claim."""

    rpc: str  # a key of DRA_METHODS
    claim: str | None = None  # NAMESPACE/NAME
    uid: str | None = None

    def plain(self, ref: ClaimRef | None) -> dict[str, Any]:
        if ref is None:
            return {}
        return {"claims": [{"namespace": ref.namespace, "name": ref.name, "uid": ref.uid}]}


class UnknownDriver(Exception):
    """No registered DRA driver has the name given (exit 1, with a guess)."""


class UnknownClaim(Exception):
    """The claim is not in dra_manager_state and no --uid was given (exit 1, with a guess)."""


class NotOffered(Exception):
    """The driver answers but does not offer what was asked (a health service, a DRA API devctl speaks): exit 1."""


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
    why = DRA_CHANGES_STATE.get(request.rpc)
    if why:
        fail(
            f"{request.rpc} calls {DRA_METHODS[request.rpc]}, which changes node state (the driver {why}): "
            "add --yes to call it"
        )


@dataclass(frozen=True)
class DraCallResult:
    driver: str
    socket: str  # the socket called: the registration socket (info) or the endpoint
    request: dict[str, Any]
    reply: Any  # model objects and plain values, as devctl.model.serial shapes them
    latency_ms: float
    rpc: str


def _unreachable(paths: NodePaths) -> None:
    """Raise why no DRA driver answered when it is not the name: a root that is no node, or no rights (exit 3).

    As the read commands say them: the kubelet's dirs missing, or registration
    sockets that devctl may not connect to (that needs write permission on them).
    """
    import os

    from devctl.model import PluginStatus
    from devctl.node.paths import not_a_node
    from devctl.node.rpc import RpcFailure
    from devctl.node.sockets import registry_sockets

    if not os.path.isdir(paths.plugins_dir):
        raise RpcFailure(PluginStatus.NO_PLUGIN, not_a_node(paths))
    try:
        sockets = registry_sockets(paths.plugins_registry, paths.root)
    except OSError:
        return
    if sockets and not any(os.access(s.real, os.W_OK) for s in sockets):
        raise RpcFailure(
            PluginStatus.PERMISSION_DENIED,
            f"the DRA registration sockets in {paths.plugins_registry} refused devctl (permission denied): {AS_ROOT}",
        )


async def _driver(paths: NodePaths, timeout: float, name: str) -> Driver:
    from devctl.base.names import not_found
    from devctl.node.dra import find_drivers

    drivers = await find_drivers(paths, timeout)
    if name in drivers:
        return drivers[name]
    if not drivers:
        _unreachable(paths)
    from devctl.core.collect import collect
    from devctl.model import DRA_CHECKPOINT

    # A driver that is gone may still hold claims: its name is a guess worth offering too.
    snapshot = await collect(paths, timeout, want={DRA_CHECKPOINT})
    known = set(drivers)
    if snapshot.dra_checkpoint is not None:
        known |= {d for c in snapshot.dra_checkpoint.claims for d in c.drivers}
    message = not_found("DRA driver", name, known)
    if name in known:  # in the checkpoint, not registered: say so rather than "did you mean"
        message = f"DRA driver {name} has claims in dra_manager_state but no registration socket answers for it"
    elif not drivers:
        message += f" (no DRA driver answers under {paths.plugins_registry})"
    elif "did you mean" not in message:
        message += f" (registered: {', '.join(sorted(drivers))})"
    raise UnknownDriver(message)


async def _claim_ref(paths: NodePaths, timeout: float, driver: str, request: DraRequest) -> ClaimRef:
    """The claim with its UID: from --uid, else from dra_manager_state (the entry of that name and driver)."""
    from devctl.base.names import not_found
    from devctl.core.collect import collect
    from devctl.model import DRA_CHECKPOINT
    from devctl.node.dra_call import ClaimRef

    assert request.claim is not None
    namespace, _, name = request.claim.partition("/")
    if request.uid:
        return ClaimRef(namespace, name, request.uid)
    snapshot = await collect(paths, timeout, want={DRA_CHECKPOINT})
    claims = snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint is not None else ()
    for c in claims:
        if (c.namespace, c.name) == (namespace, name) and (driver in c.drivers or not c.drivers):
            return ClaimRef(namespace, name, c.uid)
    known = {f"{c.namespace}/{c.name}" for c in claims if driver in c.drivers}
    raise UnknownClaim(
        not_found("claim", request.claim, known) + f" in {paths.dra_checkpoint} for {driver}; give its --uid UID"
    )


async def call_dra(paths: NodePaths, timeout: float, name: str, request: DraRequest) -> DraCallResult:
    """Find the driver, then make the one RPC; raises RpcFailure, UnknownDriver, UnknownClaim or NotOffered."""
    from devctl.model import PluginStatus
    from devctl.node.deviceplugin import registry_info
    from devctl.node.dra_call import DRA_APIS, change_claim, dra_api
    from devctl.node.rpc import RpcFailure, check_socket
    from devctl.node.sockets import real_path

    driver = await _driver(paths, timeout, name)
    start = time.perf_counter()
    ref = None
    if request.rpc == "info":
        socket = driver.registration
        info = await registry_info(real_path(paths.root, socket), timeout)
        try:
            await check_socket(driver.endpoint, timeout)
            status, error = PluginStatus.SERVING.value, None
        except RpcFailure as e:
            status, error = e.status.value, e.message
        reply: Any = {
            "type": info.type,
            "name": info.name,
            "endpoint": info.endpoint,
            "endpoint_path": driver.endpoint,
            "endpoint_status": status,
            "endpoint_error": error,
            "supported_versions": list(info.supported_versions),
        }
    elif request.rpc == "health":
        socket = driver.endpoint
        reply = await _health(driver, timeout)
    else:
        socket = driver.endpoint
        label = dra_api(driver.info.supported_versions)
        if label is None:
            offered = ", ".join(driver.info.supported_versions) or "nothing"
            raise NotOffered(f"{driver.name} offers {offered}: none of {', '.join(DRA_APIS)}, which devctl calls")
        ref = await _claim_ref(paths, timeout, driver.name, request)
        start = time.perf_counter()
        answer = await change_claim(socket, driver.name, label, DRA_METHODS[request.rpc], ref, timeout)
        reply = {"version": label, "claims": {answer.uid: {"devices": answer.devices, "error": answer.error or None}}}
        if request.rpc == "unprepare":
            reply["claims"][answer.uid].pop("devices")
    latency = (time.perf_counter() - start) * 1000
    return DraCallResult(driver.name, socket, request.plain(ref), reply, round(latency, 3), DRA_METHODS[request.rpc])


async def _health(driver: Driver, timeout: float) -> dict[str, Any]:
    """One NodeWatchResources message: v1 first, v1alpha1 when v1 is offered but not served."""
    import grpc

    from devctl.node.dra import first_health
    from devctl.node.rpc import RpcFailure, check_socket

    if not driver.versions:
        raise NotOffered(f"{driver.name}: the driver offers no health service (DRAResourceHealth)")
    await check_socket(driver.endpoint, timeout)
    unserved = None
    for version in driver.versions:
        try:
            devices = await first_health(driver.endpoint, version, timeout)
        except RpcFailure as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:
                unserved = e
                continue
            raise
        return {"version": version, "devices": devices}
    assert unserved is not None
    raise unserved


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
