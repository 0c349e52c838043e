"""DRA claims on the node (``devctl claims``): dra_manager_state joined with pod-resources, health and CDI.

An entry in ``dra_manager_state`` is written before the driver prepares it and
removed only when unprepare succeeds for its last pod, so the file alone proves
nothing. The state of a claim says what holds: ``driver-missing`` (a driver of
it has no live endpoint: its pods cannot terminate, nothing can unprepare it),
``prepared`` (a running container uses it, per pod-resources), ``checkpointed``
(a pod of it runs here but no container uses it yet), ``stale`` (no pod of it
runs here). With pod-resources unread, the state is None unless the driver is
missing: unknown is not guessed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from devctl.analyze.cdi import Resolver, numa_of_nodes, resolver
from devctl.model import ClaimDevice, DraDeviceHealth, NodeSnapshot, PluginStatus, PodResources

PREPARED = "prepared"
CHECKPOINTED = "checkpointed"
STALE = "stale"
DRIVER_MISSING = "driver-missing"
UNKNOWN_HEALTH = "Unknown"
DRA_TYPE = "DRAPlugin"


@dataclass(frozen=True)
class ClaimPod:
    uid: str | None
    namespace: str | None
    name: str | None
    running: bool | None  # None: pod-resources unread


@dataclass(frozen=True)
class ClaimDeviceRow:
    driver: str
    pool: str
    device: str
    requests: tuple[str, ...]
    share_id: str | None
    cdi_devices: tuple[str, ...]
    health: str | None  # Healthy | Unhealthy | Unknown; None: no health stream read
    health_message: str | None
    numa_nodes: tuple[int, ...]
    cdi_resolved: bool | None  # every CDI name resolves; None when it has none


@dataclass(frozen=True)
class ClaimRow:
    namespace: str
    name: str
    uid: str | None  # None: pod-resources names it, dra_manager_state does not
    state: str | None
    pods: tuple[ClaimPod, ...]
    devices: tuple[ClaimDeviceRow, ...]
    drivers: tuple[str, ...] = ()
    duplicate_devices: int = 0


def live_drivers(snapshot: NodeSnapshot) -> dict[str, bool]:
    """Driver -> whether its endpoint answers, for every DRA driver whose registration answered GetInfo."""
    live: dict[str, bool] = {}
    for p in snapshot.plugins:
        if p.registry is not None and p.registry.type == DRA_TYPE and p.registry.name:
            ok = p.dra is not None and p.dra.status == PluginStatus.SERVING
            live[p.registry.name] = live.get(p.registry.name, False) or ok
    return live


def device_health(snapshot: NodeSnapshot, now: float | None = None) -> dict[tuple[str, str, str], DraDeviceHealth]:
    """(driver, pool, device) -> health as the kubelet would read it: Unknown once older than its timeout.

    Older as of when the stream was read (``now`` when given): a ``--from``
    snapshot answers as its node did then, not with every device gone Unknown
    half a minute later (as doctor judges it, devctl.doctor_dra).
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


