"""The checks of ``devctl doctor``: findings derived from one NodeSnapshot and the views of ``analyze``.

Pure functions, no I/O, so a snapshot taken on a node (``--from FILE``) is
diagnosed anywhere exactly as on the node. The checks do not analyse anything
themselves: the counts, states, staleness and alignment come from the views the
read commands show, and a check only says what a person at the node should make
of them, and what to do.

Every source error ends up in a finding: the one its check knows the meaning of
(a stale socket, a kubelet that is down), else ``source-unreadable``. So the
findings alone tell the whole story, and the table needs no warning lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from devctl.analyze import doctor_checkpoint, doctor_kubelet, doctor_plugins, doctor_topology
from devctl.analyze.checkup import ERROR, RECHECK_AFTER, WARNING, Checkup, denied
from devctl.analyze.doctor_dra import check_dra
from devctl.analyze.doctor_history import history_findings
from devctl.analyze.doctor_pcie import gpu_nic_findings
from devctl.analyze.doctor_physical import physical_findings
from devctl.analyze.doctor_plugins import recheck_sockets
from devctl.analyze.doctor_pods import PodWaiting, pod_findings
from devctl.analyze.holders import holder_findings
from devctl.analyze.kubeletstate import kubelet_state_findings
from devctl.model import PROCS, SEVERITIES, ErrorKind, Finding, NodeSnapshot, Severity, Source
from devctl.model.history import NodeEvent
from devctl.model.pcie import PcieMatrix


def diagnose(
    snapshot: NodeSnapshot,
    again: NodeSnapshot | None = None,
    history: Sequence[NodeEvent] = (),
    pcie: tuple[PcieMatrix, frozenset[str]] | None = None,
    host_nodes: Mapping[str, str | None] | None = None,
    waiting: Sequence[PodWaiting] = (),
) -> tuple[Finding, ...]:
    """Every check on one snapshot: errors first, then warnings, then notes; within each, node-wide checks first.

    ``again`` is a second reading of the sockets that ``recheck_sockets`` named,
    taken a moment later: a disagreement between a plugin and the kubelet is an
    error only when it lasts into it. Without one (a snapshot file) a
    disagreement is a warning that says so. ``history`` is the node journal's events (``devctl record``):
    what they say of the devices (``doctor_history``). ``pcie`` is the PCIe matrix and the RDMA NICs
    (``core.pci.read_pci``): a container's GPU and RDMA NIC far apart (``doctor_pcie``). ``host_nodes``: the
    allocations' device nodes traced to PCI functions (``core.physical.read_host_nodes``) for the physical
    view's findings (``doctor_physical``: shared through replicas, doubled in a container, gone from sysfs).
    """
    checkup = Checkup(snapshot, again)
    for check in _CHECKS:
        check(checkup)
    _unexplained_errors(checkup)
    if history:
        checkup.findings.extend(
            history_findings(snapshot, history, datetime.fromisoformat(snapshot.taken_at.replace("Z", "+00:00")))
        )
    if pcie is not None:
        checkup.findings.extend(gpu_nic_findings(snapshot, *pcie))
    checkup.findings.extend(physical_findings(snapshot, host_nodes))
    checkup.findings.extend(pod_findings(waiting))  # containers waiting on their devices (doctor_pods)
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    return tuple(sorted(checkup.findings, key=lambda f: rank[f.severity]))


def fails_on(findings: Iterable[Finding], severity: Severity = ERROR) -> bool:
    """Whether any finding is as severe as ``severity`` or more (``devctl doctor --fail-on``)."""
    limit = SEVERITIES.index(severity)
    return any(SEVERITIES.index(f.severity) <= limit for f in findings)


# --- who holds the devices (devctl.analyze.holders) ----------------------------------------------------


def _device_holders(c: Checkup) -> None:
    c.findings.extend(holder_findings(c.snapshot))
    for e in c.explain(lambda e: e.source == PROCS and e.kind == ErrorKind.TIMEOUT):
        # The deadline stopped the <proc> scan: its line says how far it got; no container is called idle.
        hint = "no container is called idle and no count of holders is given: run again with a longer --timeout"
        c.add(WARNING, "source-unreadable", e.source, e.message, hint)


# --- the kubelet's CPU and memory state (devctl.analyze.kubeletstate) -----------------------------------


def _kubelet_state(c: Checkup) -> None:
    c.findings.extend(kubelet_state_findings(c.snapshot))


# --- whatever no check explained ---------------------------------------------------------------------


def _unexplained_errors(c: Checkup) -> None:
    for e in c.explain(lambda e: True):
        if denied(e) and e.even_as_root:
            # devctl was root already (the scan's line says so): "run devctl as root" would send a person in a circle.
            hint = (
                "run devctl with the host's capabilities and user namespace "
                "(kubectl debug node --profile=sysadmin; docker run --privileged --pid=host --userns=host)"
            )
            c.add(ERROR, "permission-denied", e.source, e.message, hint)
        elif denied(e):
            c.permission_denied(e.source)
        elif e.source == Source.SYSFS:
            hint = "NUMA alignment cannot be checked: point --sysfs at the host's /sys (/host/sys under kubectl debug)"
            c.add(WARNING, "source-unreadable", e.source, e.message, hint)
        else:
            c.add(WARNING, "source-unreadable", e.source, e.message, "the checks that need it were skipped")


# In this order: within a severity, node-wide checks are listed first.
_CHECKS: tuple[Callable[[Checkup], None], ...] = (
    doctor_kubelet.kubelet_socket,
    doctor_kubelet.pod_resources,
    doctor_plugins.socket_failures,
    doctor_plugins.duplicate_plugins,
    doctor_plugins.plugin_disagree,
    doctor_plugins.unknown_resources,
    doctor_plugins.no_plugin,
    doctor_plugins.devices,
    doctor_checkpoint.checkpoint,
    doctor_topology.numa_alignment,
    doctor_topology.shared_pool,
    _device_holders,
    _kubelet_state,
    check_dra,
)


__all__ = ["RECHECK_AFTER", "diagnose", "fails_on", "recheck_sockets"]
