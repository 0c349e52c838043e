"""The DRA and CDI checks of ``devctl doctor``: each finding from evidence in the snapshot, each with a hint.

Like the other families of checks (``devctl.analyze.doctor_*``, on ``analyze.checkup``), these only read
the views (``analyze.claims``, ``analyze.cdi``, ``analyze.dra_inventory``) and say what a person at the node
should make of them. Facts behind the hints: a claim's entry in
``dra_manager_state`` is removed only when its driver unprepares it, so a claim
whose driver is gone keeps its pods ``Terminating``; a CDI name no spec defines
is the runtime's ``unresolvable CDI devices`` and the container cannot start.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from devctl.analyze import DRA_CHECKPOINT
from devctl.analyze.cdi import CONFLICT, UNRESOLVABLE, cdi_view, unjudged_kinds
from devctl.analyze.checkup import ERROR, INFO, WARNING, Checkup, delete_pods
from devctl.analyze.claim_state import DRIVER_MISSING, STALE
from devctl.analyze.claims import ClaimRow, claims_view
from devctl.analyze.dra_inventory import DRA_KIND
from devctl.analyze.rows import UNKNOWN, ClaimHolder
from devctl.model import CDI, HEALTHY, ErrorKind, NodeSnapshot, Source, SourceError

# The labels of a DRA service a kubelet can use (dra-contract.md).
DRA_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha3.NodeService")
MAX_NAMES = 8


def _some(names: list[str]) -> str:
    more = len(names) - MAX_NAMES
    return ", ".join(names[:MAX_NAMES]) + (f" and {more} more" if more > 0 else "")


def check_dra(c: Checkup) -> None:
    """Every DRA and CDI check, in the order of their severity's usual weight."""
    snap = c.snapshot
    claims = claims_view(snap)
    _driver_missing(c, claims)
    _stale_claims(c, claims)
    _unhealthy_in_use(c)
    _unhealthy_free(c)
    _health_stale(c)
    _cdi(c, snap)
    _dra_checkpoint(c)
    _versions(c)


def _driver_missing(c: Checkup, claims: Sequence[ClaimRow]) -> None:
    by_driver: dict[str, list[str]] = {}
    for r in claims:
        if r.state == DRIVER_MISSING:
            for d in r.drivers:
                by_driver.setdefault(d, []).append(f"{r.namespace}/{r.name}")
    for driver, names in sorted(by_driver.items()):
        # The endpoint's own failure, if it was dialled, is this finding's evidence.
        def about(e: SourceError, d: str = driver) -> bool:
            return e.source == Source.DRA and e.subject == d

        told = c.explain(about)
        why = f" ({told[0].message})" if told else " (no registration socket answers for it)"
        c.add(
            ERROR,
            "dra-driver-missing",
            driver,
            f"{len(names)} claim(s) in dra_manager_state but the driver has no live endpoint{why}: {_some(names)}",
            "nothing can unprepare these claims, so their pods cannot terminate and new ones cannot start: "
            "bring the driver's kubelet plugin back (its DaemonSet pod on this node), then the kubelet retries",
        )


def _stale_claims(c: Checkup, claims: Sequence[ClaimRow]) -> None:
    for r in claims:
        if r.state == STALE:
            c.add(
                WARNING,
                "dra-claim-stale",
                f"{r.namespace}/{r.name}",
                f"in dra_manager_state (uid {r.uid}) but no pod of it runs on this node",
                "the kubelet unprepares it once its pods are gone; if it stays, check the kubelet's log for "
                "NodeUnprepareResources errors of its driver",
            )


def _unhealthy_in_use(c: Checkup) -> None:
    for d in c.devices:
        if d.kind == DRA_KIND and d.state == "unhealthy-allocated":
            holders = sorted({h.claim for h in d.allocated_to or () if isinstance(h, ClaimHolder)})
            c.add(
                ERROR,
                "dra-device-unhealthy-in-use",
                f"{d.resource}/{d.id}",
                f"{d.health} per its driver's health stream, and held by claim(s) {_some(holders)}",
                "the kubelet does not take a device from a running pod: read the driver's logs (and dmesg), "
                "then recreate the pod so the scheduler allocates a healthy device "
                f"({delete_pods(d.allocated_to)})",
            )


def _unhealthy_free(c: Checkup) -> None:
    """``unhealthy-devices`` of a DRA driver, as of a device plugin: a device its health stream calls unhealthy
    that no claim holds is allocated to no one; said once the driver has one (a held one alone is the error
    dra-device-unhealthy-in-use's). Unknown health (a stale stream) is dra-health-stale's to tell."""
    unhealthy: dict[str, list[str]] = {}
    held: dict[str, int] = {}
    for d in c.devices:
        if d.kind != DRA_KIND or d.health in (HEALTHY, UNKNOWN) or d.state not in ("unhealthy", "unhealthy-allocated"):
            continue
        unhealthy.setdefault(d.resource, []).append(d.id)
        held[d.resource] = held.get(d.resource, 0) + (d.state == "unhealthy-allocated")
    capacity = {r.name: r.capacity for r in c.resources if r.kind == DRA_KIND}
    for driver, ids in sorted(unhealthy.items()):
        if len(ids) == held[driver]:
            continue
        of = capacity.get(driver)
        c.add(
            WARNING,
            "unhealthy-devices",
            driver,
            f"{len(ids)} of {of if of is not None else '?'} device(s) unhealthy: {_some(ids)}"
            + (f" ({held[driver]} of them still held: dra-device-unhealthy-in-use)" if held[driver] else ""),
            "a DRA device's health reaches pod status only: unless its driver drops it from its ResourceSlice "
            "(or taints it) the scheduler may give it to a new claim; the driver's logs (and dmesg) say why it "
            "marked it: repair or replace the hardware",
        )


