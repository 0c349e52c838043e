"""What decides a DRA claim's state and a driver's device health: read by the claims view and by `ls`'s driver rows.

`ls` counts each driver's devices by state without making the claims view
(``devctl.analyze.claims``: a row per claim, its pods and devices, their CDI
names resolved); both take the state from :func:`claim_state`, so a claim is
prepared, or its driver missing, by one rule. This module loads no CDI
machinery, so `ls` on a DRA node does not import it (docs/dra.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from devctl.model import DraDeviceHealth, NodeSnapshot, PluginStatus

PREPARED = "prepared"
CHECKPOINTED = "checkpointed"
STALE = "stale"
DRIVER_MISSING = "driver-missing"
UNKNOWN_HEALTH = "Unknown"


def live_drivers(snapshot: NodeSnapshot) -> dict[str, bool]:
    """Driver -> whether its endpoint answers, for every DRA driver whose registration answered GetInfo."""
    live: dict[str, bool] = {}
    for p in snapshot.plugins:
        if p.dra_driver:
            ok = p.dra is not None and p.dra.status == PluginStatus.SERVING
            live[p.dra_driver] = live.get(p.dra_driver, False) or ok
    return live


def device_health(snapshot: NodeSnapshot, now: float | None = None) -> dict[tuple[str, str, str], DraDeviceHealth]:
    """(driver, pool, device) -> health as the kubelet would read it: Unknown once older than its timeout.

    Older as of when the stream was read (``now`` when given): a ``--from``
    snapshot answers as its node did then, not with every device gone Unknown
    half a minute later (as doctor judges it, devctl.analyze.doctor_dra).
    """
    out = {}
    for p in snapshot.plugins:
        if p.registry is None or p.dra is None or p.dra.health is None:
            continue
        at = now if now is not None else (p.dra.read_at or time.time())
        for h in p.dra.health:
            if h.last_updated is not None and h.last_updated + h.timeout_seconds < at and h.health != UNKNOWN_HEALTH:
                h = DraDeviceHealth(h.pool, h.device, UNKNOWN_HEALTH, h.last_updated, h.timeout_seconds, h.message)
            out[(p.registry.name, h.pool, h.device)] = h
    return out


def claim_users(snapshot: NodeSnapshot) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(claim ns, claim name) -> the running pods (ns, name) whose containers use it, per pod-resources."""
    users: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for p in snapshot.pods or ():
        for c in p.containers:
            for dr in c.dynamic_resources:
                users.setdefault((dr.claim_namespace, dr.claim_name), set()).add((p.namespace, p.name))
    return users


def claim_state(
    snapshot: NodeSnapshot, drivers: Sequence[str], live: dict[str, bool], used: bool, running: Iterable[bool | None]
) -> str | None:
    """A claim's state from its drivers, whether a container uses it (``used``) and whether each of its pods runs.

    With pod-resources unread the state is None unless a driver is missing; a
    missing driver is not said while registration sockets are still answering.
    """
    if any(not live.get(d, False) for d in drivers):
        return None if snapshot.plugins_incomplete else DRIVER_MISSING
    if snapshot.pods is None:
        return None
    if used:
        return PREPARED
    if any(running):
        return CHECKPOINTED
    return STALE
