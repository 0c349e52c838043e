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

import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from devctl.analyze import (
    CHECKPOINT,
    MISSING,
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
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
from devctl.model import (
    HEALTHY,
    SEVERITIES,
    ErrorKind,
    Finding,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    Severity,
    SocketStatus,
    SourceError,
)

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

# The registry type of a device plugin (pluginregistration's PluginInfo.type); other
# registry sockets are CSI or DRA drivers, which these checks leave alone.
DEVICE_PLUGIN_TYPE = "DevicePlugin"

# How many device IDs (or holders) a message names before it says "and N more".
MAX_IDS = 8

# How long after a first reading in which a plugin and the kubelet disagree both
# are read again: a health flip reaches the kubelet's stream within milliseconds,
# so a disagreement still there a second later is no race but a lost update.
RECHECK_AFTER = 1.0


def _as_root(node: str) -> str:
    return (
        "run devctl as root: the kubelet's sockets and files are root's only "
        f"(on a cluster: kubectl debug node/{node} -it --profile=sysadmin --image=<an image with devctl>)"
    )


def _node(snapshot: NodeSnapshot) -> str:
    """The node's name for a command in a hint (the kubelet's, devctl.node.nodename), else ``<node>``."""
    return snapshot.node_name or "<node>"


_UNREADABLE_HINT = (
    "at its next start the kubelet forgets which container holds which device and may hand them out twice: "
    "find what wrote the file before restarting the kubelet; drain the node to be safe"
)
_LEAVES_SOCKETS = (
    "the kubelet leaves its sockets on disk when it exits (and removes them only at its next start): "
    "it is not running; check it (systemctl status kubelet; journalctl -u kubelet) and start it"
)
_WRONG_PLACE = (
    "if the kubelet runs, devctl looks in the wrong place: pass --root (/host under kubectl debug node), "
    "--kubelet-dir or --plugins-dir"
)


def diagnose(snapshot: NodeSnapshot, again: NodeSnapshot | None = None) -> tuple[Finding, ...]:
    """Every check on one snapshot: errors first, then warnings, then notes; within each, node-wide checks first.

    ``again`` is a second reading of the sockets that ``recheck_sockets`` named,
    taken a moment later: a disagreement between a plugin and the kubelet is an
    error only when it lasts into it. Without one (a snapshot file) a
    disagreement is a warning that says so.
    """
    checkup = _Checkup(snapshot, again)
    for check in _CHECKS:
        check(checkup)
    _unexplained_errors(checkup)
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    return tuple(sorted(checkup.findings, key=lambda f: rank[f.severity]))


def fails_on(findings: Iterable[Finding], severity: Severity = ERROR) -> bool:
    """Whether any finding is as severe as ``severity`` or more (``devctl doctor --fail-on``)."""
    limit = SEVERITIES.index(severity)
    return any(SEVERITIES.index(f.severity) <= limit for f in findings)


@dataclass
class _Checkup:
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
            _as_root(_node(self.snapshot)),
        )


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS])
    return shown if len(ids) <= MAX_IDS else f"{shown} and {len(ids) - MAX_IDS} more"


def _holders(holders: Iterable[Holder] | None) -> str:
    return _ids([f"{h.namespace}/{h.pod}/{h.container}" for h in holders or ()])


def _delete(holders: Iterable[Holder] | None) -> str:
    """The kubectl commands that recreate the pods of ``holders`` (their controllers make them anew), by real name."""
    pods = list(dict.fromkeys((h.namespace, h.pod) for h in holders or () if h.pod))
    if not pods:
        return "kubectl -n <namespace> delete pod <pod>"
    shown = "; ".join(f"kubectl -n {ns} delete pod {pod}" for ns, pod in pods[:MAX_IDS])
    return shown if len(pods) <= MAX_IDS else f"{shown} and {len(pods) - MAX_IDS} more"


