"""Which device nodes the kubelet's Allocate replies and the CDI specs name: pure functions over model values.

Both the ``<proc>`` scan (node) and the holder views (analyze) ask this; it reads nothing.
"""

from __future__ import annotations

from devctl.model import CdiState, Checkpoint


def device_nodes(checkpoint: Checkpoint | None) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each allocated device's node host paths, from the Allocate replies the checkpoint keeps.

    One reply answers for every device of a container's request: its device
    specs belong to all of them (``/dev/nvidiactl`` serves every GPU of the
    request); a reply for one device names that device's own nodes.
    """
    out: dict[tuple[str, str], dict[str, None]] = {}
    for entry in checkpoint.entries if checkpoint is not None else ():
        if entry.allocation is None:
            continue
        paths = [d.host_path for d in entry.allocation.devices if d.host_path]
        for ids in entry.device_ids.values():
            for device_id in ids:
                out.setdefault((entry.resource, device_id), {}).update(dict.fromkeys(paths))
    return {key: tuple(paths) for key, paths in out.items()}


def cdi_nodes(cdi: CdiState | None) -> set[str]:
    """The host paths of every device node any valid CDI spec names: a superset of those of the CDI names in
    use (resolving names is the views' work), cheap to watch as each costs a set lookup per fd."""
    out: set[str] = set()
    for spec in cdi.specs if cdi is not None else ():
        if spec.error is None:
            for edits in (spec.edits, *(d.edits for d in spec.devices)):
                out.update(n.host_path for n in edits.device_nodes)
    return out
