"""Who really uses each device: the processes holding its nodes open, joined with containers, pods and allocations.

The checkpoint says which container was *given* which device (and, in its
Allocate replies, which device nodes came with it); the /proc scan says which
process *holds* a node open and which container its cgroup names; the CRI
runtime names that container and its pod as crictl does. Joined, they answer
``devctl who`` and three doctor checks: a container using what it was not
given, a host process holding an allocatable device, a container that holds a
device no process of it opens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from devctl.model import PROCS, RUNTIME, ErrorKind, Finding, NodeSnapshot, Process
from devctl.node.procs import device_nodes

DEVICE_PLUGIN = "device-plugin"


@dataclass(frozen=True)
class HolderPod:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class HolderRow:
    """One process holding one device's node open (a row of ``devctl who``)."""

    kind: str
    resource: str
    device: str
    path: str
    pid: int
    command: str
    container_id: str | None
    pod: HolderPod | None
    container: str | None
    allocated: bool | None  # None: its container's Allocate reply could not be decoded


@dataclass(frozen=True)
class _Where:
    pod: HolderPod | None
    container: str | None


class _Join:
    """The lookups ``who`` and the checks share, built once per snapshot."""

    def __init__(self, snapshot: NodeSnapshot):
        self.snapshot = snapshot
        self.nodes = device_nodes(snapshot.checkpoint)  # (resource, id) -> host paths
        self.by_path: dict[str, list[tuple[str, str]]] = {}
        for key, paths in self.nodes.items():
            for p in paths:
                self.by_path.setdefault(p, []).append(key)
        # (pod UID, container) -> {host path: [(resource, id)]}: what each container was given.
        self.given: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = {}
        self.undecoded: set[tuple[str, str]] = set()  # (pod UID, container) with an AllocResp not decoded
        for e in snapshot.checkpoint.entries if snapshot.checkpoint is not None else ():
            if e.allocation is None:
                self.undecoded.add((e.pod_uid, e.container))
                continue
            ids = [i for group in e.device_ids.values() for i in group]
            paths_of = self.given.setdefault((e.pod_uid, e.container), {})
            for d in e.allocation.devices:
                if d.host_path:
                    paths_of.setdefault(d.host_path, []).extend((e.resource, i) for i in ids)
        names = {i.uid: (i.namespace, i.name) for i in snapshot.pod_identities}
        runtime = snapshot.runtime
        sandboxes = {s.id: s for s in runtime.sandboxes} if runtime is not None else {}
        for sandbox in sandboxes.values():
            names.setdefault(sandbox.uid, (sandbox.namespace, sandbox.name))
        self.names = names
        self.containers: dict[str, _Where] = {}
        for c in runtime.containers if runtime is not None else ():
            s = sandboxes.get(c.sandbox_id)
            self.containers[c.id] = _Where(HolderPod(s.namespace, s.name, s.uid) if s else None, c.name)
        self.running_uids = set(names)

    def where(self, p: Process) -> _Where:
        """The pod and container of a process: the runtime's names, else the pod its cgroup names."""
        if p.container_id is not None and p.container_id in self.containers:
            return self.containers[p.container_id]
        if p.pod_uid is not None and p.pod_uid in self.names:
            namespace, name = self.names[p.pod_uid]
            return _Where(HolderPod(namespace, name, p.pod_uid), None)
        return _Where(None, None)

    def _given_to(self, at: _Where) -> dict[str, list[tuple[str, str]]]:
        """The device nodes given to a process' container; to any container of its pod when only the pod is known."""
        if at.pod is None:
            return {}
        if at.container is not None:
            return self.given.get((at.pod.uid, at.container), {})
        merged: dict[str, list[tuple[str, str]]] = {}
        for (uid, _), paths in self.given.items():
            if uid == at.pod.uid:
                for path, keys in paths.items():
                    merged.setdefault(path, []).extend(keys)
        return merged

    def _unknown(self, at: _Where) -> bool | None:
        """False (not given), or None when one of the container's Allocate replies could not be decoded."""
        if at.pod is None:
            return False
        uid = at.pod.uid
        if any(u == uid and (at.container is None or c == at.container) for u, c in self.undecoded):
            return None
        return False

    def rows(self) -> list[HolderRow]:
        out = []
        for p in self.snapshot.procs.processes if self.snapshot.procs is not None else ():
            at = self.where(p)
            given = self._given_to(at)
            for path in p.devices:
                allocated: bool | None
                if path in given:
                    allocated, keys = True, given[path]
                else:
                    # Not given to its container (nor, when only the pod is known, to any of the pod's),
                    # unless a reply of that container could not be decoded: then nobody can tell.
                    allocated, keys = self._unknown(at), self.by_path.get(path, [])
                for resource, device in dict.fromkeys(keys):
                    out.append(
                        HolderRow(
                            DEVICE_PLUGIN, resource, device, path, p.pid, p.command, p.container_id,
                            at.pod, at.container, allocated,
                        )
                    )  # fmt: skip
        return out


def holders_view(snapshot: NodeSnapshot) -> tuple[HolderRow, ...]:
    """Every (process, device) pair where the process holds one of the device's nodes open."""
    return tuple(sorted(_Join(snapshot).rows(), key=lambda r: (r.resource, r.device, r.pid, r.path)))


