"""The kubelet's CPU and memory manager state beside what pod-resources says, and the findings of doctor on it.

The CPU manager's file is what the kubelet restores at start and enforces in
cgroups; pod-resources is what it reports. They should say the same; when they
do not, or when the file contradicts the kubelet's own config, something edited
one of them or the kubelet will refuse to start
(pkg/kubelet/cm/cpumanager/state/state_checkpoint.go: a checksum mismatch or a
policy other than the configured one fails the restore).
"""

from __future__ import annotations

from dataclasses import dataclass

from devctl.analyze.topology import topology_view
from devctl.model import CpuManagerState, Finding, MemoryManagerState, NodeSnapshot, Severity

# Topology-manager policies that refuse (restricted) or never admit
# (single-numa-node) a pod whose resources are not aligned.
ALIGNING_POLICIES = ("restricted", "single-numa-node")


@dataclass(frozen=True)
class CpuStateRow:
    """One container's exclusive CPUs in cpu_manager_state beside pod-resources (None: pod-resources does not say)."""

    pod_uid: str
    namespace: str | None
    pod: str | None
    container: str
    state_cpus: tuple[int, ...]
    pod_resources_cpus: tuple[int, ...] | None
    agrees: bool | None


@dataclass(frozen=True)
class KubeletStateView:
    cpu_policy: str | None
    default_cpus: tuple[int, ...] | None
    cpu_checksum_ok: bool | None
    cpu_assignments: tuple[CpuStateRow, ...]
    memory_policy: str | None
    memory_assignments: int
    memory_checksum_ok: bool | None
    configured_cpu_policy: str | None
    configured_memory_policy: str | None
    topology_manager_policy: str | None
    topology_manager_scope: str | None
    # Which layout and which kubelet's rules each checksum verdict follows (node.kubeletstate).
    cpu_checksum_rule: str | None = None
    memory_checksum_rule: str | None = None


def kubelet_state_view(snapshot: NodeSnapshot) -> KubeletStateView | None:
    """The decoded state files joined with pod-resources; None when they were not read."""
    state = snapshot.kubelet_state
    if state is None:
        return None
    names = {i.uid: (i.namespace, i.name) for i in snapshot.pod_identities}
    if snapshot.runtime is not None:
        for s in snapshot.runtime.sandboxes:
            names.setdefault(s.uid, (s.namespace, s.name))
    # A kubelet that serves only v1alpha1 (no GetAllocatableResources) reports no CPUs at all: unknown, not none.
    reported = {
        (p.namespace, p.name, c.name): c.cpu_ids
        for p in (snapshot.pods or () if snapshot.allocatable is not None else ())
        for c in p.containers
    }
    rows = []
    for a in state.cpu.assignments if state.cpu is not None else ():
        namespace, pod = names.get(a.pod_uid, (None, None))
        pr = reported.get((namespace, pod, a.container)) if namespace is not None and pod is not None else None
        if pr is not None:
            pr = tuple(sorted(pr))
        agrees = None if pr is None else pr == tuple(sorted(a.cpus))
        rows.append(CpuStateRow(a.pod_uid, namespace, pod, a.container, a.cpus, pr, agrees))
    config = state.config
    return KubeletStateView(
        cpu_policy=state.cpu.policy if state.cpu else None,
        default_cpus=state.cpu.default_cpus if state.cpu else None,
        cpu_checksum_ok=state.cpu.checksum_ok if state.cpu else None,
        cpu_assignments=tuple(rows),
        memory_policy=state.memory.policy if state.memory else None,
        memory_assignments=len(state.memory.assignments) if state.memory else 0,
        memory_checksum_ok=state.memory.checksum_ok if state.memory else None,
        configured_cpu_policy=config.cpu_manager_policy if config else None,
        configured_memory_policy=config.memory_manager_policy if config else None,
        topology_manager_policy=config.topology_manager_policy if config else None,
        topology_manager_scope=config.topology_manager_scope if config else None,
        cpu_checksum_rule=state.cpu.checksum_rule if state.cpu else None,
        memory_checksum_rule=state.memory.checksum_rule if state.memory else None,
    )


