"""Pods that come and go on a running simulated node: ``devctl sim delete-pod`` and ``devctl sim add-pod``.

Deleting a pod goes the kubelet's way (pkg/kubelet/cm/dra/manager.go
UnprepareResources, then the device manager): the pod's DRA claims are
unprepared, and a claim leaves ``dra_manager_state`` only when unprepare
succeeds for its last pod. When that fails (its driver is gone) the pod
cannot finish terminating: it stays, with its devices, and a later delete
tries again. Otherwise its device-plugin devices are freed and the
device-manager checkpoint written. Adding a pod goes through admission as at
start: its claims (those of the scenario's ``dra.claims`` that name it) are
prepared, then its devices allocated.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devctl.lab.sim.dranode import prepare_claims
from devctl.lab.sim.scenario import PodSpec, ScenarioError, parse_pods

if TYPE_CHECKING:
    from devctl.lab.sim.node import SimNode


def _running(node: SimNode, namespace: str, name: str) -> PodSpec | None:
    return next((p for p in node.device_manager.running_pods() if (p.namespace, p.name) == (namespace, name)), None)


def _remove_pod_dirs(node: SimNode, pod: PodSpec) -> None:
    """The directories the simulator made for the pod (its logs and its kubelet dir), and only what it made there."""
    node.made.remove(under=Path(node.paths.pod_logs, f"{pod.namespace}_{pod.name}_{pod.uid}"))
    node.made.remove(under=Path(node.paths.kubelet_dir, "pods", pod.uid))


async def delete_pod(node: SimNode, message: Mapping[str, Any]) -> dict[str, Any]:
    namespace, sep, name = str(message.get("pod", "")).partition("/")
    if not sep:
        return {"ok": False, "error": "name the pod as NAMESPACE/NAME"}
    pod = _running(node, namespace, name)
    if pod is None:
        return {"ok": False, "error": f"no pod {namespace}/{name} runs on the simulated node"}
    errors = await node.dra_manager.unprepare_pod(pod)
    if errors:
        return {
            "ok": False,
            "error": f"pod {namespace}/{name} cannot finish terminating: " + "; ".join(errors),
        }
    node.device_manager.remove_pod(pod.uid)
    node.workload.runtime.pod_ended(pod.uid)
    _remove_pod_dirs(node, pod)
    return {"ok": True, "pod": f"{namespace}/{name}", "uid": pod.uid}


async def add_pod(node: SimNode, message: Mapping[str, Any]) -> dict[str, Any]:
    try:
        (pod,) = parse_pods([message.get("pod")], node.scenario)
    except ScenarioError as e:
        return {"ok": False, "error": f"the pod file: {e}"}
    if _running(node, pod.namespace, pod.name) is not None:
        return {"ok": False, "error": f"pod {pod.namespace}/{pod.name} already runs"}
    taken = {c for p in node.device_manager.running_pods() for cont in p.containers for c in cont.cpus}
    if clash := sorted(taken & {c for cont in pod.containers for c in cont.cpus}):
        return {"ok": False, "error": f"exclusive CPUs {clash} are held by a running pod"}
    dm = node.device_manager
    dm.failed.pop((pod.namespace, pod.name), None)
    if not await prepare_claims(node.dra_manager, [pod], dm.failed) or not await dm.admit(pod):
        return {"ok": False, "error": dm.failed.get((pod.namespace, pod.name), "not admitted")}
    node.workload.runtime.pod_started(pod.uid)
    node.make_pod_dirs(pod)
    return {"ok": True, "pod": f"{pod.namespace}/{pod.name}", "uid": pod.uid}
