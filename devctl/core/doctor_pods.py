"""Doctor's pod-level reads: the reason and message of each container the runtime lists as not running.

Cheap by construction: the snapshot's runtime listing (``crictl ps -a``) names the containers; only those
``created`` (the runtime keeps a container it failed to start as created, with ``CreateContainerError``) are
asked about, under the deadline. A runtime that fails or hangs gives no findings and no error here (the
snapshot's own runtime error is doctor's to show).
"""

from __future__ import annotations

import asyncio

from devctl.analyze.doctor_pods import PodWaiting
from devctl.base.waits import within
from devctl.model import NodeSnapshot
from devctl.node.connect import RpcFailure
from devctl.node.cri_waiting import container_reasons


async def read_waiting(snapshot: NodeSnapshot, timeout: float) -> tuple[PodWaiting, ...]:
    """Every created-but-not-started container of the runtime, with its reason and message."""
    rt = snapshot.runtime
    if rt is None or not rt.endpoint:
        return ()
    pods = {s.id: (s.namespace, s.name) for s in rt.sandboxes}
    stuck = [c for c in rt.containers if c.state == "created" and c.sandbox_id in pods]
    if not stuck:
        return ()
    try:
        reasons = await within(container_reasons(rt.endpoint, timeout, [c.id for c in stuck]), timeout)
    except (RpcFailure, OSError, asyncio.TimeoutError):
        return ()
    return tuple(
        PodWaiting(*pods[c.sandbox_id], c.name, *reasons[c.id]) for c in stuck if c.id in reasons and reasons[c.id][0]
    )
