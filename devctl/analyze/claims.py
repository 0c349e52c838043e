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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from devctl.analyze.cdi import Resolver, numa_of_nodes, resolver
from devctl.analyze.claim_state import claim_state, claim_users, device_health, live_drivers
from devctl.model import DRA_CHECKPOINT, ClaimDevice, DraDeviceHealth, NodeSnapshot, PodResources

_DeviceKey = tuple[str, str, str, str | None]  # driver, pool, device, share id


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


def claims_view(
    snapshot: NodeSnapshot, namespace: str | None = None, names: list[str] | None = None
) -> tuple[ClaimRow, ...]:
    """One row per claim in dra_manager_state (and per claim pod-resources names that the file lacks)."""
    identities = {i.uid: i for i in snapshot.pod_identities}
    running = {(p.namespace, p.name) for p in snapshot.pods} if snapshot.pods is not None else None
    users = claim_users(snapshot)
    live = live_drivers(snapshot)
    health = device_health(snapshot)
    cdi = resolver(snapshot)
    rows = []
    seen = set()
    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        key = (c.namespace, c.name)
        seen.add(key)
        pods = []
        named = set()
        for uid in c.pod_uids:
            ident = identities.get(uid)
            ns, name = (ident.namespace, ident.name) if ident and ident.name else (None, None)
            # pod-resources lists running pods by name; a UID no source names any more is a pod gone
            # (its log dir goes with it), as for the device manager's checkpoint entries.
            up = None if running is None else ns is not None and (ns, name) in running
            pods.append(ClaimPod(uid, ns, name, up))
            named.add((ns, name))
        used = users.get(key)
        for ns, name in sorted(used - named) if used else ():
            pods.append(ClaimPod(None, ns, name, True))
        devices = tuple(
            [_device(d.driver, d.pool, d.device, d.requests, d.share_id, d.cdi_devices, health, cdi) for d in c.devices]
        )
        state = claim_state(snapshot, c.drivers, live, bool(used), [p.running for p in pods])
        rows.append(ClaimRow(c.namespace, c.name, c.uid, state, tuple(pods), devices, c.drivers, c.duplicate_devices))
    # Claims pod-resources reports that the checkpoint does not hold (it could not be read, or lags).
    extra: dict[tuple[str, str], tuple[set[tuple[str, str]], dict[_DeviceKey, tuple[str, ...]]]] = {}
    for p in snapshot.pods or ():
        for ctr in p.containers:
            for dr in ctr.dynamic_resources:
                key = (dr.claim_namespace, dr.claim_name)
                if key in seen:
                    continue
                entry = extra.setdefault(key, (set(), {}))
                entry[0].add((p.namespace, p.name))
                for d in dr.devices:
                    entry[1].setdefault((d.driver, d.pool, d.device, d.share_id), d.cdi_devices)
    for (ns, name), (pods_of, devs) in sorted(extra.items()):
        devices = tuple(_device(dv, pl, de, (), sh, cdis, health, cdi) for (dv, pl, de, sh), cdis in devs.items())
        drivers = tuple(sorted({d.driver for d in devices}))
        state = claim_state(snapshot, drivers, live, True, ())  # a container uses it: prepared, unless a driver is gone
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
    names = tuple(cdi_devices)
    numa: set[int] = set()
    resolved = True
    for name in names:  # one pass: a thousand claims' devices (bench/bench_dra.py)
        nodes = cdi.device_nodes(name)
        if nodes is None:
            resolved = False
            continue
        numa.update([n.numa_node for n in nodes if n.numa_node is not None])
    return ClaimDeviceRow(
        driver,
        pool,
        device,
        tuple(requests),
        share_id,
        names,
        h.health if h else None,
        (h.message or None) if h else None,
        tuple(sorted(numa)),  # as numa_of_nodes gives them
        resolved if names else None,
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
    error: str | None = None  # why a file that is there could not be read: never shown as "absent"


def dra_checkpoint_section(snapshot: NodeSnapshot) -> DraCheckpointSection:
    """dra_manager_state's verdict and its claims (those the file holds), each with its state."""
    cp = snapshot.dra_checkpoint
    if cp is None:
        error = next((e.message for e in snapshot.errors if e.source == DRA_CHECKPOINT), None)
        return DraCheckpointSection(snapshot.paths.dra_checkpoint, None, None, None, None, error=error)
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
