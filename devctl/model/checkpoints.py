"""The kubelet's device manager checkpoint and the DRA manager's ``dra_manager_state``, as read."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.model.plugins import Allocation

# --- the device manager checkpoint --------------------------------------------------


@dataclass(frozen=True)
class CheckpointEntry:
    pod_uid: str
    container: str
    resource: str
    device_ids: dict[str, tuple[str, ...]]  # NUMA node as a string ("-1": none) -> IDs
    allocation: Allocation | None = None  # None when AllocResp could not be decoded
    alloc_error: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """The device manager checkpoint read; ``checksum_ok`` None when the checksum was not computed (``unverified``)."""

    path: str
    format: str  # "v2", or "v1" for the flat DeviceIDs lists of Kubernetes <= 1.19
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    registered_devices: dict[str, tuple[str, ...]]
    entries: tuple[CheckpointEntry, ...] = ()
    unverified: str | None = None  # why the checksum was not computed: one line, shown as a warning


# --- the DRA manager checkpoint (dra_manager_state) --------------------------------


@dataclass(frozen=True)
class DraCheckpointDevice:
    """One device of a claim as the DRA manager checkpointed it (what the driver's prepare returned)."""

    driver: str
    pool: str
    device: str
    requests: tuple[str, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    share_id: str | None = None


@dataclass(frozen=True)
class DraCheckpointClaim:
    """One ClaimInfoState: a claim the kubelet holds for pods on this node.

    ``drivers`` names every driver of the entry, also one whose devices are
    null (a prepare that failed or has not returned: the entry is written
    first). ``duplicate_devices`` counts devices the file repeats (a kubelet
    restart appends the re-prepared devices); ``devices`` holds each once.
    """

    uid: str
    name: str
    namespace: str
    pod_uids: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()
    devices: tuple[DraCheckpointDevice, ...] = ()
    duplicate_devices: int = 0


@dataclass(frozen=True)
class DraCheckpoint:
    """``dra_manager_state`` read and verified.

    ``format``: ``v1`` (``ClaimInfoStateList``), ``entries`` (the same under
    ``Entries``) or ``legacy`` (the alpha ``{"version", "entries", "checksum"}``
    file, whose checksum devctl does not recompute: ``checksum_ok`` None).
    """

    path: str
    format: str
    checksum_ok: bool | None
    checksum: int | None
    computed_checksum: int | None
    claims: tuple[DraCheckpointClaim, ...] = ()