def _health_stale(c: Checkup) -> None:
    for p in c.snapshot.plugins:
        if p.dra is None or p.dra.health is None or p.registry is None:
            continue
        now = p.dra.read_at or time.time()
        old = [
            f"{h.pool}/{h.device}"
            for h in p.dra.health
            if h.last_updated is not None and h.last_updated + h.timeout_seconds < now
        ]
        if old:
            c.add(
                WARNING,
                "dra-health-stale",
                p.registry.name,
                f"health of {len(old)} device(s) older than its timeout, read by the kubelet as Unknown: {_some(old)}",
                "the driver stopped checking its devices: read its logs; a driver must send its list again "
                "within health_check_timeout_seconds",
            )


def _cdi(c: Checkup, snap: NodeSnapshot) -> None:
    view = cdi_view(snap)
    # A device plugin's name is judged only where the node has specs of its kind (unjudged_kinds). A DRA
    # claim's names are always judged: a lost file (a reboot of /var/run/cdi) is exactly what leaves no spec.
    unjudged = set(unjudged_kinds(view))
    for n in view.names:
        users = sorted({u.claim or u.resource or "?" for u in n.used_by})
        judged = any(u.kind == "dra" for u in n.used_by) or n.name.split("=", 1)[0] not in unjudged
        if n.status == UNRESOLVABLE and n.used_by and judged:
            c.add(
                ERROR,
                "cdi-unresolvable",
                n.name,
                f"in use by {_some(users)} but no CDI spec in {', '.join(view.dirs)} defines it",
                "the runtime refuses to start the container (unresolvable CDI devices): the driver or plugin must "
                "write its spec again (specs in /var/run/cdi are lost at reboot) — restart its pod",
            )
        elif n.status == CONFLICT:
            c.add(
                WARNING,
                "cdi-conflict",
                n.name,
                f"defined by more than one spec of the same priority: {', '.join(n.conflicting)}",
                "the runtime uses neither copy: remove the duplicate spec file",
            )
    # A conflict is the runtime's error whether or not a pod uses the name yet (the CDI library reports it
    # when it reads the specs): the names no pod uses are judged too.
    shown = {n.name for n in view.names}
    defined = dict.fromkeys(f"{s.kind}={d}" for s in view.specs if s.kind and not s.error for d in s.devices)
    unused = [name for name in defined if name not in shown]
    for n in cdi_view(snap, unused).names if unused else ():
        if n.status == CONFLICT:
            c.add(
                WARNING,
                "cdi-conflict",
                n.name,
                f"defined by more than one spec of the same priority: {', '.join(n.conflicting)} (no pod uses it yet)",
                "the runtime uses neither copy: remove the duplicate spec file",
            )
    c.explain(lambda e: e.source == CDI and e.kind == ErrorKind.MALFORMED)
    for s in view.specs:
        if s.error:
            c.add(
                WARNING,
                "cdi-spec-invalid",
                s.path,
                s.error,
                "the runtime skips the whole file, so none of its devices resolve: fix or remove it",
            )


def _dra_checkpoint(c: Checkup) -> None:
    cp = c.snapshot.dra_checkpoint
    for e in c.explain(lambda e: e.source == DRA_CHECKPOINT and e.kind == ErrorKind.MALFORMED):
        c.add(
            ERROR,
            "dra-checkpoint-corrupt",
            c.snapshot.paths.dra_checkpoint,
            e.message,
            "at its next start the kubelet cannot read which claims it prepared: find what wrote the file; "
            "drain the node before restarting the kubelet",
        )
    if cp is None:
        return
    if cp.checksum_ok is False:
        c.add(
            ERROR,
            "dra-checkpoint-corrupt",
            cp.path,
            f"checksum mismatch: stored {cp.checksum}, computed {cp.computed_checksum}",
            "the kubelet will refuse this file at its next start and forget its prepared claims: "
            "find what changed it; drain the node before restarting the kubelet",
        )
    if cp.format == "legacy":
        c.add(
            INFO,
            "dra-checkpoint-legacy",
            cp.path,
            "written by an alpha DRA kubelet (the {version, entries, checksum} format)",
            "its checksum is not verified by devctl; a current kubelet rewrites the file in the v1 format",
        )


def _versions(c: Checkup) -> None:
    for row in c.plugins:
        if row.kind == DRA_KIND and row.registry is not None and not set(row.supported_versions) & set(DRA_SERVICES):
            offered = ", ".join(row.supported_versions) or "nothing"
            c.add(
                ERROR,
                "dra-no-supported-version",
                row.driver or row.socket,
                f"offers {offered}: no DRA service a kubelet speaks ({', '.join(DRA_SERVICES)})",
                "the kubelet refuses to register it: upgrade the driver or the kubelet so they share a version",
            )
