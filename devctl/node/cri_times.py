"""When each pod sandbox and container was created, as the CRI runtime says it: what ``devctl events`` needs to
tell whether a device's holder now already held it when a kernel line was written (``analyze.history.held_then``).

Two reads for the whole node, each under the deadline: ``ListPodSandbox`` and ``ListContainers`` (``crictl pods``,
``crictl ps -a``), no per-container status. Times keep the runtime's microseconds (``node.cri_states`` rounds to
the second, too coarse to compare with a kernel line's time).
"""

from __future__ import annotations

from datetime import datetime, timezone

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.model.runtime import ContainerState, PodRuntimeState, SandboxState
from devctl.node.cri import container_state, list_pods, sandbox_state

# (namespace, pod name) -> its sandboxes (newest first) and their containers
PodTimes = dict[tuple[str, str], PodRuntimeState]


def iso_us(nanoseconds: int) -> str | None:
    """A CRI timestamp (Unix nanoseconds) as UTC ISO 8601 to the microsecond; None for 0 (the runtime did not say)."""
    if nanoseconds <= 0:
        return None
    seconds, nanos = divmod(nanoseconds, 1_000_000_000)
    when = datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanos // 1000)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def read_pod_times(endpoint: str, timeout: float) -> PodTimes:
    """Every pod's sandboxes and containers with their creation times; raises RpcFailure (one line, a kind)."""
    path, pods, listed = await list_pods(endpoint, timeout)
    out: dict[tuple[str, str], list[cri.PodSandbox]] = {}
    for p in sorted(pods.items, key=lambda p: -p.created_at):
        out.setdefault((p.metadata.namespace, p.metadata.name), []).append(p)
    containers: dict[str, list[ContainerState]] = {}
    for c in listed.containers:
        state = ContainerState(
            c.id,
            c.pod_sandbox_id,
            c.metadata.name,
            container_state(c.state),
            attempt=c.metadata.attempt,
            created_at=iso_us(c.created_at),
        )
        containers.setdefault(c.pod_sandbox_id, []).append(state)
    return {
        key: PodRuntimeState(
            path,
            tuple(SandboxState(p.id, p.metadata.uid, sandbox_state(p.state), iso_us(p.created_at)) for p in found),
            tuple(c for p in found for c in containers.get(p.id, ())),
        )
        for key, found in out.items()
    }
