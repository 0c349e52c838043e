"""``devctl why``'s ``fit`` replay, the pure part: a pod's requests recovered from its containers' Linux resources,
and the node's admission inputs without the pod's own holdings.

What the runtime's Linux resources (CRI ``LinuxContainerResources``, as the kubelet set them) give back:

- CPU request: the kubelet writes ``cpu_shares = milliCPU * 1024 / 1000`` (at least 2), so the request is
  ``shares * 1000 / 1024`` rounded to the millicore; shares of 2 mean "no request" (or 1-2m: the same to admission).
- CPU limit: ``cpu_quota * 1000 / cpu_period`` millicores; a quota of 0 or less means no limit.
- memory limit: ``memory_limit_in_bytes``; 0 means none.
- NOT recoverable: the memory request (cgroup v1 has none; v2's ``memory.min`` only under the MemoryQoS gate),
  so it is taken as the limit (the API's defaulting when only a limit is given, and what a Guaranteed pod has);
  extended resources (GPUs) are not in the cgroup at all: they come from the pod's holdings (the checkpoint's
  allocation per container), when it holds any. A pod's QoS class follows from these, said in the notes.

Holdings: a pod that already holds devices or exclusive CPUs would "not fit" against itself, so the replay
takes them out of the node's state first — the question answered is "would this pod be admitted here now, were
it created afresh". ``without_pod`` does that over ``AdmissionInputs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from devctl.analyze.admission.inputs import AdmissionInputs
from devctl.analyze.admission.request import BEST_EFFORT, BURSTABLE, GUARANTEED
from devctl.model.machine import ContainerRequest, PodRequest

REQUESTS_UNKNOWN = "requests unknown: fit not replayed (devctl why -f POD.yaml gives them)"


@dataclass(frozen=True)
class LinuxResources:
    """One container's CRI Linux resources (0: not set)."""

    container: str
    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0


def _container(r: LinuxResources, devices: Mapping[str, int]) -> ContainerRequest:
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    if r.cpu_shares > 2:
        requests["cpu"] = round(r.cpu_shares * 1000 / 1024)
    if r.cpu_quota > 0 and r.cpu_period > 0:
        limits["cpu"] = -(-r.cpu_quota * 1000 // r.cpu_period)
    if r.memory_limit > 0:
        limits["memory"] = requests["memory"] = r.memory_limit
    for resource, count in devices.items():
        requests[resource] = limits[resource] = count
    return ContainerRequest(name=r.container, requests=requests, limits=limits)


def _qos(containers: Sequence[ContainerRequest]) -> str:
    if all(not c.requests.get("cpu") and not c.limits.get("cpu") and not c.limits.get("memory") for c in containers):
        return BEST_EFFORT
    guaranteed = all(
        c.limits.get("cpu") and c.limits.get("memory") and c.requests.get("cpu") == c.limits.get("cpu")
        for c in containers
    )
    return GUARANTEED if guaranteed else BURSTABLE


def request_from_runtime(
    resources: Sequence[LinuxResources],
    devices: Mapping[str, Mapping[str, int]],
    namespace: str,
    name: str,
    uid: str = "",
) -> tuple[PodRequest | None, tuple[str, ...]]:
    """The pod's requests from its containers' Linux resources and held devices (container -> resource -> count);
    None when there is no container to read. Notes say what was assumed."""
    if not resources:
        return None, (REQUESTS_UNKNOWN,)
    containers = tuple(_container(r, devices.get(r.container, {})) for r in resources)
    notes = (
        "requests recovered from the runtime's cgroup settings: CPU from shares and quota, memory request taken "
        "as its limit, devices from the pod's holdings; init containers are not seen",
    )
    return PodRequest(containers, _qos(containers), namespace, name, uid), notes


def without_pod(
    inputs: AdmissionInputs, namespace: str, name: str, uid: str | None, cpus: Sequence[int] = ()
) -> AdmissionInputs:
    """The node's admission inputs with the pod's own devices freed and its exclusive ``cpus`` back in the pool."""
    held = tuple(
        h for h in inputs.held if not ((uid and h.pod_uid == uid) or (h.namespace, h.pod) == (namespace, name))
    )
    free = inputs.free_cpus
    if free is not None and cpus:
        free = free | (frozenset(cpus) - frozenset(inputs.policy.reserved_cpus))
    return dataclasses.replace(inputs, held=held, free_cpus=free)
