"""``devctl snapshot --redact``: a snapshot safe to attach to a ticket.

Command lines carry tokens and paths, and the env values of Allocate replies
may carry credentials; the rest (device IDs, pod names, paths of device nodes)
is what a reader needs to help.
"""

from __future__ import annotations

from dataclasses import replace

from devctl.model import NodeSnapshot

REDACTED = "<redacted>"


def redact(snapshot: NodeSnapshot) -> NodeSnapshot:
    """The snapshot with every process' command line and every env value of the checkpoint's replies hidden."""
    procs = snapshot.procs
    if procs is not None:
        procs = replace(procs, processes=tuple(replace(p, command=REDACTED) for p in procs.processes))
    checkpoint = snapshot.checkpoint
    if checkpoint is not None:
        entries = tuple(
            replace(e, allocation=replace(e.allocation, envs=dict.fromkeys(e.allocation.envs, REDACTED)))
            if e.allocation is not None
            else e
            for e in checkpoint.entries
        )
        checkpoint = replace(checkpoint, entries=entries)
    return replace(snapshot, procs=procs, checkpoint=checkpoint)
