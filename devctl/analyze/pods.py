"""Allocations per container (``devctl pods``, ``devctl get``), with the kubelet's device entries merged."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from devctl.model import ContainerDevices, ContainerResources, NodeSnapshot, PodResources


def merge_devices(entries: Iterable[ContainerDevices]) -> tuple[ContainerDevices, ...]:
    """One entry per resource: the kubelet reports one per device per NUMA node
    (pkg/kubelet/apis/podresources/server_v1.go via devicemanager's GetDevices)."""
    if type(entries) is not tuple:
        entries = tuple(entries)
    if len(entries) == 1:
        # The common case of one device entry: already merged unless it repeats an ID or a NUMA node
        # (or lists the nodes out of order). One ID and one node cannot.
        (e,) = entries
        if (len(e.ids) < 2 or len(set(e.ids)) == len(e.ids)) and (
            len(e.numa_nodes) < 2 or list(e.numa_nodes) == sorted(set(e.numa_nodes))
        ):
            return entries
    merged: dict[str, tuple[dict[str, None], set[int]]] = {}
    for e in entries:
        ids, numa = merged.setdefault(e.resource, ({}, set()))
        ids.update(dict.fromkeys(e.ids))  # an ordered set: linear in the entries
        numa.update(e.numa_nodes)
    return tuple(ContainerDevices(r, tuple(ids), tuple(sorted(numa))) for r, (ids, numa) in merged.items())


def pod_view(pod: PodResources, resource: str | None = None) -> PodResources:
    """A pod with its device entries merged; with ``resource``, only containers holding it, and only its devices."""
    containers = []
    changed = False
    for c in pod.containers:
        devices = merge_devices(c.devices)
        if resource is not None:
            devices = tuple(d for d in devices if d.resource == resource)
            if not devices:
                changed = True
                continue
        # The constructor, not dataclasses.replace: a node of 20,000 containers feels the difference.
        if devices is not c.devices:
            c = ContainerResources(c.name, devices, c.cpu_ids, c.memory, c.dynamic_resources)
            changed = True
        containers.append(c)
    # Nothing merged or left out: the pod itself (frozen), not a copy of each of 50,000.
    return PodResources(pod.namespace, pod.name, tuple(containers)) if changed else pod


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
    return tuple(sorted(rows, key=attrgetter("namespace", "name")))


def find_pod(snapshot: NodeSnapshot, name: str, namespace: str) -> PodResources | None:
    """One pod of a snapshot, merged, or None (``devctl get`` on ``--from FILE``)."""
    for p in snapshot.pods or ():
        if p.name == name and p.namespace == namespace:
            return pod_view(p)
    return None


def device_health(snapshot: NodeSnapshot) -> dict[str, dict[str, str]]:
    """Each device plugin device's health by resource and ID, as ``devctl devices`` shows it (the plugin's
    list, else the kubelet's word; ``Missing`` for a held device its plugin no longer lists, ``Unknown``
    when nothing says), for the HEALTHY column of ``pods`` and ``get``."""
    from devctl.analyze.inventory import inventories  # the devices' view, only for a table that shows health

    return {resource: inv.health for resource, inv in inventories(snapshot).items()}
