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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from devctl.analyze.cdi import Resolver, resolver
from devctl.model import PROCS, RUNTIME, CheckpointEntry, ErrorKind, Finding, NodeSnapshot, Process, Severity
from devctl.model.allocations import device_nodes

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"

# A device as ``who`` names it: (kind, resource or DRA driver, device ID or DRA <pool>/<device>).
DeviceKey = tuple[str, str, str]


@dataclass(frozen=True)
class HolderPod:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class HolderRow:
    """One process holding one device's node open (a row of ``devctl who``)."""

    kind: str
    resource: str  # the DRA driver for kind "dra"
    device: str  # <pool>/<device> for kind "dra"
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


def _cdi_paths(names: Iterable[str], cdi: Resolver) -> list[str]:
    """The host paths of the device nodes behind CDI names, resolved as the runtime resolves them."""
    return [n.host_path for name in names for n in cdi.resolve(name).device_nodes]


def _ids(entry: CheckpointEntry) -> list[str]:
    return [i for group in entry.device_ids.values() for i in group]


def _cdi_nodes_of(names: Iterable[str], ids: list[str], cdi: Resolver) -> Iterator[tuple[str, list[str]]]:
    """(device ID, host paths) for the CDI names of one Allocate reply: a name ``vendor/class=<ID>`` of one
    of the request's devices is that device's (the plugins' convention); any other belongs to all of them,
    as the reply's device specs do."""
    for name in names:
        paths = _cdi_paths([name], cdi)
        device = name.split("=", 1)[-1]
        for device_id in [device] if device in ids else ids:
            yield device_id, paths


def _add(to: dict[str, list[DeviceKey]], paths: Iterable[str], keys: Iterable[DeviceKey]) -> None:
    keys = list(keys)
    for path in paths:
        to.setdefault(path, []).extend(keys)


def dra_devices(snapshot: NodeSnapshot) -> dict[DeviceKey, tuple[str, ...]]:
    """Each DRA device the kubelet prepared (dra_manager_state), with the host paths of its CDI device nodes."""
    cdi = resolver(snapshot)
    out: dict[DeviceKey, dict[str, None]] = {}
    for claim in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint is not None else ():
        for d in claim.devices:
            key = (DRA, d.driver, f"{d.pool}/{d.device}")
            out.setdefault(key, {}).update(dict.fromkeys(_cdi_paths(d.cdi_devices, cdi)))
    return {key: tuple(paths) for key, paths in out.items()}


def plugin_devices(snapshot: NodeSnapshot, cdi: Resolver | None = None) -> dict[DeviceKey, tuple[str, ...]]:
    """Each device-plugin device the checkpoint allocates, with its nodes: the Allocate reply's device specs
    and the device nodes of the CDI names in that reply."""
    cdi = cdi if cdi is not None else resolver(snapshot)
    out: dict[DeviceKey, dict[str, None]] = {
        (DEVICE_PLUGIN, resource, device): dict.fromkeys(paths)
        for (resource, device), paths in device_nodes(snapshot.checkpoint).items()
    }
    for e in snapshot.checkpoint.entries if snapshot.checkpoint is not None else ():
        if e.allocation is not None:
            for device_id, paths in _cdi_nodes_of(e.allocation.cdi_devices, _ids(e), cdi):
                out.setdefault((DEVICE_PLUGIN, e.resource, device_id), {}).update(dict.fromkeys(paths))
    return {key: tuple(paths) for key, paths in out.items()}


def device_paths(snapshot: NodeSnapshot) -> dict[DeviceKey, tuple[str, ...]]:
    """Every device the node hands out with the host paths of its nodes (an empty tuple: none known)."""
    return {**plugin_devices(snapshot), **dra_devices(snapshot)}


