"""DRA drivers as rows of ``devctl ls`` and their devices as rows of ``devctl devices``.

A driver stands where a resource name stands and a device's ID is
``<pool>/<device>`` (cli.md). Its devices are those its health stream lists,
plus any a claim holds (``dra_manager_state``, pod-resources). Capacity is the
health stream's count; without a stream only a lower bound is known (the
devices claims name), so ``capacity`` is null and ``capacity_min`` says how
many. ``allocated`` counts devices of prepared claims; a driver with claims in
the checkpoint and no live endpoint is ``driver-missing``. NUMA nodes come
from CDI device nodes through sysfs, so only for devices a claim holds.

The claims' analysis (devctl.analyze.claim_state, and devctl.analyze.claims
with its CDI resolver) is imported only on a node that has a DRA driver: `ls`
on a node without one does not pay for it (docs/performance.md). The claims
view is made only for ``devices`` rows, which name each device's holders:
`ls` counts the devices by state straight from the checkpoint's claims and
pod-resources (:func:`_claims_of_files`), which costs a fraction of making
the claims view for 1,000 claims (docs/dra.md), and loads the CDI resolver
only when it shows NUMA nodes (the CDI specs were read). Both ways give the
same rows (tests/test_dra_inventory.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

from devctl.analyze.rows import UNKNOWN, WAITING, ClaimHolder, DeviceRow, ResourceRow, free_count
from devctl.model import HEALTHY, NodeSnapshot, PluginProbe, PluginStatus

if TYPE_CHECKING:
    from devctl.analyze.claims import ClaimRow

DRA_KIND = "dra"
DeviceKey = tuple[str, str, str]  # (driver, pool, device)


class _Claimed(NamedTuple):
    """What the claims tell of the drivers' devices, all a driver's ``ls`` row needs of them."""

    occupied: set[DeviceKey]  # held: a claim's device, unless each of its pods is known to be gone
    prepared: set[DeviceKey]  # a device of a prepared claim
    drivers: set[str]  # every driver a claim names
    numa: dict[DeviceKey, tuple[int, ...]]  # every claimed device -> its NUMA nodes (through CDI)


def _drivers(snapshot: NodeSnapshot) -> dict[str, PluginProbe | None]:
    """Every DRA driver the node knows of (a registration, or a claim's driver), with its registry probe."""
    found: dict[str, PluginProbe | None] = {}
    for p in snapshot.plugins:
        if p.dra_driver:
            prior = found.get(p.dra_driver)
            if prior is None or (p.dra is not None and p.dra.status == PluginStatus.SERVING):
                found[p.dra_driver] = p
    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        for driver in c.drivers:
            found.setdefault(driver, None)
    for pod in snapshot.pods or ():
        for ctr in pod.containers:
            for dr in ctr.dynamic_resources:
                for d in dr.devices:
                    found.setdefault(d.driver, None)
    return found


def _holders(snapshot: NodeSnapshot, claims: Iterable[ClaimRow]) -> dict[tuple[str, str, str], dict[ClaimHolder, None]]:
    """(driver, pool, device) -> who holds it: the claim and each of its pods (with the containers using it)."""
    containers: dict[tuple[str, str, str, str], list[str]] = {}
    for pod in snapshot.pods or ():
        for ctr in pod.containers:
            for dr in ctr.dynamic_resources:
                key = (pod.namespace, pod.name, dr.claim_namespace, dr.claim_name)
                containers.setdefault(key, []).append(ctr.name)
    out: dict[tuple[str, str, str], dict[ClaimHolder, None]] = {}
    for c in claims:
        claim = f"{c.namespace}/{c.name}"
        for d in c.devices:
            held = out.setdefault((d.driver, d.pool, d.device), {})
            for p in c.pods:
                if p.running is False:
                    continue
                for ctr_name in containers.get((p.namespace or "", p.name or "", c.namespace, c.name), [""]):
                    held[ClaimHolder(p.namespace or "", p.name or p.uid or "", ctr_name, claim=claim)] = None
            if not c.pods:
                held[ClaimHolder("", "", "", claim=claim)] = None
    return out


def _claims_of_rows(claims: tuple[ClaimRow, ...]) -> _Claimed:
    """:class:`_Claimed` of the claims view's rows (``devices``, which makes them for the holders anyway)."""
    from devctl.analyze.claim_state import PREPARED

    return _Claimed(
        # The devices _holders gives a holder.
        occupied={
            (d.driver, d.pool, d.device)
            for c in claims
            if not c.pods or any(p.running is not False for p in c.pods)
            for d in c.devices
        },
        prepared={(d.driver, d.pool, d.device) for c in claims if c.state == PREPARED for d in c.devices},
        drivers={d for c in claims for d in c.drivers},
        numa={(d.driver, d.pool, d.device): d.numa_nodes for c in claims for d in c.devices},
    )


def _claims_of_files(snapshot: NodeSnapshot, live: dict[str, bool]) -> _Claimed:
    """:class:`_Claimed` read from the checkpoint's claims and pod-resources as the claims view joins them.

    The same answer as :func:`_claims_of_rows` of ``claims_view(snapshot)``
    without a row, pod or device object per claim, nor the CDI resolver
    unless the specs were read (``ls -o wide``: NUMA nodes).
    """
    from devctl.analyze.claim_state import PREPARED, claim_state, claim_users

    names = {i.uid: (i.namespace, i.name) if i.name else None for i in snapshot.pod_identities}
    running = {(p.namespace, p.name) for p in snapshot.pods} if snapshot.pods is not None else None
    users = claim_users(snapshot)  # its sets are never empty
    occupied: set[DeviceKey] = set()
    prepared: set[DeviceKey] = set()
    drivers: set[str] = set()
    held: list[tuple[tuple[str, str], list[tuple[DeviceKey, tuple[str, ...]]]]] = []  # (claim, [(device, CDI names)])
    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        key = (c.namespace, c.name)
        used = key in users
        # Whether each pod of it runs (None: unknown), as the claims view's ClaimPod.running; one that uses it runs.
        pods = [None if running is None else names.get(uid) in running for uid in c.pod_uids]
        devices = [((d.driver, d.pool, d.device), d.cdi_devices) for d in c.devices]
        if used or not pods or any(p is not False for p in pods):
            occupied.update([k for k, _ in devices])
        if claim_state(snapshot, c.drivers, live, used, pods) == PREPARED:  # (checkpointed or stale: not counted)
            prepared.update([k for k, _ in devices])
        drivers.update(c.drivers)
        held.append((key, devices))
    # Claims pod-resources reports that the checkpoint does not hold: a container uses each, so each is held.
    seen = {key for key, _ in held}
    extra: dict[tuple[str, str], dict[DeviceKey, tuple[str, ...]]] = {}
    for p in snapshot.pods or ():
        for ctr in p.containers:
            for dr in ctr.dynamic_resources:
                key = (dr.claim_namespace, dr.claim_name)
                if key not in seen:
                    devs = extra.setdefault(key, {})
                    for d in dr.devices:
                        devs.setdefault((d.driver, d.pool, d.device), d.cdi_devices)
    for key, devs in sorted(extra.items()):
        claim_drivers = sorted({k[0] for k in devs})
        occupied.update(devs)
        if claim_state(snapshot, claim_drivers, live, True, ()) == PREPARED:
            prepared.update(devs)
        drivers.update(claim_drivers)
        held.append((key, list(devs.items())))
    if snapshot.cdi is None:  # no spec read (`ls`' table): no device has NUMA nodes, and the order is not needed
        return _Claimed(occupied, prepared, drivers, {k: () for _, devices in held for k, _ in devices})
    from devctl.analyze.cdi import numa_of_nodes, resolver

    cdi = resolver(snapshot)
    # In the claims view's order (by claim, stable): the NUMA nodes of a device two claims hold are the last one's.
    held.sort(key=itemgetter(0))
    numa = {
        k: numa_of_nodes(n for name in cdis for n in cdi.device_nodes(name) or ())
        for _, devices in held
        for k, cdis in devices
    }
    return _Claimed(occupied, prepared, drivers, numa)


def _status(driver: str, probe: PluginProbe | None, live: dict[str, bool], claimed: set[str], waiting: bool) -> str:
    from devctl.analyze.claim_state import DRIVER_MISSING

    if probe is None and waiting:
        return WAITING  # its registration socket may be one still pending
    if not live.get(driver, False) and driver in claimed:
        return DRIVER_MISSING
    if probe is None:
        return PluginStatus.NO_PLUGIN.value
    if probe.status == PluginStatus.SERVING and probe.dra is not None:
        return probe.dra.status.value
    return probe.status.value


def dra_inventory(
    snapshot: NodeSnapshot, wanted: Iterable[str] | None = None, *, devices: bool = True
) -> tuple[list[ResourceRow], list[DeviceRow]]:
    """``ls`` rows and ``devices`` rows of every DRA driver (or those named in ``wanted``).

    Without ``devices`` the second list is empty and no holder is named: ``ls``
    counts a driver's devices by state and shows none of them.
    """
    names = set(wanted or ())
    drivers = {d: p for d, p in sorted(_drivers(snapshot).items()) if not names or d in names}
    if not drivers:
        return [], []
    from devctl.analyze.claim_state import device_health, live_drivers

    live = live_drivers(snapshot)
    health = device_health(snapshot)
    holders: dict[DeviceKey, dict[ClaimHolder, None]] = {}
    if devices:
        from devctl.analyze.claims import claims_view

        claims = claims_view(snapshot)
        holders = _holders(snapshot, claims)
        occupied, prepared, claimed, numa = _claims_of_rows(claims)
    else:
        occupied, prepared, claimed, numa = _claims_of_files(snapshot, live)
    holders_known = snapshot.pods is not None
    claimed_of: dict[str, list[tuple[str, str]]] = {}  # driver -> its claimed devices (one pass, not one a driver)
    for dv, pool, dev in numa:
        claimed_of.setdefault(dv, []).append((pool, dev))
    resources, device_rows = [], []
    for driver, probe in drivers.items():
        stream = probe.dra.health if probe is not None and probe.dra is not None else None
        # One entry per device: a message that names a device three times counts it once, as `devices` shows it.
        last = {(h.pool, h.device): h for h in stream} if stream is not None else {}
        listed = list(last)
        in_stream = set(listed)
        held = [key for key in claimed_of.get(driver, ()) if key not in in_stream]
        keys = list(dict.fromkeys([*listed, *sorted(held)]))
        healthy_keys: list[DeviceKey] = []
        numa_nodes: set[int] = set()
        for pool, dev in keys:
            key = (driver, pool, dev)
            h = health.get(key)
            word = h.health if h is not None else UNKNOWN
            taken = key in occupied
            if not holders_known and not taken:
                state = None
            elif h is None:
                state = "allocated" if taken else None
            elif word == HEALTHY:
                state = "allocated" if taken else "free"
            else:
                state = "unhealthy-allocated" if taken else "unhealthy"
            if h is not None and word == HEALTHY:
                healthy_keys.append(key)
            numa_nodes.update(numa.get(key, ()))
            if devices:
                device_rows.append(
                    DeviceRow(
                        resource=driver,
                        id=f"{pool}/{dev}",
                        health=word,
                        numa_nodes=numa.get(key, ()),
                        state=state,
                        allocated_to=tuple(holders.get(key, ())) if holders_known or taken else None,
                        kind=DRA_KIND,
                    )
                )
        capacity = len(listed) if stream is not None else None
        healthy = sum(1 for (pool, dev), h in last.items() if health.get((driver, pool, dev), h).health == HEALTHY)
        allocated = sum(1 for pool, dev in keys if (driver, pool, dev) in prepared)
        free = free_count(len(healthy_keys), occupied, set(healthy_keys).__contains__)
        resources.append(
            ResourceRow(
                name=driver,
                socket=probe.socket if probe is not None else None,
                status=_status(driver, probe, live, claimed, snapshot.plugins_incomplete),
                capacity=capacity,
                allocatable=healthy if stream is not None else None,
                allocated=allocated if holders_known else None,
                free=free if stream is not None and holders_known else None,
                unhealthy=capacity - healthy if capacity is not None else None,
                numa_nodes=tuple(sorted(numa_nodes)),
                options=None,
                capacity_min=None if stream is not None else (len(keys) or None),
                kind=DRA_KIND,
            )
        )
    return resources, device_rows