def _numa(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


def _denied(e: SourceError) -> bool:
    return e.kind == ErrorKind.PERMISSION_DENIED


# --- the kubelet --------------------------------------------------------------------------------


def _kubelet_socket(c: _Checkup) -> None:
    s = c.snapshot
    no_dir = c.explain(lambda e: e.source == PLUGINS_DIR_SOURCE and e.kind == ErrorKind.MISSING)
    status = s.kubelet_socket_status
    if status is None:  # a snapshot file from before devctl dialled the socket
        status = SocketStatus.LISTENING if s.kubelet_socket_present else SocketStatus.MISSING
    subject = s.paths.kubelet_socket
    if status == SocketStatus.LISTENING:
        return
    if status == SocketStatus.STALE:
        c.add(
            ERROR,
            "kubelet-socket-stale",
            subject,
            "kubelet.sock is a socket file with nothing listening on it: the kubelet is not running",
            f"{_LEAVES_SOCKETS}; plugins register again when it creates kubelet.sock anew",
        )
        return
    if status == SocketStatus.PERMISSION_DENIED:
        c.permission_denied(subject)
        return
    if status != SocketStatus.MISSING:
        c.add(
            ERROR,
            "kubelet-socket-unreachable",
            subject,
            f"kubelet.sock does not take connections ({status.value})",
            "check the kubelet (systemctl status kubelet; journalctl -u kubelet)",
        )
        return
    if no_dir:
        message = f"the device-plugins directory {s.paths.plugins_dir} does not exist"
    else:
        message = "kubelet.sock is missing: the kubelet is not running, or is restarting"
    c.add(
        ERROR,
        "kubelet-socket-missing",
        s.paths.kubelet_socket,
        message,
        f"check the kubelet (systemctl status kubelet; journalctl -u kubelet); {_WRONG_PLACE}",
    )


def _pod_resources(c: _Checkup) -> None:
    s = c.snapshot
    errors = c.explain(lambda e: e.source == POD_RESOURCES)
    if not errors:
        return
    error = errors[0]
    message, kind = error.message, error.kind
    subject = s.paths.pod_resources
    if _denied(error):
        c.permission_denied(subject)
    elif kind == ErrorKind.STALE:
        c.add(
            ERROR,
            "pod-resources-stale",
            subject,
            f"{message}: the kubelet is not running, so who holds which device is unknown",
            _LEAVES_SOCKETS,
        )
    elif kind == ErrorKind.RATE_LIMITED:
        # pkg/kubelet/apis/podresources/grpc/ratelimit.go: one token bucket for every client of the node.
        c.add(
            WARNING,
            "pod-resources-rate-limited",
            subject,
            f"{message}: the kubelet's limit (100 calls/s, shared by every client of the node) is spent",
            "another client polls pod-resources too fast (a monitoring agent, another devctl): slow it down, "
            "then run devctl doctor again",
        )
    elif s.pods is None or kind != ErrorKind.UNIMPLEMENTED:
        if kind == ErrorKind.MISSING:
            hint = f"the kubelet is down or runs with another --root-dir; {_WRONG_PLACE}"
        elif kind == ErrorKind.TIMEOUT:
            hint = "the kubelet accepts connections but does not answer: stuck or overloaded (journalctl -u kubelet)"
        elif kind in (ErrorKind.WRONG_API, ErrorKind.MALFORMED, ErrorKind.NOT_A_SOCKET):
            hint = "something other than the kubelet's pod-resources server is at that path: check --pod-resources"
        else:
            hint = "check the kubelet's health (journalctl -u kubelet)"
        c.add(ERROR, "pod-resources-unreachable", subject, message, hint)
    else:
        c.add(
            WARNING,
            "pod-resources-limited",
            subject,
            message,
            "the kubelet lists pods but not what is allocatable (Kubernetes 1.20 and later do): the checks of "
            "allocatable devices, exclusive CPUs and NUMA alignment are incomplete",
        )


# --- plugin sockets ----------------------------------------------------------------------------------


# A socket that answers, but not as a v1beta1 DevicePlugin: another protocol, a reply
# that does not parse, or a gRPC server without the DevicePlugin service.
_NOT_A_PLUGIN = frozenset({ErrorKind.WRONG_API, ErrorKind.MALFORMED, ErrorKind.UNIMPLEMENTED})


def _socket_failures(c: _Checkup) -> None:
    failing = [row for row in c.plugins if row.status != PluginStatus.SERVING.value and row.error is not None]
    # Each failing probe's error is in the snapshot's errors too: this check answers for them.
    told = {row.error for row in failing}
    c.explain(lambda e: e.source in ("plugin", "registry") and e.message in told)
    for row in failing:
        assert row.error is not None
        of = f" (it served {row.resource})" if row.resource else ""
        if row.status == PluginStatus.STALE.value and "/plugins_registry/" in row.socket:
            c.add(
                WARNING,
                "registry-socket-stale",
                row.socket,
                "a registration socket with nothing listening on it: its driver or plugin died without removing it",
                "the kubelet's plugin watcher ignores it; restart the driver's pod, or remove the file if it is gone",
            )
        elif row.status == PluginStatus.STALE.value:
            c.add(
                ERROR,
                "stale-socket",
                row.socket,
                f"a socket file with nothing listening on it{of}: its plugin died without removing it",
                "restart the plugin's pod (its DaemonSet); if the plugin is gone for good, remove the file "
                "(a kubelet restart removes it too)",
            )
        elif row.status == PluginStatus.TIMEOUT.value:
            c.add(
                ERROR,
                "plugin-timeout",
                row.socket,
                f"{row.error}{of}",
                "the plugin accepts connections but does not answer: it is stuck; read its logs, then restart its pod",
            )
        elif row.status == PluginStatus.PERMISSION_DENIED.value:
            c.permission_denied(row.socket)
        elif row.error_kind in _NOT_A_PLUGIN:
            c.add(
                ERROR,
                "plugin-malformed",
                row.socket,
                f"{row.error}: it does not speak the v1beta1 DevicePlugin API",
                "another program's socket in the plugins dir, or a plugin built for another API version: "
                f"find its owner (ss -xlp | grep {shlex.quote(row.socket)}) and fix or move it",
            )
        elif row.error_kind == ErrorKind.TOO_LARGE:
            # The kubelet reads plugins with grpc-go's default 4 MiB receive limit (node/rpc.KUBELET_RECEIVE_BYTES).
            c.add(
                ERROR,
                "plugin-list-too-large",
                row.socket,
                f"{row.error}{of}",
                "the kubelet's ListAndWatch stream fails the same way, so none of these devices become "
                "allocatable: the plugin must send less (fewer devices per resource, shorter IDs, less topology)",
            )
        else:
            c.add(
                ERROR, "plugin-unreachable", row.socket, f"{row.error}{of}", "read the plugin's logs, restart its pod"
            )


def _unnamed(c: _Checkup) -> list[PluginRow]:
    """Live device-plugin sockets no resource is known for."""
    return [
        row
        for row in c.plugins
        if row.status == PluginStatus.SERVING.value
        and row.resource is None
        and (row.registry is None or row.registry.type == DEVICE_PLUGIN_TYPE)  # not a CSI or DRA driver
    ]


def _orphans(c: _Checkup) -> list[ResourceRow]:
    """The device-plugin resources the kubelet names that no socket is known to serve."""
    return [r for r in c.resources if r.status == PluginStatus.NO_PLUGIN.value and r.kind != "dra"]


def _no_healthy(c: _Checkup) -> list[PluginRow]:
    """Of the unnamed sockets, those that list no healthy device: the kubelet lists healthy devices only, so
    nothing on the node ties them to their resource (devctl.node.sockets.unnamed_sockets), and any resource the
    kubelet names without a socket may be theirs."""
    return [row for row in _unnamed(c) if row.healthy == 0]


def _unknown_resources(c: _Checkup) -> None:
    orphans, no_healthy = _orphans(c), _no_healthy(c)
    for row in _unnamed(c):
        message = f"serves {row.devices} device(s) whose IDs the kubelet does not tie to any one resource"
        hint = (
            "if the plugin registered, the kubelet would list its devices: check the plugin's logs for Register "
            f"errors; `devctl call --socket {shlex.quote(row.socket)} list` shows what it serves"
        )
        if row in no_healthy and orphans:
            if len(orphans) == 1 and len(no_healthy) == 1:
                message = (
                    f"serves {row.devices} device(s), none healthy, so the kubelet lists none of them; by "
                    f"elimination (the only resource without a socket) likely the plugin of {orphans[0].name}"
                )
                hint = (
                    "the kubelet lists healthy devices only: the plugin's logs (and dmesg) say why it marked them "
                    f"unhealthy; `devctl call --socket {shlex.quote(row.socket)} list` shows what it serves"
                )
            else:
                names = orphans[0].name if len(orphans) == 1 else "one of " + _ids([r.name for r in orphans])
                message = (
                    f"serves {row.devices} device(s), none healthy, so the kubelet lists none of them; "
                    f"it may be the plugin of {names}"
                )
        c.add(INFO, "unknown-resource", row.socket, message, hint)


def _duplicate_plugins(c: _Checkup) -> None:
    sockets: dict[str, list[str]] = {}
    for row in c.plugins:
        if row.status == PluginStatus.SERVING.value and row.resource is not None:
            sockets.setdefault(row.resource, []).append(row.socket)
    for resource, paths in sorted(sockets.items()):
        if len(paths) > 1:
            # pkg/kubelet/cm/devicemanager/manager.go: the newest registration takes the
            # resource, and the end of the older one's stream marks the resource unhealthy.
            c.add(
                WARNING,
                "duplicate-plugin",
                resource,
                f"{len(paths)} sockets serve it: {', '.join(paths)}",
                "the kubelet uses the one that registered last, and when the other stops it marks the resource "
                "unhealthy: stop the extra plugin (a debug plugin beside the real one?)",
            )


@dataclass(frozen=True)
class _Disagreement:
    socket: str
    plugin_only: frozenset[str]  # healthy in the plugin's list, not allocatable at the kubelet
    kubelet_only: frozenset[str]  # allocatable at the kubelet, not healthy in the plugin's list


def _disagreements(snapshot: NodeSnapshot) -> dict[str, _Disagreement]:
    """Resources whose one serving plugin's healthy devices differ from the kubelet's GetAllocatableResources.

    Both lists should be the same set: the kubelet's is the plugin's last
    ListAndWatch message, healthy devices only. A resource served by two sockets
    is duplicate-plugin's to tell.
    """
    if snapshot.allocatable is None:
        return {}
    kubelet: dict[str, set[str]] = {}
    for d in snapshot.allocatable.devices:
        kubelet.setdefault(d.resource, set()).update(d.ids)
    serving: dict[str, list[PluginProbe]] = {}
    for p in snapshot.plugins:
        if p.status != PluginStatus.SERVING or p.resource is None or p.options is None:
            continue
        if p.registry is not None and p.registry.type != DEVICE_PLUGIN_TYPE:
            continue
        serving.setdefault(p.resource, []).append(p)
    found = {}
    for resource, probes in serving.items():
        if len(probes) != 1:
            continue
        healthy = {d.id for d in probes[0].devices if d.healthy}
        offered = kubelet.get(resource, set())
        if healthy != offered:
            socket = probes[0].socket
            found[resource] = _Disagreement(socket, frozenset(healthy - offered), frozenset(offered - healthy))
    return found


def recheck_sockets(snapshot: NodeSnapshot) -> tuple[str, ...]:
    """The plugin sockets whose devices disagree with the kubelet's: read them again ``RECHECK_AFTER`` later."""
    return tuple(sorted(d.socket for d in _disagreements(snapshot).values()))


def _plugin_disagree(c: _Checkup) -> None:
    later = _disagreements(c.again) if c.again is not None else None
    for resource, first in sorted(_disagreements(c.snapshot).items()):
        plugin_only, kubelet_only = first.plugin_only, first.kubelet_only
        if later is not None:
            again = later.get(resource)
            if again is None:
                continue  # a race with an update in flight: gone on the second reading
            plugin_only, kubelet_only = plugin_only & again.plugin_only, kubelet_only & again.kubelet_only
            if not plugin_only and not kubelet_only:
                continue
        parts = []
        if kubelet_only:
            ids = _ids(sorted(kubelet_only))
            parts.append(f"the kubelet offers {len(kubelet_only)} device(s) its plugin does not list as healthy: {ids}")
        if plugin_only:
            ids = _ids(sorted(plugin_only))
            parts.append(f"the plugin lists {len(plugin_only)} healthy device(s) the kubelet does not offer: {ids}")
        if later is not None:
            severity, lasting = ERROR, f" (still so {RECHECK_AFTER:g}s later)"
        else:
            severity, lasting = WARNING, " (one reading: a snapshot file cannot tell whether it lasts)"
        c.add(
            severity,
            "kubelet-plugin-disagree",
            resource,
            "; ".join(parts) + lasting,
            f"the plugin's updates do not reach the kubelet (a plugin that sends each update to one ListAndWatch "
            f"stream only, or a kubelet that missed one): the kubelet may give pods unhealthy devices or hold back "
            f"healthy ones; restart the plugin's pod ({first.socket}) so that it registers again",
        )


# --- resources and devices ---------------------------------------------------------------------------


# A socket that holds a listener but gave no answer may be any resource's plugin: hung, not gone.
_SILENT = (PluginStatus.TIMEOUT, PluginStatus.UNREACHABLE, PluginStatus.PERMISSION_DENIED)


def _no_plugin(c: _Checkup) -> None:
    allocatable = {d.resource for d in c.snapshot.allocatable.devices} if c.snapshot.allocatable else set()
    silent = sorted(
        os.path.basename(p.socket)
        for p in c.snapshot.plugins
        if p.resource is None and p.registry is None and p.status in _SILENT
    )
    orphans, no_healthy = _orphans(c), _no_healthy(c)
    for row in orphans:
        hint = (
            "find the plugin's pod on this node "
            f"(kubectl get pods -A -o wide --field-selector spec.nodeName={_node(c.snapshot)}) "
            f"and read its logs: a plugin serves a socket in {c.snapshot.paths.plugins_dir} and registers with "
            "kubelet.sock again after every kubelet restart"
        )
        served = "no plugin socket serves it"
        if silent:
            served = "no answering plugin socket serves it"
            hint = f"{', '.join(silent)} did not answer: it may be this resource's plugin, hung; " + hint
        likely = ""
        if no_healthy:
            # Not a bare no-plugin: a live socket lists only unhealthy devices, which the kubelet does not list.
            shown = ", ".join(os.path.basename(p.socket) for p in no_healthy)
            if len(no_healthy) > 1:
                likely = f"{shown} answer with no healthy device; one of them may be this resource's plugin"
            elif len(orphans) > 1:
                likely = f"{shown} answers with no healthy device; it may be this resource's plugin"
            else:
                likely = (
                    f"{shown} answers with only unhealthy devices ({no_healthy[0].devices}); by elimination (the "
                    "only live socket without a resource, the only resource without a socket) likely its plugin"
                )
            served = "no plugin socket is known to serve it, as the kubelet lists no device of it"
            hint = (
                f"`devctl call --socket {shlex.quote(no_healthy[0].socket)} list` shows what it serves; "
                "the plugin's logs (and dmesg) say why it marked its devices unhealthy: "
                "repair or replace the hardware; else " + hint
            )
        if row.allocated or row.name in allocatable:
            message = f"{served}, yet the kubelet still uses it"
            if row.allocated:
                message += f" ({row.allocated} device(s) held by running containers)"
            message += ": pods that request it cannot start"
            c.add(ERROR, "no-plugin", row.name, f"{message}; {likely}" if likely else message, hint)
        elif likely:
            c.add(WARNING, "no-plugin", row.name, f"{served}; {likely}", hint)
        else:
            c.add(
                WARNING,
                "no-plugin",
                row.name,
                f"{served}; only the checkpoint still names it (a plugin removed, or not "
                "registered again since the kubelet started; the kubelet keeps a stopped plugin's devices "
                "for 5 minutes)",
                hint,
            )


def _devices(c: _Checkup) -> None:
    # DRA drivers' devices have checks of their own (devctl.analyze.doctor_dra).
    serving = {r.name: r for r in c.resources if r.status == PluginStatus.SERVING.value and r.kind != "dra"}
    unhealthy: dict[str, list[str]] = {}
    held: dict[str, int] = {}  # of those, still held by a container (each also an unhealthy-allocated finding)
    for d in c.devices:
        resource = serving.get(d.resource)
        if resource is None:
            continue  # no plugin to vouch for its health: the socket or no-plugin finding says why
        subject = f"{d.resource}/{d.id}"
        if d.health == MISSING:
            c.add(
                ERROR,
                "device-missing",
                subject,
                f"held by {_holders(d.allocated_to)}, but its plugin no longer lists it",
                "the plugin lost the device (unplugged, driver reloaded, ID renamed) while a container holds it: "
                "read the plugin's logs; recreate the pod to get a device the plugin lists "
                f"({_delete(d.allocated_to)})",
            )
        elif d.state == "unhealthy-allocated":
            c.add(
                ERROR,
                "unhealthy-allocated",
                subject,
                f"held by {_holders(d.allocated_to)} while its plugin reports it {d.health}",
                "the kubelet does not take a device away from a running container: find out why it failed "
                "(the plugin's logs, dmesg), then recreate the pod so it gets a healthy one "
                f"({_delete(d.allocated_to)})",
            )
            unhealthy.setdefault(d.resource, []).append(d.id)
            held[d.resource] = held.get(d.resource, 0) + 1
        elif d.state == "unhealthy" or (d.state is None and d.health != HEALTHY):
            # Without pod-resources who holds it is unknown; that it is unhealthy is not.
            unhealthy.setdefault(d.resource, []).append(d.id)
    for name, ids in sorted(unhealthy.items()):
        c.add(
            WARNING,
            "unhealthy-devices",
            name,
            # Every unhealthy device, as ls's BAD counts them; the held ones have their own findings too.
            f"{len(ids)} of {serving[name].capacity} device(s) unhealthy: {_ids(ids)}"
            + (f" ({held[name]} of them still held: unhealthy-allocated)" if held.get(name) else ""),
            "the kubelet allocates them to no one; the plugin's logs (and dmesg) say why it marked them: "
            "repair or replace the hardware",
        )


# --- the checkpoint ---------------------------------------------------------------------------------


def _checkpoint(c: _Checkup) -> None:
    path = c.snapshot.paths.checkpoint
    for e in c.explain(lambda e: e.source == CHECKPOINT):
        if e.kind == ErrorKind.MISSING:
            # A kubelet that no plugin has registered with writes none; a dead kubelet
            # is kubelet-socket-missing's to tell.
            continue
        if _denied(e):
            c.permission_denied(path)
        elif e.kind == ErrorKind.TOO_LARGE:  # read, its checksum left unverified (node/checkpoint.CHECKSUM_LIMIT)
            c.add(
                WARNING,
                "checkpoint-checksum-unverified",
                path,
                e.message,
                "a checkpoint this large is unusual: `devctl checkpoint` shows which entries make it so",
            )
        else:
            c.add(ERROR, "checkpoint-unreadable", path, e.message, _UNREADABLE_HINT)
    view = c.checkpoint
    if view.format is None:
        return
    # An AllocResp that is not base64 fails encoding/json before any checksum: then
    # no checksum is computed, and the whole file is lost to the kubelet.
    decodes = view.computed_checksum is not None
    if view.checksum_ok is False and not decodes:
        bad = next((e for e in view.entries if e.allocation_error), None)
        which = f"{bad.pod_uid}/{bad.container}: {bad.allocation_error}" if bad else "an AllocResp is not base64"
        c.add(
            ERROR,
            "checkpoint-unreadable",
            path,
            f"{which}: the kubelet cannot decode the file and will start empty",
            _UNREADABLE_HINT,
        )
    elif view.checksum_ok is False:
        # pkg/kubelet/checkpointmanager/checkpoint_manager.go refuses the file; the device
        # manager then starts with no allocations (pkg/kubelet/cm/devicemanager/manager.go).
        c.add(
            ERROR,
            "checksum-mismatch",
            path,
            f"stored checksum {view.checksum}, computed {view.computed_checksum}: "
            "the kubelet will refuse the file at its next start and start empty",
            "something other than the kubelet changed the file: the devices held now may be handed out twice "
            "after a kubelet restart; drain the node before restarting the kubelet",
        )
    if view.format == "v1":
        c.add(
            WARNING,
            "checkpoint-old-format",
            path,
            "written in the format of Kubernetes 1.19 and older (device IDs without NUMA nodes)",
            "a current kubelet reads it once, on upgrade, and writes the new format at its next change: a file "
            "that stays old means the kubelet here is that old, or has not changed anything since",
        )
    # Without pod-resources and without a pod identity on disk, checkpoint_view calls
    # every entry stale: that is "cannot tell", and pod-resources-unreachable says so.
    can_tell = c.snapshot.pods is not None or bool(c.snapshot.pod_identities)
    for entry in view.entries:
        owner = f"{entry.pod.namespace}/{entry.pod.name}" if entry.pod else entry.pod_uid
        subject = f"{owner}/{entry.container}"
        ids = list(dict.fromkeys(i for group in entry.device_ids.values() for i in group))
        if entry.allocation_error is not None and decodes:
            # pkg/kubelet/cm/devicemanager/pod_devices.go fromCheckpointData skips such an entry.
            c.add(
                WARNING,
                "alloc-undecodable",
                subject,
                f"the allocation of {entry.resource} cannot be decoded: {entry.allocation_error}",
                "at its next start the kubelet skips this entry: the container keeps running, but its devices "
                "look free and may be given to another pod",
            )
        if entry.stale and can_tell:
            # The device manager drops the entries of pods that are gone before it picks
            # devices for a new container (pkg/kubelet/cm/devicemanager/manager.go,
            # UpdateAllocatedDevices); the scheduler never counted them.
            c.add(
                WARNING,
                "stale-allocation",
                subject,
                f"pod {entry.pod_uid} no longer runs, but the checkpoint still gives it {entry.resource} {_ids(ids)}",
                f"nothing to do: the kubelet frees them at its next allocation of {entry.resource}, before it "
                "picks devices",
            )


# --- topology ---------------------------------------------------------------------------------------


def _numa_alignment(c: _Checkup) -> None:
    for a in c.topology.alignment:
        if a.aligned is not False:
            continue
        where = [
            f"{what} on NUMA {_numa(nodes)}"
            for what, nodes in (("devices", a.device_numa), ("exclusive CPUs", a.cpu_numa), ("memory", a.memory_numa))
            if nodes
        ]
        c.add(
            WARNING,
            "numa-misaligned",
            f"{a.namespace}/{a.pod}/{a.container}",
            "; ".join(where),
            "the Topology Manager let it start across NUMA nodes (policy none or best-effort): set "
            "--topology-manager-policy=single-numa-node (or restricted) if it matters, then recreate the pod "
            f"({_delete([Holder(a.namespace, a.pod, a.container)])})",
        )


def _shared_pool(c: _Checkup) -> None:
    allocatable = c.snapshot.allocatable
    if allocatable is None or not allocatable.cpu_ids or c.topology.shared_pool:
        return
    c.add(
        WARNING,
        "no-shared-cpus",
        "shared-pool",
        f"containers hold all {len(allocatable.cpu_ids)} allocatable CPUs exclusively: every other container "
        "shares only the reserved CPUs",
        "Burstable and BestEffort pods now compete for the reserved CPUs: move a Guaranteed pod away, or "
        "lower its whole-CPU requests",
    )


# --- who holds the devices (devctl.analyze.holders) ----------------------------------------------------


def _device_holders(c: _Checkup) -> None:
    from devctl.analyze.holders import holder_findings
    from devctl.model import PROCS

    c.findings.extend(holder_findings(c.snapshot))
    for e in c.explain(lambda e: e.source == PROCS and e.kind == ErrorKind.TIMEOUT):
        # The deadline stopped the <proc> scan: its line says how far it got; no container is called idle.
        hint = "no container is called idle and no count of holders is given: run again with a longer --timeout"
        c.add(WARNING, "source-unreadable", e.source, e.message, hint)


# --- the kubelet's CPU and memory state (devctl.analyze.kubeletstate) -----------------------------------


def _kubelet_state(c: _Checkup) -> None:
    from devctl.analyze.kubeletstate import kubelet_state_findings

    c.findings.extend(kubelet_state_findings(c.snapshot))


# --- DRA and CDI (devctl.analyze.doctor_dra) ---------------------------------------------------------------


def _dra(c: _Checkup) -> None:
    from devctl.analyze.doctor_dra import check_dra  # it imports this module's _Checkup for its types only

    check_dra(c)


# --- whatever no check explained ---------------------------------------------------------------------


def _unexplained_errors(c: _Checkup) -> None:
    for e in c.explain(lambda e: True):
        if _denied(e) and e.even_as_root:
            # devctl was root already (the scan's line says so): "run devctl as root" would send a person in a circle.
            hint = (
                "run devctl with the host's capabilities and user namespace "
                "(kubectl debug node --profile=sysadmin; docker run --privileged --pid=host --userns=host)"
            )
            c.add(ERROR, "permission-denied", e.source, e.message, hint)
        elif _denied(e):
            c.permission_denied(e.source)
        elif e.source == "sysfs":
            hint = "NUMA alignment cannot be checked: point --sysfs at the host's /sys (/host/sys under kubectl debug)"
            c.add(WARNING, "source-unreadable", e.source, e.message, hint)
        else:
            c.add(WARNING, "source-unreadable", e.source, e.message, "the checks that need it were skipped")


_CHECKS: tuple[Callable[[_Checkup], None], ...] = (
    _kubelet_socket,
    _pod_resources,
    _socket_failures,
    _duplicate_plugins,
    _plugin_disagree,
    _unknown_resources,
    _no_plugin,
    _devices,
    _checkpoint,
    _numa_alignment,
    _shared_pool,
    _device_holders,
    _kubelet_state,
    _dra,
)