class _Join:
    """The lookups ``who`` and the checks share, built once per snapshot."""

    def __init__(self, snapshot: NodeSnapshot):
        self.snapshot = snapshot
        cdi = resolver(snapshot)
        self.nodes = {**plugin_devices(snapshot, cdi), **dra_devices(snapshot)}
        self.by_path: dict[str, list[DeviceKey]] = {}
        for key, paths in self.nodes.items():
            _add(self.by_path, paths, [key])
        names = {i.uid: (i.namespace, i.name) for i in snapshot.pod_identities}
        runtime = snapshot.runtime
        sandboxes = {s.id: s for s in runtime.sandboxes} if runtime is not None else {}
        for sandbox in sandboxes.values():
            names.setdefault(sandbox.uid, (sandbox.namespace, sandbox.name))
        self.names = names
        # (pod UID, container) -> {host path: [device]}: what each container was given;
        # given_pod: what a whole pod was given, where no source names the containers (a DRA claim
        # without pod-resources).
        self.given: dict[tuple[str, str], dict[str, list[DeviceKey]]] = {}
        self.given_pod: dict[str, dict[str, list[DeviceKey]]] = {}
        self.undecoded: set[tuple[str, str]] = set()  # (pod UID, container) with an AllocResp not decoded
        for e in snapshot.checkpoint.entries if snapshot.checkpoint is not None else ():
            if e.allocation is None:
                self.undecoded.add((e.pod_uid, e.container))
                continue
            keys = [(DEVICE_PLUGIN, e.resource, i) for i in _ids(e)]
            paths_of = self.given.setdefault((e.pod_uid, e.container), {})
            _add(paths_of, (d.host_path for d in e.allocation.devices if d.host_path), keys)
            for device_id, named in _cdi_nodes_of(e.allocation.cdi_devices, _ids(e), cdi):
                _add(paths_of, named, [(DEVICE_PLUGIN, e.resource, device_id)])
        self._given_claims(cdi)
        # Whether "in no running pod" can be said of a process: only the CRI runtime lists every running
        # container; without it a process devctl cannot place is an unknown holder (the runtime's error says why).
        self.runtime_known = runtime is not None and not any(e.source == RUNTIME for e in snapshot.errors)
        self.containers: dict[str, _Where] = {}
        for c in runtime.containers if runtime is not None else ():
            s = sandboxes.get(c.sandbox_id)
            self.containers[c.id] = _Where(HolderPod(s.namespace, s.name, s.uid) if s else None, c.name)

    def _given_claims(self, cdi: Resolver) -> None:
        """DRA claims: to the containers pod-resources says use them, else to every container of their pods."""
        users: dict[tuple[str, str], set[tuple[str, str]]] = {}  # claim (ns, name) -> {(pod ns/name, container)}
        for p in self.snapshot.pods or ():
            for c in p.containers:
                for dr in c.dynamic_resources:
                    users.setdefault((dr.claim_namespace, dr.claim_name), set()).add(
                        (f"{p.namespace}/{p.name}", c.name)
                    )
        for claim in self.snapshot.dra_checkpoint.claims if self.snapshot.dra_checkpoint is not None else ():
            for d in claim.devices:
                key = (DRA, d.driver, f"{d.pool}/{d.device}")
                paths = _cdi_paths(d.cdi_devices, cdi)
                for uid in claim.pod_uids:
                    pod = "/".join(self.names.get(uid, ("", "")))
                    containers = [c for p, c in users.get((claim.namespace, claim.name), ()) if p == pod]
                    for container in containers:
                        _add(self.given.setdefault((uid, container), {}), paths, [key])
                    if not containers:
                        _add(self.given_pod.setdefault(uid, {}), paths, [key])

    def where(self, p: Process) -> _Where:
        """The pod and container of a process: the runtime's names, else the pod its cgroup names."""
        if p.container_id is not None and p.container_id in self.containers:
            return self.containers[p.container_id]
        if p.pod_uid is not None and p.pod_uid in self.names:
            namespace, name = self.names[p.pod_uid]
            return _Where(HolderPod(namespace, name, p.pod_uid), None)
        return _Where(None, None)

    def _given_to(self, at: _Where) -> dict[str, list[DeviceKey]]:
        """The device nodes given to a process' container (or its whole pod); to any container of its pod
        when only the pod is known."""
        if at.pod is None:
            return {}
        merged: dict[str, list[DeviceKey]] = {}
        for path, keys in self.given_pod.get(at.pod.uid, {}).items():
            merged.setdefault(path, []).extend(keys)
        for (uid, container), paths in self.given.items():
            if uid == at.pod.uid and at.container in (None, container):
                for path, keys in paths.items():
                    merged.setdefault(path, []).extend(keys)
        return merged

    def _unknown(self, at: _Where) -> bool | None:
        """False (not given), or None when one of the container's Allocate replies could not be decoded, or
        when the process is in no pod devctl knows and the runtime, which knows every running one, was not read."""
        if at.pod is None:
            return False if self.runtime_known else None
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
                for kind, resource, device in dict.fromkeys(keys):
                    out.append(
                        HolderRow(
                            kind, resource, device, path, p.pid, p.command, p.container_id,
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


def scan_incomplete(snapshot: NodeSnapshot) -> bool:
    """Whether the deadline stopped the ``<proc>`` scan before every process was read: then nothing may be said
    of a device that no process read holds (not "0 holders", not "idle")."""
    return any(e.source == PROCS and e.kind == ErrorKind.TIMEOUT for e in snapshot.errors)


def holder_counts(snapshot: NodeSnapshot) -> dict[tuple[str, str], int] | None:
    """Processes holding each device open (``PROCS`` of ``devices -o wide``, by resource or driver and device ID);
    None when /proc was not read, or not all of it (the deadline). A device of which no node is known is absent:
    how many hold it is unknown."""
    if snapshot.procs is None or scan_incomplete(snapshot):
        return None
    counts: dict[tuple[str, str], set[int]] = {
        (resource, device): set() for (_, resource, device), paths in device_paths(snapshot).items() if paths
    }
    for r in holders_view(snapshot):
        counts.setdefault((r.resource, r.device), set()).add(r.pid)
    return {k: len(v) for k, v in counts.items()}


def _names(key: DeviceKey) -> tuple[str, ...]:
    """What names one device on the command line: its resource or driver, its ID, and a DRA device's own name."""
    kind, resource, device = key
    return (resource, device, kind, device.rsplit("/", 1)[-1]) if kind == DRA else (resource, device, kind)


def match_target(rows: Iterable[HolderRow], target: str) -> list[HolderRow]:
    """The rows a ``who`` argument names: a device ID (a DRA device's <pool>/<device> or its name), a /dev path,
    a resource, a DRA driver."""
    return [r for r in rows if target == r.path or target in _names((r.kind, r.resource, r.device))]


def _known_devices(snapshot: NodeSnapshot) -> dict[DeviceKey, tuple[str, ...]]:
    """Every device of the node, with its nodes where known: those the kubelet handed out, and the rest that
    a device plugin or a DRA driver's health stream lists (no container was given them, so no reply names
    their nodes)."""
    known: dict[DeviceKey, tuple[str, ...]] = {}
    for plugin in snapshot.plugins:
        if plugin.resource:
            known.update(((DEVICE_PLUGIN, plugin.resource, d.id), ()) for d in plugin.devices)
        if plugin.dra_driver:
            health = plugin.dra.health if plugin.dra is not None else None
            known.update(((DRA, plugin.dra_driver, f"{h.pool}/{h.device}"), ()) for h in health or ())
    known.update(device_paths(snapshot))
    return known


def known_targets(snapshot: NodeSnapshot) -> set[str]:
    """Every name ``who`` accepts on this node, whether or not anything holds it now."""
    names: set[str] = set()
    for key, paths in _known_devices(snapshot).items():
        names.update(_names(key))
        names.update(paths)
    for plugin in snapshot.plugins:
        if plugin.resource:
            names.add(plugin.resource)
        if plugin.dra_driver:
            names.add(plugin.dra_driver)
    return names


def without_nodes(snapshot: NodeSnapshot, target: str | None) -> list[DeviceKey]:
    """The devices ``target`` names (every device when None) of which no device node is known: no Allocate
    reply, CDI spec or prepared claim names one, so no process can be seen holding them."""
    return sorted(
        key
        for key, paths in _known_devices(snapshot).items()
        if not paths and (target is None or target in _names(key))
    )


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


# How many processes a finding names before it says "and N more".
MAX_PIDS = 8


def _pids(rows: list[HolderRow]) -> str:
    shown = ", ".join(_who(r) for r in rows[:MAX_PIDS])
    return shown if len(rows) <= MAX_PIDS else f"{shown} and {len(rows) - MAX_PIDS} more"


def holder_findings(snapshot: NodeSnapshot) -> list[Finding]:
    """``device-used-not-allocated``, ``device-used-outside-pods``, ``device-holder-unknown`` (a holder in no pod
    devctl knows, when the runtime could not say whether it runs in one: never told to stop) and
    ``allocated-device-idle``. Processes outside pods that hold one device node make one finding with their count
    (2,000 workers of one host daemon are one thing to do, not 2,000)."""
    if snapshot.procs is None:
        return []
    join = _Join(snapshot)
    rows = join.rows()
    out: list[Finding] = []
    devices_of: dict[tuple[int, str, str], set[str]] = {}
    for r in rows:
        devices_of.setdefault((r.pid, r.resource, r.path), set()).add(r.device)
    # (code, resource, path) -> one row per process, in pid order: the processes outside pods holding one node.
    outside: dict[tuple[str, str, str], list[HolderRow]] = {}
    seen: set[tuple[int, str, str]] = set()
    for r in rows:
        key = (r.pid, r.resource, r.path)
        if key in seen:
            continue
        seen.add(key)
        devices = sorted(devices_of[key])
        if r.allocated is False and r.pod is not None:
            out.append(
                Finding(
                    Severity.ERROR,
                    "device-used-not-allocated",
                    f"{r.pod.namespace}/{r.pod.name}/{r.container or '?'}",
                    f"{_who(r)} holds {r.path} open ({r.resource} {', '.join(devices)}), "
                    "which the kubelet did not give this container",
                    "a privileged container or a hostPath /dev mount bypasses the device plugin: "
                    "the device may be handed to another pod as well; give it through a resource request",
                )
            )
        elif r.allocated is None and r.pod is None:
            outside.setdefault(("device-holder-unknown", r.resource, r.path), []).append(r)
        elif r.allocated is False and r.pod is None:
            outside.setdefault(("device-used-outside-pods", r.resource, r.path), []).append(r)
    for (code, resource, path), held in outside.items():
        held.sort(key=lambda r: r.pid)
        ids = ", ".join(sorted({d for r in held for d in devices_of[(r.pid, r.resource, r.path)]}))
        one = len(held) == 1
        subject = f"pid {held[0].pid}" if one else path
        who = _who(held[0]) if one else f"{len(held)} processes ({_pids(held)})"
        if code == "device-holder-unknown":
            out.append(
                Finding(
                    Severity.INFO,
                    code,
                    subject,
                    f"{who} {'holds' if one else 'hold'} {path} open ({resource} {ids}); "
                    "in which pod, if any, is unknown: the CRI runtime could not be read",
                    "nothing says whether it may use the device, so devctl asks no one to stop it: "
                    "make the runtime readable (--runtime-endpoint) and run doctor again",
                )
            )
        else:
            out.append(
                Finding(
                    Severity.WARNING,
                    code,
                    subject,
                    f"{who}, outside any running pod, {'holds' if one else 'hold'} {path} open ({resource} {ids})",
                    "a host process or one left behind by a pod that is gone: "
                    f"stop {'it' if one else 'them'} before the kubelet hands the device to another pod",
                )
            )
    out.extend(_idle(snapshot, join, rows))
    return out


def _idle(snapshot: NodeSnapshot, join: _Join, rows: list[HolderRow]) -> list[Finding]:
    """Containers given device nodes none of whose processes opens any: only when every fd and container is known
    (not when some processes' fds were closed to devctl, nor when the deadline stopped the scan)."""
    if (
        snapshot.runtime is None
        or scan_incomplete(snapshot)
        or any(e.source == PROCS and e.kind == ErrorKind.PERMISSION_DENIED for e in snapshot.errors)
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
        devices = sorted({f"{res} {dev}" for keys in paths.values() for _, res, dev in keys})
        out.append(
            Finding(
                Severity.INFO,
                "allocated-device-idle",
                f"{namespace}/{name}/{container}",
                f"holds {', '.join(devices)} but none of its processes has {', '.join(sorted(paths))} open",
                "an idle allocation keeps the device from other pods: check the workload uses it, or lower its request",
            )
        )
    return out


__all__ = [
    "DeviceKey",
    "HolderPod",
    "HolderRow",
    "container_holders",
    "device_paths",
    "dra_devices",
    "holder_counts",
    "holder_findings",
    "holders_view",
    "known_targets",
    "match_target",
    "plugin_devices",
    "scan_incomplete",
    "without_nodes",
]
