"""Calling one DRA driver by hand (``devctl call --dra DRIVER``): find the driver by its GetInfo name, as the
kubelet finds it, and make one RPC under the deadline.

``info`` is GetInfo on the driver's registration socket (and whether its endpoint connects); ``health`` reads one
message of its NodeWatchResources stream (``v1``, else ``v1alpha1``) and cancels it; ``prepare`` and ``unprepare``
call NodePrepareResources / NodeUnprepareResources for one claim and change node state, so ``call_driver`` refuses
them (``NeedsConsent``, before any socket is touched) unless ``changes_state`` is given.

``call_driver`` returns a ``DraCallResult`` or raises one typed failure: ``RpcFailure`` (the driver cannot be
reached or refuses; ``RegistryDenied``, one of them, when no registration socket lets devctl in),
``UnknownDriver``, ``UnknownClaim`` or ``NotOffered``. The words of a request and the rule for the RPCs that
change state are in ``devctl.core.callwords``.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from devctl.base.errors import DevctlError, ErrorKind
from devctl.core.callwords import DRA_METHODS, DraCallResult, DraRequest, NeedsConsent, dra_refusal
from devctl.model import PluginStatus
from devctl.node.connect import RpcFailure, check_socket

if TYPE_CHECKING:
    from devctl.model import NodePaths
    from devctl.node.dra import Driver
    from devctl.node.dra_call import ClaimRef

__all__ = ["NotOffered", "RegistryDenied", "UnknownClaim", "UnknownDriver", "call_driver"]


class UnknownDriver(DevctlError):
    """No registered DRA driver has the name given (exit 1, with a guess)."""

    kind = ErrorKind.MISSING


class UnknownClaim(DevctlError):
    """The claim is not in dra_manager_state and no UID was given (exit 1, with a guess)."""

    kind = ErrorKind.MISSING


class NotOffered(DevctlError):
    """The driver answers but does not offer what was asked (a health service, a DRA API devctl speaks): exit 1."""

    kind = ErrorKind.UNIMPLEMENTED


class RegistryDenied(RpcFailure):
    """No DRA driver answered because every registration socket refused devctl (connecting needs write permission
    on them): an RpcFailure whose message says where; a face adds how to get the rights (exit 3)."""

    def __init__(self, message: str):
        super().__init__(PluginStatus.PERMISSION_DENIED, message)


async def call_driver(
    paths: NodePaths, timeout: float, name: str, request: DraRequest, *, changes_state: bool = False
) -> DraCallResult:
    """Find the driver ``name``, then make the one RPC of ``request``, each step under ``timeout``.

    Raises NeedsConsent (before any socket) for prepare/unprepare without ``changes_state``; RpcFailure,
    RegistryDenied, UnknownDriver, UnknownClaim or NotOffered.
    """
    why = dra_refusal(request)
    if why is not None and not changes_state:
        raise NeedsConsent(why)
    driver = await _driver(paths, timeout, name)
    start = time.perf_counter()
    ref = None
    if request.rpc == "info":
        socket = driver.registration
        reply = await _info(paths, driver, timeout)
    elif request.rpc == "health":
        socket = driver.endpoint
        reply = await _health(driver, timeout)
    else:
        socket = driver.endpoint
        label = _api(driver)
        ref = await _claim_ref(paths, timeout, driver.name, request)
        start = time.perf_counter()
        reply = await _change(driver, label, ref, request.rpc, timeout)
    latency = (time.perf_counter() - start) * 1000
    return DraCallResult(driver.name, socket, request.plain(ref), reply, round(latency, 3), DRA_METHODS[request.rpc])


def _unreachable(paths: NodePaths) -> None:
    """Raise why no DRA driver answered when it is not the name: a root that is no node, or no rights (exit 3).

    As the read commands say them: the kubelet's dirs missing, or registration
    sockets that devctl may not connect to (that needs write permission on them).
    """
    from devctl.node.paths import not_a_node
    from devctl.node.sockets import registry_sockets

    if not os.path.isdir(paths.plugins_dir):
        raise RpcFailure(PluginStatus.NO_PLUGIN, not_a_node(paths))
    try:
        sockets = registry_sockets(paths.plugins_registry, paths.root)
    except OSError:
        return
    if sockets and not any(os.access(s.real, os.W_OK) for s in sockets):
        raise RegistryDenied(
            f"the DRA registration sockets in {paths.plugins_registry} refused devctl (permission denied)"
        )


async def _driver(paths: NodePaths, timeout: float, name: str) -> Driver:
    from devctl.node.dra import find_drivers

    drivers = await find_drivers(paths, timeout)
    if name in drivers:
        return drivers[name]
    if not drivers:
        _unreachable(paths)
    # Only now the readers of a whole node (collect: most of a cold start), as a driver found needs none of them.
    from devctl.base.names import likely, not_found
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
    elif likely(name, known) is None:  # no guess offered: list what there is
        message += f" (registered: {', '.join(sorted(drivers))})"
    raise UnknownDriver(message)


async def _claim_ref(paths: NodePaths, timeout: float, driver: str, request: DraRequest) -> ClaimRef:
    """The claim with its UID: from the request's UID, else from dra_manager_state (the entry of that name and
    driver)."""
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


async def _info(paths: NodePaths, driver: Driver, timeout: float) -> dict[str, Any]:
    """GetInfo on the registration socket, and whether the endpoint it names connects."""
    from devctl.node.deviceplugin import registry_info
    from devctl.node.sockets import real_path

    info = await registry_info(real_path(paths.root, driver.registration), timeout)
    status: str
    error: str | None
    try:
        await check_socket(driver.endpoint, timeout)
        status, error = PluginStatus.SERVING.value, None
    except RpcFailure as e:
        status, error = e.status.value, e.message
    return {
        "type": info.type,
        "name": info.name,
        "endpoint": info.endpoint,
        "endpoint_path": driver.endpoint,
        "endpoint_status": status,
        "endpoint_error": error,
        "supported_versions": list(info.supported_versions),
    }


async def _health(driver: Driver, timeout: float) -> dict[str, Any]:
    """One NodeWatchResources message: v1 first, v1alpha1 when v1 is offered but not served."""
    import grpc

    from devctl.node.dra import first_health

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


def _api(driver: Driver) -> str:
    """The DRA service label to call the driver's claims with; NotOffered when it offers none devctl speaks."""
    from devctl.node.dra_call import DRA_APIS, dra_api

    label = dra_api(driver.info.supported_versions)
    if label is None:
        offered = ", ".join(driver.info.supported_versions) or "nothing"
        raise NotOffered(f"{driver.name} offers {offered}: none of {', '.join(DRA_APIS)}, which devctl calls")
    return label


async def _change(driver: Driver, label: str, ref: ClaimRef, rpc: str, timeout: float) -> dict[str, Any]:
    """NodePrepareResources or NodeUnprepareResources of one claim: the devices prepared and the driver's error."""
    from devctl.node.dra_call import change_claim

    answer = await change_claim(driver.endpoint, driver.name, label, DRA_METHODS[rpc], ref, timeout)
    claim: dict[str, Any] = {"devices": answer.devices, "error": answer.error or None}
    if rpc == "unprepare":
        claim.pop("devices")
    return {"version": label, "claims": {answer.uid: claim}}
