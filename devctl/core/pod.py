"""One pod, read for ``devctl get``: the use-case behind the face, on a live node or a ``--from`` snapshot.

On a live node the pod is asked for by pod-resources Get (List where Get is disabled); the health of its devices
is read only when it has some to show: its DRA claims' devices (the drivers' health streams and the CDI specs)
and, with ``health``, its device plugin devices (the plugins' lists, for HEALTHY). A pod the node does not run
is one more List, so that the face can say where a pod of that name runs.

Each failure is one typed error: ``NoSuchPod`` (a ``PodNotFound``) for no such pod, ``RpcFailure`` for
pod-resources that could not be read, its message the one line to show (a root that is no node says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from devctl.analyze.claims import with_claim_health
from devctl.analyze.pods import device_health, find_pod, pod_view
from devctl.analyze.sources import no_plugins_dir
from devctl.core.collect import collect, get_pod
from devctl.core.failures import NoSuchPod, PodNotFound, RpcFailure
from devctl.core.paths import looks_like_a_node, not_a_node
from devctl.model import (
    CDI,
    CHECKPOINT,
    PLUGINS,
    POD_RESOURCES,
    ErrorKind,
    NodePaths,
    NodeSnapshot,
    PluginStatus,
    PodResources,
)

__all__ = ["PodReading", "pod_from_snapshot", "read_pod"]


@dataclass(frozen=True)
class PodReading:
    """A pod as ``get`` shows it: ``pod`` merged, its DRA claims' health and NUMA nodes laid over when read;
    ``health``, each device plugin device's health by resource and ID (HEALTHY), None when it was not read."""

    pod: PodResources
    health: Mapping[str, Mapping[str, str]] | None = None


def _reading(pod: PodResources, snapshot: NodeSnapshot | None) -> PodReading:
    """The pod with what ``snapshot`` (its devices' sources, when read) tells of its devices' health."""
    if snapshot is None:
        return PodReading(pod)
    if any(c.dynamic_resources for c in pod.containers):
        (pod,) = with_claim_health((pod,), snapshot)
    health = device_health(snapshot) if any(c.devices for c in pod.containers) else None
    return PodReading(pod, health)


async def read_pod(paths: NodePaths, timeout: float, name: str, namespace: str, *, health: bool) -> PodReading:
    """The pod ``namespace/name`` of the live node, with its devices' health (``health``: its plugin devices' too).

    Raises ``NoSuchPod`` carrying the node's List when the node does not run it, ``RpcFailure`` when
    pod-resources cannot be read (its message ``not_a_node`` when the root has no device-plugins dir).
    """
    try:
        pod = pod_view(await get_pod(paths, timeout, name, namespace))
    except PodNotFound:
        # One List more, to say where a pod of that name does run (kubectl's habit of a default namespace
        # makes `-n` the usual thing to forget).
        raise NoSuchPod(name, namespace, await collect(paths, timeout, want={POD_RESOURCES})) from None
    except RpcFailure as e:
        if e.kind == ErrorKind.MISSING and not looks_like_a_node(paths):  # as every read command says a wrong root
            raise RpcFailure(PluginStatus.MISSING, not_a_node(paths), kind=ErrorKind.MISSING) from e
        raise
    dra = any(c.dynamic_resources for c in pod.containers)
    plugin_devices = health and any(c.devices for c in pod.containers)
    if not (dra or plugin_devices):
        return PodReading(pod)
    # Its DRA devices' health and NUMA nodes (the drivers' streams and the CDI specs) and its plugin devices'
    # health (the plugins' lists, for HEALTHY), read now. What they could not tell is unknown, not an error.
    want = ({PLUGINS, CDI} if dra else set()) | ({PLUGINS, CHECKPOINT} if plugin_devices else set())
    return _reading(pod, replace(await collect(paths, timeout, want=want), pods=(pod,)))


def pod_from_snapshot(snapshot: NodeSnapshot, name: str, namespace: str) -> PodReading:
    """The pod ``namespace/name`` of a snapshot (``--from FILE``), with what the snapshot tells of its devices.

    Raises ``RpcFailure`` when the snapshot holds no pod-resources (why, as it was on the node: its first
    pod-resources error, ``not_a_node`` for a root without a device-plugins dir, or that it holds none), and
    ``NoSuchPod`` carrying the snapshot when it has no such pod.
    """
    if snapshot.pods is None:
        reasons = [e for e in snapshot.errors if e.source == POD_RESOURCES]
        if not reasons:
            raise RpcFailure(PluginStatus.MISSING, "the snapshot holds no pod-resources", kind=ErrorKind.MISSING)
        first = reasons[0]
        if first.kind == ErrorKind.MISSING and no_plugins_dir(snapshot):  # as on the node itself
            raise RpcFailure(PluginStatus.MISSING, not_a_node(snapshot.paths), kind=ErrorKind.MISSING)
        raise RpcFailure(PluginStatus.of_failure(first.kind), first.message, kind=first.kind)
    pod = find_pod(snapshot, name, namespace)
    if pod is None:
        raise NoSuchPod(name, namespace, snapshot)
    return _reading(pod, snapshot)
