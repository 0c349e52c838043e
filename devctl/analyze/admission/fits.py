"""``fits_with``: the smallest changes that would let the kubelet admit a pod it rejects.

Each proposal is checked by running the admission again with the change made, so only changes that really
admit the pod are named: another topology manager policy, fewer devices or exclusive CPUs for one container,
or a device another pod holds freed (the holder named, as ``namespace/pod``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from devctl.analyze.admission.admit import Admission, FitChange, admit
from devctl.analyze.admission.hints import POLICIES
from devctl.analyze.admission.inputs import AdmissionInputs
from devctl.model.machine import ContainerRequest, PodRequest

MAX_HOLDERS_TRIED = 32


def _admits(pod: PodRequest, inputs: AdmissionInputs) -> bool:
    return admit(pod, inputs).admit


def _with_request(pod: PodRequest, index: int, resource: str, amount: int) -> PodRequest:
    old = pod.containers[index]
    requests = {**old.requests, resource: amount}
    limits = {**old.limits, resource: amount} if resource in old.limits else dict(old.limits)
    new = ContainerRequest(old.name, old.init, old.restartable, requests, limits)
    return dataclasses.replace(pod, containers=(*pod.containers[:index], new, *pod.containers[index + 1 :]))


def _node_total(resource: str, inputs: AdmissionInputs) -> int:
    """How much of ``resource`` the node has at all (CPU in millicores): no proposal asks for more. 0: none."""
    if resource == "cpu":
        return 1000 * len(inputs.machine.cpus)
    return len(inputs.devices.get(resource, ()))


def _most_admitted(admits: Callable[[int], bool], top: int) -> int:
    """The largest ``n`` in ``1..top`` with ``admits(n)``, 0 when none: a binary search, as fewer of a resource
    never admits less (``admits`` is monotone), so ~log2(top) admissions rather than one per step."""
    if top < 1 or not admits(1):
        return 0
    low, high = 1, top  # admits(low) holds; the answer is in low..high
    while low < high:
        middle = (low + high + 1) // 2
        if admits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _fewer(pod: PodRequest, inputs: AdmissionInputs) -> list[FitChange]:
    """For each container's CPUs (whole ones) and devices: the most of it that would be admitted, if any.

    Never more than the node has of the resource (a request of 10^30 searches the node's 32 CPUs, not 10^30
    steps); nothing is proposed for a resource the node has none of."""
    out: list[FitChange] = []
    for index, container in enumerate(pod.containers):
        for resource, amount in sorted(container.requests.items()):
            step = 1000 if resource == "cpu" else 1
            if resource != "cpu" and resource not in inputs.devices:
                continue
            if resource == "cpu" and amount % 1000:
                continue
            top = min(amount // step - 1, _node_total(resource, inputs) // step)

            def admits(units: int, index: int = index, resource: str = resource, step: int = step) -> bool:
                return _admits(_with_request(pod, index, resource, units * step), inputs)

            most = _most_admitted(admits, top)
            if most:
                out.append(
                    FitChange(
                        f"container {container.name}: {resource}={most}",
                        f"{most} instead of {amount // step} would be admitted under the same policies",
                    )
                )
    return out


def fits_with(pod: PodRequest, inputs: AdmissionInputs, result: Admission | None = None) -> tuple[FitChange, ...]:
    """Changes that admit ``pod``; ``()`` when it is admitted already (or nothing simple would do)."""
    if (result or admit(pod, inputs)).admit:
        return ()
    out: list[FitChange] = []
    for policy in POLICIES:
        if policy != inputs.policy.topology:
            what_if = dataclasses.replace(inputs, policy=dataclasses.replace(inputs.policy, topology=policy))
            if _admits(pod, what_if):
                out.append(
                    FitChange(f"topologyManagerPolicy: {policy}", f"the topology manager's {policy} policy admits it")
                )
    out.extend(_fewer(pod, inputs))
    for held in inputs.held[:MAX_HOLDERS_TRIED]:
        if pod.uid and held.pod_uid == pod.uid:
            continue
        freed = dataclasses.replace(inputs, held=tuple(h for h in inputs.held if h is not held))
        if _admits(pod, freed):
            owner = f"{held.namespace}/{held.pod} ({held.container})"
            out.append(
                FitChange(
                    f"free {held.resource} {', '.join(held.ids)} held by {owner}",
                    "with those devices free the pod is admitted",
                )
            )
    return tuple(out)
