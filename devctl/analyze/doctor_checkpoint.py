"""The checks of the device manager checkpoint: readable, its checksum, its format, each entry."""

from __future__ import annotations

from devctl.analyze import CHECKPOINT
from devctl.analyze.checkup import ERROR, UNREADABLE_HINT, WARNING, Checkup, denied, id_list
from devctl.model import ErrorKind

# --- the checkpoint ---------------------------------------------------------------------------------


def checkpoint(c: Checkup) -> None:
    path = c.snapshot.paths.checkpoint
    for e in c.explain(lambda e: e.source == CHECKPOINT):
        if e.kind == ErrorKind.MISSING:
            # A kubelet that no plugin has registered with writes none; a dead kubelet
            # is kubelet-socket-missing's to tell.
            continue
        if denied(e):
            c.permission_denied(path)
        elif e.kind == ErrorKind.TOO_LARGE:  # read, its checksum left unverified (node/checkpoint.CHECKSUM_LIMIT)
            c.add(
                WARNING,
                "checkpoint-checksum-unverified",
                path,
                e.message,
                "a checkpoint this large is unusual: `devctl checkpoint` shows which entries make it so",
            )
        else:
            c.add(ERROR, "checkpoint-unreadable", path, e.message, UNREADABLE_HINT)
    view = c.checkpoint
    if view.format is None:
        return
    # An AllocResp that is not base64 fails encoding/json before any checksum: then
    # no checksum is computed, and the whole file is lost to the kubelet.
    decodes = view.computed_checksum is not None
    if view.checksum_ok is False and not decodes:
        bad = next((e for e in view.entries if e.allocation_error), None)
        which = f"{bad.pod_uid}/{bad.container}: {bad.allocation_error}" if bad else "an AllocResp is not base64"
        c.add(
            ERROR,
            "checkpoint-unreadable",
            path,
            f"{which}: the kubelet cannot decode the file and will start empty",
            UNREADABLE_HINT,
        )
    elif view.checksum_ok is False:
        # pkg/kubelet/checkpointmanager/checkpoint_manager.go refuses the file; the device
        # manager then starts with no allocations (pkg/kubelet/cm/devicemanager/manager.go).
        c.add(
            ERROR,
            "checksum-mismatch",
            path,
            f"stored checksum {view.checksum}, computed {view.computed_checksum}: "
            "the kubelet will refuse the file at its next start and start empty",
            "something other than the kubelet changed the file: the devices held now may be handed out twice "
            "after a kubelet restart; drain the node before restarting the kubelet",
        )
    if view.format == "v1":
        c.add(
            WARNING,
            "checkpoint-old-format",
            path,
            "written in the format of Kubernetes 1.19 and older (device IDs without NUMA nodes)",
            "a current kubelet reads it once, on upgrade, and writes the new format at its next change: a file "
            "that stays old means the kubelet here is that old, or has not changed anything since",
        )
    # Without pod-resources and without a pod identity on disk, checkpoint_view calls
    # every entry stale: that is "cannot tell", and pod-resources-unreachable says so.
    can_tell = c.snapshot.pods is not None or bool(c.snapshot.pod_identities)
    for entry in view.entries:
        owner = f"{entry.pod.namespace}/{entry.pod.name}" if entry.pod else entry.pod_uid
        subject = f"{owner}/{entry.container}"
        ids = list(dict.fromkeys(i for group in entry.device_ids.values() for i in group))
        if entry.allocation_error is not None and decodes:
            # pkg/kubelet/cm/devicemanager/pod_devices.go fromCheckpointData skips such an entry.
            c.add(
                WARNING,
                "alloc-undecodable",
                subject,
                f"the allocation of {entry.resource} cannot be decoded: {entry.allocation_error}",
                "at its next start the kubelet skips this entry: the container keeps running, but its devices "
                "look free and may be given to another pod",
            )
        if entry.stale and can_tell:
            # The device manager drops the entries of pods that are gone before it picks
            # devices for a new container (pkg/kubelet/cm/devicemanager/manager.go,
            # UpdateAllocatedDevices); the scheduler never counted them.
            c.add(
                WARNING,
                "stale-allocation",
                subject,
                f"pod {entry.pod_uid} no longer runs, but the checkpoint still gives it {entry.resource} "
                + id_list(ids),
                f"nothing to do: the kubelet frees them at its next allocation of {entry.resource}, before it "
                "picks devices",
            )