def kubelet_state_findings(snapshot: NodeSnapshot) -> list[Finding]:
    """``cpu-state-checksum``, ``memory-state-checksum``, ``cpu-state-policy``, ``cpu-state-mismatch``,
    ``cpu-exclusive-overlap``, ``topology-policy-violated``."""
    view = kubelet_state_view(snapshot)
    state = snapshot.kubelet_state
    if view is None or state is None:
        return []
    out: list[Finding] = []
    cpu = state.cpu
    if state.memory is not None and state.memory.checksum_ok is False:
        out.append(_checksum_finding(state.memory, "memory-state-checksum"))
    if cpu is not None:
        if cpu.checksum_ok is False:
            out.append(_checksum_finding(cpu, "cpu-state-checksum"))
        configured = view.configured_cpu_policy
        if not cpu.known_policy or (configured is not None and configured != cpu.policy):
            why = f"policy {cpu.policy!r}" + (f", the kubelet is configured with {configured!r}" if configured else "")
            out.append(
                Finding(
                    Severity.ERROR if configured is not None else Severity.WARNING,
                    "cpu-state-policy",
                    cpu.path,
                    f"{why}: the kubelet refuses a state file of another policy at start",
                    "after changing cpuManagerPolicy, drain the node and remove cpu_manager_state "
                    "before the kubelet starts",
                )
            )
        for r in view.cpu_assignments:
            if r.agrees is False:
                out.append(
                    Finding(
                        Severity.ERROR,
                        "cpu-state-mismatch",
                        f"{r.namespace}/{r.pod}/{r.container}",
                        f"cpu_manager_state gives CPUs {_cpus(r.state_cpus)}, pod-resources reports "
                        f"{_cpus(r.pod_resources_cpus or ())}",
                        "the kubelet enforces the state file in cgroups: one of the two is stale; restart the kubelet "
                        "to reconcile, or drain the node",
                    )
                )
        if cpu.policy == "static":
            out.extend(_overlaps(snapshot))
    out.extend(_topology_policy(snapshot, view))
    return out


def _checksum_finding(part: CpuManagerState | MemoryManagerState, code: str) -> Finding:
    """A state file whose checksum does not verify: the kubelet refuses to start on it (unless another version
    reads it)."""
    rule = f" ({part.checksum_rule})" if part.checksum_rule else ""
    if part.accepted_by:
        # Some kubelet still reads it: a warning (devctl does not know which kubelet runs), never advice to remove it.
        return Finding(
            Severity.WARNING,
            code,
            part.path,
            f"the checksum does not verify{rule}: such a kubelet refuses to start on it; {part.accepted_by} reads it",
            f"{part.accepted_by} reads it: keep the file; before moving to a kubelet that refuses it, restore it "
            "from the kubelet that wrote it",
        )
    return Finding(
        Severity.ERROR,
        code,
        part.path,
        f"the checksum {part.checksum} does not match the content{rule}: the kubelet will refuse to start",
        "something edited the file by hand: restore it, or drain the node and remove it before the "
        "kubelet starts (it then rebuilds the state)",
    )


def _cpus(cpus: tuple[int, ...]) -> str:
    from devctl.base.units import format_cpulist

    return format_cpulist(cpus) or "none"


def _overlaps(snapshot: NodeSnapshot) -> list[Finding]:
    state = snapshot.kubelet_state
    assert state is not None and state.cpu is not None
    owner: dict[int, str] = {c: "the shared pool (defaultCpuSet)" for c in state.cpu.default_cpus}
    out = []
    for a in state.cpu.assignments:
        who = f"{a.pod_uid}/{a.container}"
        clash = sorted({owner[c] for c in a.cpus if c in owner})
        if clash:
            out.append(
                Finding(
                    Severity.ERROR,
                    "cpu-exclusive-overlap",
                    who,
                    f"exclusive CPUs {_cpus(a.cpus)} are also given to {', '.join(clash)}",
                    "under the static policy exclusive CPUs belong to one container only: the state file is "
                    "corrupt; drain the node and remove cpu_manager_state",
                )
            )
        for c in a.cpus:
            owner.setdefault(c, who)
    return out


def _topology_policy(snapshot: NodeSnapshot, view: KubeletStateView) -> list[Finding]:
    policy = view.topology_manager_policy
    if policy not in ALIGNING_POLICIES or snapshot.pods is None:
        return []
    out = []
    for a in topology_view(snapshot).alignment:
        if a.aligned is False:
            out.append(
                Finding(
                    Severity.WARNING,
                    "topology-policy-violated",
                    f"{a.namespace}/{a.pod}/{a.container}",
                    f"topologyManagerPolicy is {policy}, yet its devices, CPUs and memory are not on one NUMA node",
                    "the kubelet admitted it under another policy (changed since), or the config.yaml devctl read "
                    "is not the one the kubelet runs with",
                )
            )
    return out
