"""Allocations per container (``devctl pods``, ``devctl get``), with the kubelet's device entries merged."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from devctl.model import ContainerDevices, NodeSnapshot, PodResources


def merge_devices(entries: Iterable[ContainerDevices]) -> tuple[ContainerDevices, ...]:
    """One entry per resource: the kubelet reports one per device per NUMA node
    (pkg/kubelet/apis/podresources/server_v1.go via devicemanager's GetDevices)."""
    merged: dict[str, tuple[dict[str, None], set[int]]] = {}
    for e in entries:
        ids, numa = merged.setdefault(e.resource, ({}, set()))
        ids.update(dict.fromkeys(e.ids))  # an ordered set: linear in the entries
        numa.update(e.numa_nodes)
    return tuple(ContainerDevices(r, tuple(ids), tuple(sorted(numa))) for r, (ids, numa) in merged.items())


def pod_view(pod: PodResources, resource: str | None = None) -> PodResources:
    """A pod with its device entries merged; with ``resource``, only containers holding it, and only its devices."""
    containers = []
    for c in pod.containers:
        devices = merge_devices(c.devices)
        if resource is not None:
            devices = tuple(d for d in devices if d.resource == resource)
            if not devices:
                continue
        containers.append(replace(c, devices=devices))
    return replace(pod, containers=tuple(containers))


def pods_view(
    snapshot: NodeSnapshot,
    namespace: str | None = None,
    resource: str | None = None,
    pod: str | None = None,
) -> tuple[PodResources, ...]:
    """Allocations per container, filtered like ``kubectl get pods -n NS``; sorted by namespace and name."""
    rows = []
    for p in snapshot.pods or ():
        if (namespace is not None and p.namespace != namespace) or (pod is not None and p.name != pod):
            continue
        view = pod_view(p, resource)
        if resource is not None and not view.containers:
            continue
        rows.append(view)
    return tuple(sorted(rows, key=lambda p: (p.namespace, p.name)))


def find_pod(snapshot: NodeSnapshot, name: str, namespace: str) -> PodResources | None:
    """One pod of a snapshot, merged, or None (``devctl get`` on ``--from FILE``)."""
    for p in snapshot.pods or ():
        if p.name == name and p.namespace == namespace:
            return pod_view(p)
    return None