def container_holders(snapshot: NodeSnapshot, namespace: str, pod: str, container: str) -> tuple[HolderRow, ...] | None:
    """The holder rows of one container (or of its pod, where the runtime named no container); None: not scanned."""
    if snapshot.procs is None:
        return None
    return tuple(
        r
        for r in holders_view(snapshot)
        if r.pod is not None and (r.pod.namespace, r.pod.name) == (namespace, pod) and r.container in (container, None)
    )


def device_paths(snapshot: NodeSnapshot) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each allocated device's node host paths (from the checkpoint's Allocate replies); absent: none known."""
    return device_nodes(snapshot.checkpoint)


def holder_counts(snapshot: NodeSnapshot) -> dict[tuple[str, str], int] | None:
    """Processes holding each device open (``PROCS`` of ``devices -o wide``); None when /proc was not read."""
    if snapshot.procs is None:
        return None
    counts: dict[tuple[str, str], set[int]] = {}
    for r in holders_view(snapshot):
        counts.setdefault((r.resource, r.device), set()).add(r.pid)
    return {k: len(v) for k, v in counts.items()}


def match_target(rows: Iterable[HolderRow], target: str) -> list[HolderRow]:
    """The rows a ``who`` argument names: a device ID, a /dev path, a resource, a driver."""
    return [r for r in rows if target in (r.device, r.path, r.resource, r.kind)]


def known_targets(snapshot: NodeSnapshot) -> set[str]:
    """Every name ``who`` accepts on this node, whether or not anything holds it now."""
    nodes = device_nodes(snapshot.checkpoint)
    names = {resource for resource, _ in nodes} | {device for _, device in nodes}
    names |= {p for paths in nodes.values() for p in paths}
    for plugin in snapshot.plugins:
        if plugin.resource:
            names.add(plugin.resource)
            names.update(d.id for d in plugin.devices)
    return names


def without_absent_runtime(snapshot: NodeSnapshot) -> NodeSnapshot:
    """The snapshot without the errors of a CRI socket or ``<proc>`` that does not exist.

    For doctor a node without them is a node without that source, not a problem
    of its devices: the holder checks are skipped, and nothing else is said.
    """
    errors = tuple(e for e in snapshot.errors if not (e.source in (PROCS, RUNTIME) and e.kind == ErrorKind.MISSING))
    return snapshot if errors == snapshot.errors else replace(snapshot, errors=errors)


# --- doctor -------------------------------------------------------------------------------------


def _who(r: HolderRow) -> str:
    return f"pid {r.pid} ({r.command.split(' ')[0] or '?'})"


def holder_findings(snapshot: NodeSnapshot) -> list[Finding]:
    """``device-used-not-allocated``, ``device-used-outside-pods`` and ``allocated-device-idle``."""
    if snapshot.procs is None:
        return []
    join = _Join(snapshot)
    rows = join.rows()
    out: list[Finding] = []
    seen: set[tuple[int, str, str]] = set()
    for r in rows:
        key = (r.pid, r.resource, r.path)
        if key in seen:
            continue
        seen.add(key)
        devices = sorted({x.device for x in rows if (x.pid, x.resource, x.path) == key})
        if r.allocated is False and r.pod is not None:
            out.append(
                Finding(
                    "error",
                    "device-used-not-allocated",
                    f"{r.pod.namespace}/{r.pod.name}/{r.container or '?'}",
                    f"{_who(r)} holds {r.path} open ({r.resource} {', '.join(devices)}), "
                    "which the kubelet did not give this container",
                    "a privileged container or a hostPath /dev mount bypasses the device plugin: "
                    "the device may be handed to another pod as well; give it through a resource request",
                )
            )
        elif r.allocated is False and r.pod is None:
            out.append(
                Finding(
                    "warning",
                    "device-used-outside-pods",
                    f"pid {r.pid}",
                    f"{_who(r)}, outside any running pod, holds {r.path} open ({r.resource} {', '.join(devices)})",
                    "a host process or one left behind by a pod that is gone: "
                    "stop it before the kubelet hands the device to another pod",
                )
            )
    out.extend(_idle(snapshot, join, rows))
    return out


def _idle(snapshot: NodeSnapshot, join: _Join, rows: list[HolderRow]) -> list[Finding]:
    """Containers given device nodes none of whose processes opens any: only when every fd and container is known."""
    if snapshot.runtime is None or any(
        e.source == PROCS and e.kind == ErrorKind.PERMISSION_DENIED for e in snapshot.errors
    ):
        return []
    used = {(r.pod.uid, r.container) for r in rows if r.allocated and r.pod is not None}
    running = {(w.pod.uid, w.container) for w in join.containers.values() if w.pod is not None}
    out = []
    for (uid, container), paths in sorted(join.given.items()):
        if (
            not paths
            or (uid, container) in join.undecoded
            or (uid, container) in used
            or (uid, container) not in running
        ):
            continue
        namespace, name = join.names.get(uid, ("?", uid))
        devices = sorted({f"{res} {dev}" for keys in paths.values() for res, dev in keys})
        out.append(
            Finding(
                "info",
                "allocated-device-idle",
                f"{namespace}/{name}/{container}",
                f"holds {', '.join(devices)} but none of its processes has {', '.join(sorted(paths))} open",
                "an idle allocation keeps the device from other pods: check the workload uses it, or lower its request",
            )
        )
    return out


__all__ = [
    "HolderPod",
    "HolderRow",
    "container_holders",
    "device_paths",
    "holder_counts",
    "holder_findings",
    "holders_view",
    "known_targets",
    "match_target",
]
