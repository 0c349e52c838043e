"""One snapshot under examination by ``devctl doctor``: its views built once, the findings, the source errors
not yet explained (``Checkup``), and the helpers every family of checks words its findings with.

The checks live beside it, one module per family (``doctor_kubelet``, ``doctor_plugins``, ``doctor_checkpoint``,
``doctor_topology``, ``doctor_dra``); ``doctor`` runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from devctl.analyze import (
    CheckpointView,
    DeviceRow,
    Holder,
    PluginRow,
    ResourceRow,
    TopologyView,
    checkpoint_view,
    devices_view,
    errors_of,
    plugins_view,
    resources_view,
    topology_view,
)
from devctl.model import ErrorKind, Finding, NodeSnapshot, Severity, SourceError

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


# How many device IDs (or holders) a message names before it says "and N more".
MAX_IDS = 8

# How long after a first reading in which a plugin and the kubelet disagree both
# are read again: a health flip reaches the kubelet's stream within milliseconds,
# so a disagreement still there a second later is no race but a lost update.
RECHECK_AFTER = 1.0


def as_root_hint(node: str) -> str:
    return (
        "run devctl as root: the kubelet's sockets and files are root's only "
        f"(on a cluster: kubectl debug node/{node} -it --profile=sysadmin --image=<an image with devctl>)"
    )


def node_name(snapshot: NodeSnapshot) -> str:
    """The node's name for a command in a hint (the kubelet's, devctl.node.nodename), else ``<node>``."""
    return snapshot.node_name or "<node>"


UNREADABLE_HINT = (
    "at its next start the kubelet forgets which container holds which device and may hand them out twice: "
    "find what wrote the file before restarting the kubelet; drain the node to be safe"
)
LEAVES_SOCKETS = (
    "the kubelet leaves its sockets on disk when it exits (and removes them only at its next start): "
    "it is not running; check it (systemctl status kubelet; journalctl -u kubelet) and start it"
)
WRONG_PLACE = (
    "if the kubelet runs, devctl looks in the wrong place: pass --root (/host under kubectl debug node), "
    "--kubelet-dir or --plugins-dir"
)


@dataclass
class Checkup:
    """One snapshot under examination: its views (each built once), the findings, the errors not yet explained."""

    snapshot: NodeSnapshot
    again: NodeSnapshot | None = None
    findings: list[Finding] = field(default_factory=list)
    unexplained: list[SourceError] = field(init=False)

    def __post_init__(self) -> None:
        self.unexplained = list(errors_of(self.snapshot))

    @cached_property
    def resources(self) -> tuple[ResourceRow, ...]:
        return resources_view(self.snapshot)

    @cached_property
    def devices(self) -> tuple[DeviceRow, ...]:
        return devices_view(self.snapshot)

    @cached_property
    def plugins(self) -> tuple[PluginRow, ...]:
        return plugins_view(self.snapshot).plugins

    @cached_property
    def checkpoint(self) -> CheckpointView:
        return checkpoint_view(self.snapshot)

    @cached_property
    def topology(self) -> TopologyView:
        return topology_view(self.snapshot)

    def add(self, severity: Severity, code: str, subject: str, message: str, hint: str) -> None:
        self.findings.append(Finding(severity, code, subject, message, hint))

    def explain(self, match: Callable[[SourceError], bool]) -> list[SourceError]:
        """Take the source errors that ``match``: the check that takes them answers for them.

        It turns each into a finding, or says in a comment why none is due; the
        errors nobody takes become ``source-unreadable`` findings at the end.
        """
        taken: list[SourceError] = []
        kept: list[SourceError] = []
        for e in self.unexplained:
            (taken if match(e) else kept).append(e)
        self.unexplained = kept
        return taken

    def permission_denied(self, subject: str) -> None:
        # An error, not a warning: the checks that need it did not run, and a clean
        # exit would say the node passed them.
        self.add(
            ERROR,
            "permission-denied",
            subject,
            "devctl may not open it, so the checks that need it were skipped",
            as_root_hint(node_name(self.snapshot)),
        )


def id_list(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS])
    return shown if len(ids) <= MAX_IDS else f"{shown} and {len(ids) - MAX_IDS} more"


def holder_list(holders: Iterable[Holder] | None) -> str:
    return id_list([f"{h.namespace}/{h.pod}/{h.container}" for h in holders or ()])


def delete_pods(holders: Iterable[Holder] | None) -> str:
    """The kubectl commands that recreate the pods of ``holders`` (their controllers make them anew), by real name."""
    pods = list(dict.fromkeys((h.namespace, h.pod) for h in holders or () if h.pod))
    if not pods:
        return "kubectl -n <namespace> delete pod <pod>"
    shown = "; ".join(f"kubectl -n {ns} delete pod {pod}" for ns, pod in pods[:MAX_IDS])
    return shown if len(pods) <= MAX_IDS else f"{shown} and {len(pods) - MAX_IDS} more"


def numa_list(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


def denied(e: SourceError) -> bool:
    return e.kind == ErrorKind.PERMISSION_DENIED
