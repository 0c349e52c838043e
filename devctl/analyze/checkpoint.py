"""The device manager checkpoint (``devctl checkpoint``): each entry named by its pod, flagged when it is gone."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.analyze.claims import DraCheckpointSection, dra_checkpoint_section
from devctl.model import Allocation, CheckpointEntry, NodeSnapshot, PodResources


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str


@dataclass(frozen=True)
class CheckpointEntryRow:
    pod_uid: str
    pod: PodRef | None
    container: str
    resource: str
    device_ids: dict[str, tuple[str, ...]]
    stale: bool
    allocation: Allocation | None
    allocation_error: str | None = None


@dataclass(frozen=True)
class CheckpointView:
    """The checkpoint decoded; ``format`` and ``checksum_ok`` are None when the file could not be read."""

    path: str
    format: str | None
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    registered_devices: dict[str, tuple[str, ...]]
    entries: tuple[CheckpointEntryRow, ...]
    dra: DraCheckpointSection | None = None  # dra_manager_state, beside the device manager's checkpoint


# Stands for "more than one live pod" in the index below.
_MANY = PodRef("", "")

# (container name, resource, device ID) -> the live pod whose container of that name
# holds the device, or _MANY. One pod or "many" is all an entry needs to know, so
# 20,000 containers sharing one device ID cost one look-up per entry, not 20,000.
_Holders = dict[tuple[str, str, str], PodRef]


def _holders(pods: tuple[PodResources, ...]) -> _Holders:
    """Every device a live container holds, indexed once so that each entry is one look-up per device."""
    index: _Holders = {}
    for p in pods:
        ref = PodRef(p.namespace, p.name)
        for c in p.containers:
            for d in c.devices:
                for dev_id in d.ids:
                    key = (c.name, d.resource, dev_id)
                    if index.setdefault(key, ref) != ref:
                        index[key] = _MANY
    return index


def _live_holder(entry: CheckpointEntry, holders: _Holders) -> PodRef | None:
    """The live pod whose container of this name holds this entry's devices, if exactly one does.

    A device is held by one container at a time, so the match is a fact, not a guess.
    """
    found: PodRef | None = None
    for group in entry.device_ids.values():
        for dev_id in group:
            ref = holders.get((entry.container, entry.resource, dev_id))
            if ref is None:
                continue
            if ref == _MANY or (found is not None and ref != found):
                return None
            found = ref
    return found


def checkpoint_view(snapshot: NodeSnapshot) -> CheckpointView:
    """The checkpoint with each entry's pod named and flagged ``stale`` when the pod is gone.

    An entry is stale when pod-resources no longer lists its pod, or (without
    pod-resources) when no source on the node knows its UID any more
    (kubelet-contract.md, "Pod identity on the node").
    """
    cp = snapshot.checkpoint
    if cp is None:
        return CheckpointView(
            snapshot.paths.checkpoint, None, None, None, None, {}, (), dra=dra_checkpoint_section(snapshot)
        )
    identities = {i.uid: i for i in snapshot.pod_identities}
    live = {(p.namespace, p.name) for p in snapshot.pods or ()}
    holders = _holders(snapshot.pods) if snapshot.pods is not None else None
    entries = []
    for e in cp.entries:
        ident = identities.get(e.pod_uid)
        ref = PodRef(ident.namespace, ident.name) if ident and ident.name else None
        holder = _live_holder(e, holders) if holders is not None else None
        if holders is not None:
            stale = holder is None and (ref is None or (ref.namespace, ref.name) not in live)
        else:
            stale = ident is None
        entries.append(
            CheckpointEntryRow(
                pod_uid=e.pod_uid,
                pod=ref or holder,
                container=e.container,
                resource=e.resource,
                device_ids=e.device_ids,
                stale=stale,
                allocation=e.allocation,
                allocation_error=e.alloc_error,
            )
        )
    return CheckpointView(
        path=cp.path,
        format=cp.format,
        checksum_ok=cp.checksum_ok,
        checksum=cp.checksum,
        computed_checksum=cp.computed_checksum,
        registered_devices=cp.registered_devices,
        entries=tuple(entries),
        dra=dra_checkpoint_section(snapshot),
    )