def _users(snapshot: NodeSnapshot) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(claim ns, claim name) -> the running pods (ns, name) whose containers use it, per pod-resources."""
    users: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for p in snapshot.pods or ():
        for c in p.containers:
            for dr in c.dynamic_resources:
                users.setdefault((dr.claim_namespace, dr.claim_name), set()).add((p.namespace, p.name))
    return users


def claims_view(
    snapshot: NodeSnapshot, namespace: str | None = None, names: list[str] | None = None
) -> tuple[ClaimRow, ...]:
    """One row per claim in dra_manager_state (and per claim pod-resources names that the file lacks)."""
    identities = {i.uid: i for i in snapshot.pod_identities}
    running = {(p.namespace, p.name) for p in snapshot.pods} if snapshot.pods is not None else None
    users = _users(snapshot)
    live = live_drivers(snapshot)
    health = device_health(snapshot)
    cdi = resolver(snapshot)
    rows = []
    seen = set()
    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        key = (c.namespace, c.name)
        seen.add(key)
        pods = []
        for uid in c.pod_uids:
            ident = identities.get(uid)
            ns, name = (ident.namespace, ident.name) if ident and ident.name else (None, None)
            # pod-resources lists running pods by name; a UID no source names any more is a pod gone
            # (its log dir goes with it), as for the device manager's checkpoint entries.
            up = None if running is None else ns is not None and (ns, name) in running
            pods.append(ClaimPod(uid, ns, name, up))
        named = {(p.namespace, p.name) for p in pods}
        for ns, name in sorted(users.get(key, set()) - named):
            pods.append(ClaimPod(None, ns, name, True))
        devices = tuple(
            _device(d.driver, d.pool, d.device, d.requests, d.share_id, d.cdi_devices, health, cdi) for d in c.devices
        )
        if any(not live.get(d, False) for d in c.drivers):
            state = None if snapshot.plugins_incomplete else DRIVER_MISSING  # unknown while sockets answer
        elif running is None:
            state = None
        elif users.get(key):
            state = PREPARED
        elif any(p.running for p in pods):
            state = CHECKPOINTED
        else:
            state = STALE
        rows.append(ClaimRow(c.namespace, c.name, c.uid, state, tuple(pods), devices, c.drivers, c.duplicate_devices))
    # Claims pod-resources reports that the checkpoint does not hold (it could not be read, or lags).
    extra: dict[tuple[str, str], tuple[set[tuple[str, str]], dict[tuple[str, str, str], tuple[str, ...]]]] = {}
    for p in snapshot.pods or ():
        for ctr in p.containers:
            for dr in ctr.dynamic_resources:
                key = (dr.claim_namespace, dr.claim_name)
                if key in seen:
                    continue
                entry = extra.setdefault(key, (set(), {}))
                entry[0].add((p.namespace, p.name))
                for d in dr.devices:
                    entry[1].setdefault((d.driver, d.pool, d.device), d.cdi_devices)
    for (ns, name), (pods_of, devs) in sorted(extra.items()):
        devices = tuple(_device(dv, pl, de, (), None, cdis, health, cdi) for (dv, pl, de), cdis in devs.items())
        drivers = tuple(sorted({d.driver for d in devices}))
        state = PREPARED
        if any(not live.get(d, False) for d in drivers):
            state = None if snapshot.plugins_incomplete else DRIVER_MISSING
        claim_pods = tuple(ClaimPod(None, pns, pname, True) for pns, pname in sorted(pods_of))
        rows.append(ClaimRow(ns, name, None, state, claim_pods, devices, drivers))
    rows.sort(key=lambda r: (r.namespace, r.name))
    if namespace is not None:
        rows = [r for r in rows if r.namespace == namespace]
    if names:
        rows = [r for r in rows if r.name in names or f"{r.namespace}/{r.name}" in names]
    return tuple(rows)


def _device(
    driver: str,
    pool: str,
    device: str,
    requests: Iterable[str],
    share_id: str | None,
    cdi_devices: Iterable[str],
    health: Mapping[tuple[str, str, str], DraDeviceHealth],
    cdi: Resolver,
) -> ClaimDeviceRow:
    h = health.get((driver, pool, device))
    cdi_devices = tuple(cdi_devices)
    nodes = [cdi.device_nodes(n) for n in cdi_devices]  # None: not resolved
    return ClaimDeviceRow(
        driver=driver,
        pool=pool,
        device=device,
        requests=tuple(requests),
        share_id=share_id,
        cdi_devices=tuple(cdi_devices),
        health=h.health if h else None,
        health_message=(h.message or None) if h else None,
        numa_nodes=numa_of_nodes(n for ns in nodes if ns is not None for n in ns),
        cdi_resolved=all(ns is not None for ns in nodes) if nodes else None,
    )


@dataclass(frozen=True)
class DraCheckpointSection:
    """The ``dra`` part of ``devctl checkpoint``: ``format`` None when the file is absent or unreadable."""

    path: str
    format: str | None
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    claims: tuple[ClaimRow, ...] = ()


def dra_checkpoint_section(snapshot: NodeSnapshot) -> DraCheckpointSection:
    """dra_manager_state's verdict and its claims (those the file holds), each with its state."""
    cp = snapshot.dra_checkpoint
    if cp is None:
        return DraCheckpointSection(snapshot.paths.dra_checkpoint, None, None, None, None)
    claims = tuple(r for r in claims_view(snapshot) if r.uid is not None)
    return DraCheckpointSection(cp.path, cp.format, cp.checksum_ok, cp.checksum, cp.computed_checksum, claims)


def with_claim_health(pods: tuple[PodResources, ...], snapshot: NodeSnapshot) -> tuple[PodResources, ...]:
    """``pods`` with each claim device's health (its driver's stream) and NUMA nodes (its CDI device nodes)."""
    if not any(dr.devices for p in pods for c in p.containers for dr in c.dynamic_resources):
        return pods
    health = device_health(snapshot)
    cdi = resolver(snapshot)

    def device(d: ClaimDevice) -> ClaimDevice:
        h = health.get((d.driver, d.pool, d.device))
        nodes = (n for name in d.cdi_devices for n in cdi.device_nodes(name) or ())
        return replace(d, health=h.health if h else None, numa_nodes=numa_of_nodes(nodes))

    out = []
    for p in pods:
        containers = []
        for c in p.containers:
            if c.dynamic_resources:
                dyn = tuple(replace(dr, devices=tuple(device(d) for d in dr.devices)) for dr in c.dynamic_resources)
                c = replace(c, dynamic_resources=dyn)
            containers.append(c)
        out.append(replace(p, containers=tuple(containers)))
    return tuple(out)
