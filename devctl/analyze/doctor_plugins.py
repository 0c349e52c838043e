"""The checks of device plugins: their sockets, the resources no socket serves or no resource names, two
plugins of one resource, a plugin and the kubelet that disagree on its healthy devices, and each device's health."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from devctl.analyze import MISSING, PluginRow, ResourceRow
from devctl.analyze.checkup import (
    ERROR,
    INFO,
    RECHECK_AFTER,
    WARNING,
    Checkup,
    delete_pods,
    holder_list,
    id_list,
    node_name,
)
from devctl.model import DEVICE_PLUGIN_TYPE, HEALTHY, ErrorKind, NodeSnapshot, PluginProbe, PluginStatus, Source

# --- plugin sockets ----------------------------------------------------------------------------------


# A socket that answers, but not as a v1beta1 DevicePlugin: another protocol, a reply
# that does not parse, or a gRPC server without the DevicePlugin service.
_NOT_A_PLUGIN = frozenset({ErrorKind.WRONG_API, ErrorKind.MALFORMED, ErrorKind.UNIMPLEMENTED})


def socket_failures(c: Checkup) -> None:
    failing = [row for row in c.plugins if row.status != PluginStatus.SERVING.value and row.error is not None]
    # Each failing probe's error is in the snapshot's errors too, its socket the subject: this check answers for them.
    told = {row.socket for row in failing}
    c.explain(lambda e: e.source in (Source.PLUGIN, Source.REGISTRY) and e.subject in told)
    for row in failing:
        assert row.error is not None
        of = f" (it served {row.resource})" if row.resource else ""
        if row.status == PluginStatus.STALE.value and c.snapshot.paths.in_plugins_registry(row.socket):
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


def _unnamed(c: Checkup) -> list[PluginRow]:
    """Live device-plugin sockets no resource is known for."""
    return [
        row
        for row in c.plugins
        if row.status == PluginStatus.SERVING.value
        and row.resource is None
        and (row.registry is None or row.registry.type == DEVICE_PLUGIN_TYPE)  # not a CSI or DRA driver
    ]


def _orphans(c: Checkup) -> list[ResourceRow]:
    """The device-plugin resources the kubelet names that no socket is known to serve."""
    return [r for r in c.resources if r.status == PluginStatus.NO_PLUGIN.value and r.kind != "dra"]


def _no_healthy(c: Checkup) -> list[PluginRow]:
    """Of the unnamed sockets, those that list no healthy device: the kubelet lists healthy devices only, so
    nothing on the node ties them to their resource (devctl.node.sockets.unnamed_sockets), and any resource the
    kubelet names without a socket may be theirs."""
    return [row for row in _unnamed(c) if row.healthy == 0]


def unknown_resources(c: Checkup) -> None:
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
                names = orphans[0].name if len(orphans) == 1 else "one of " + id_list([r.name for r in orphans])
                message = (
                    f"serves {row.devices} device(s), none healthy, so the kubelet lists none of them; "
                    f"it may be the plugin of {names}"
                )
        c.add(INFO, "unknown-resource", row.socket, message, hint)


def duplicate_plugins(c: Checkup) -> None:
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


def plugin_disagree(c: Checkup) -> None:
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
            ids = id_list(sorted(kubelet_only))
            parts.append(f"the kubelet offers {len(kubelet_only)} device(s) its plugin does not list as healthy: {ids}")
        if plugin_only:
            ids = id_list(sorted(plugin_only))
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


def no_plugin(c: Checkup) -> None:
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
            f"(kubectl get pods -A -o wide --field-selector spec.nodeName={node_name(c.snapshot)}) "
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


def devices(c: Checkup) -> None:
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
                f"held by {holder_list(d.allocated_to)}, but its plugin no longer lists it",
                "the plugin lost the device (unplugged, driver reloaded, ID renamed) while a container holds it: "
                "read the plugin's logs; recreate the pod to get a device the plugin lists "
                f"({delete_pods(d.allocated_to)})",
            )
        elif d.state == "unhealthy-allocated":
            c.add(
                ERROR,
                "unhealthy-allocated",
                subject,
                f"held by {holder_list(d.allocated_to)} while its plugin reports it {d.health}",
                "the kubelet does not take a device away from a running container: find out why it failed "
                "(the plugin's logs, dmesg), then recreate the pod so it gets a healthy one "
                f"({delete_pods(d.allocated_to)})",
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
            f"{len(ids)} of {serving[name].capacity} device(s) unhealthy: {id_list(ids)}"
            + (f" ({held[name]} of them still held: unhealthy-allocated)" if held.get(name) else ""),
            "the kubelet allocates them to no one; the plugin's logs (and dmesg) say why it marked them: "
            "repair or replace the hardware",
        )
