"""CDI names in use, resolved as the container runtime resolves them (``devctl cdi``, claims' NUMA nodes).

A fully qualified name ``vendor/class=dev`` is looked up among the valid
specs of kind ``vendor/class``: the spec in the highest-priority dir wins; the
same device in two specs of the same priority is a conflict and neither is
used (the runtime refuses it). A device's edits are its spec's plus its own.
Names come from where the kubelet keeps them: a device plugin's
``AllocResp.cdi_devices`` in the device-manager checkpoint, DRA devices'
``CDIDeviceIDs`` in ``dra_manager_state``, and pod-resources' claim devices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from devctl.model import CdiDeviceNode, CdiMount, CdiSpec, NodeSnapshot

RESOLVED = "resolved"
UNRESOLVABLE = "unresolvable"
CONFLICT = "conflict"


@dataclass(frozen=True)
class CdiUse:
    """Who uses a CDI name: a device plugin's container or a DRA claim, and its pod when known."""

    kind: str  # "device-plugin" | "dra"
    claim: str | None = None  # ns/name, for DRA
    resource: str | None = None  # for device plugins
    pod: str | None = None  # ns/name, or the pod's UID when no name is known


@dataclass(frozen=True)
class CdiName:
    name: str
    status: str  # resolved | unresolvable | conflict
    spec: str | None  # the winning spec file (resolved), else None
    device_nodes: tuple[CdiDeviceNode, ...] = ()
    mounts: tuple[CdiMount, ...] = ()
    env: tuple[str, ...] = ()
    net_devices: tuple[str, ...] = ()
    used_by: tuple[CdiUse, ...] = ()
    conflicting: tuple[str, ...] = ()  # the spec files defining it at the same (highest) priority


@dataclass(frozen=True)
class CdiSpecRow:
    path: str
    kind: str | None
    cdi_version: str | None
    devices: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class CdiView:
    dirs: tuple[str, ...]
    specs: tuple[CdiSpecRow, ...]
    names: tuple[CdiName, ...]


def unjudged_kinds(view: CdiView) -> list[str]:
    """The kinds of the unresolvable names that only device plugins use and that no valid spec in the dirs has.

    devctl may be reading other dirs than the runtime's (the runtime's CDI
    config is not on the kubelet's side), so such a name is not called an
    error (doctor's ``cdi-unresolvable``); a DRA claim's names are always
    judged, as its driver writes one spec per claim. Sorted.
    """
    kinds = {s.kind for s in view.specs if s.kind and not s.error}
    return sorted(
        {
            kind
            for n in view.names
            if n.status == UNRESOLVABLE
            and n.used_by
            and not any(u.kind == "dra" for u in n.used_by)
            and (kind := n.name.split("=", 1)[0]) not in kinds
        }
    )


def _pod_names(snapshot: NodeSnapshot) -> dict[str, str]:
    return {i.uid: f"{i.namespace}/{i.name}" for i in snapshot.pod_identities if i.name}


def names_in_use(snapshot: NodeSnapshot) -> dict[str, list[CdiUse]]:
    """Every CDI name the kubelet handed to a container (or will), and who uses it; in first-seen order."""
    uses: dict[str, list[CdiUse]] = {}
    pod_names = _pod_names(snapshot)

    def add(name: str, use: CdiUse) -> None:
        found = uses.setdefault(name, [])
        if use not in found:
            found.append(use)

    for e in snapshot.checkpoint.entries if snapshot.checkpoint else ():
        for name in e.allocation.cdi_devices if e.allocation else ():
            add(name, CdiUse("device-plugin", resource=e.resource, pod=pod_names.get(e.pod_uid, e.pod_uid)))
    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        pods: list[str | None] = [pod_names.get(u, u) for u in c.pod_uids] or [None]
        for cd in c.devices:
            for name in cd.cdi_devices:
                for pod in pods:
                    add(name, CdiUse("dra", claim=f"{c.namespace}/{c.name}", pod=pod))
    for p in snapshot.pods or ():
        for ctr in p.containers:
            for dr in ctr.dynamic_resources:
                for d in dr.devices:
                    for name in d.cdi_devices:
                        claim = f"{dr.claim_namespace}/{dr.claim_name}"
                        pod = f"{p.namespace}/{p.name}"
                        if not any(u.claim == claim and u.pod in (pod, None) for u in uses.get(name, ())):
                            add(name, CdiUse("dra", claim=claim, pod=pod))
    return uses


class Resolver:
    """The valid specs of a node indexed by qualified device name, for resolving names as the runtime does."""

    def __init__(self, specs: Iterable[CdiSpec]):
        self._by_name: dict[str, list[tuple[CdiSpec, int]]] = {}
        for spec in specs:
            if spec.error or spec.kind is None:
                continue
            for i, d in enumerate(spec.devices):
                self._by_name.setdefault(f"{spec.kind}={d.name}", []).append((spec, i))

    def device_nodes(self, name: str) -> tuple[CdiDeviceNode, ...] | None:
        """The device nodes of ``name`` when it resolves, else None: what a claim's NUMA needs, nothing more made."""
        found = self._by_name.get(name)
        if not found:
            return None
        if len(found) > 1:
            top = max(spec.priority for spec, _ in found)
            found = [(spec, i) for spec, i in found if spec.priority == top]
            if len(found) > 1:
                return None  # a conflict
        spec, i = found[0]
        return spec.edits.device_nodes + spec.devices[i].edits.device_nodes

    def resolve(self, name: str, used_by: Iterable[CdiUse] = ()) -> CdiName:
        found = self._by_name.get(name)
        if not found:
            return CdiName(name, UNRESOLVABLE, None, used_by=tuple(used_by))
        top = max(spec.priority for spec, _ in found)
        winners = [(spec, i) for spec, i in found if spec.priority == top]
        if len(winners) > 1:
            paths = tuple(sorted(spec.path for spec, _ in winners))
            return CdiName(name, CONFLICT, None, used_by=tuple(used_by), conflicting=paths)
        spec, i = winners[0]
        own = spec.devices[i].edits
        return CdiName(
            name,
            RESOLVED,
            spec.path,
            device_nodes=spec.edits.device_nodes + own.device_nodes,
            mounts=spec.edits.mounts + own.mounts,
            env=spec.edits.env + own.env,
            net_devices=spec.edits.net_devices + own.net_devices,
            used_by=tuple(used_by),
        )


def resolver(snapshot: NodeSnapshot) -> Resolver:
    return Resolver(snapshot.cdi.specs if snapshot.cdi else ())


def numa_of_nodes(nodes: Iterable[CdiDeviceNode]) -> tuple[int, ...]:
    """The NUMA nodes of device nodes (sysfs through their major:minor), sorted, each once."""
    return tuple(sorted({n.numa_node for n in nodes if n.numa_node is not None}))


def cdi_view(snapshot: NodeSnapshot, names: Iterable[str] | None = None) -> CdiView:
    """Spec dirs, every spec file, and the names in use (or ``names``) resolved."""
    cdi = snapshot.cdi
    uses = names_in_use(snapshot)
    wanted = list(dict.fromkeys(names)) if names else list(uses)
    r = resolver(snapshot)
    specs = tuple(
        CdiSpecRow(s.path, s.kind, s.cdi_version, tuple(d.name for d in s.devices), s.error)
        for s in (cdi.specs if cdi else ())
    )
    return CdiView(
        dirs=cdi.dirs if cdi else snapshot.paths.cdi_dirs,
        specs=specs,
        names=tuple(r.resolve(n, uses.get(n, ())) for n in wanted),
    )
