"""The metric families of ``devctl exporter``, rendered from the latest state: no I/O, no RPC.

Names and labels are the CLI contract's (cli.md, ``devctl exporter``). Every
number comes from devctl's own views (``devctl.analyze``, ``devctl.doctor``) of
one snapshot in which the live streams' device lists replace the interval's
probes, so ``devctl ls`` on the node and ``devctl fleet ls`` tell the same story.

A source that failed is ``devctl_source_up{source}=0`` and the series that
depend on it are absent — never zeros, which would read as "nothing held".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from devctl.analyze import (
    CHECKPOINT,
    IDENTITIES,
    MISSING,
    PLUGINS,
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
    TOPOLOGY,
    UNKNOWN,
    devices_view,
    only_sources,
    resources_view,
)
from devctl.doctor import diagnose
from devctl.exporter.live import LiveSocket
from devctl.model import HEALTHY, NodeSnapshot, PluginProbe, PluginStatus
from devctl.watch import numa_text

# The ``kind`` label: devices of device plugins; DRA drivers' devices will be ``dra``.
DEVICE_PLUGIN = "device-plugin"
# A registry socket that is a device plugin (pluginregistration's PluginInfo.type).
DEVICE_PLUGIN_TYPE = "DevicePlugin"

# The sources ``devctl_source_up`` reports, in the order they are listed.
SOURCES = (POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES)


@dataclass(frozen=True)
class ExporterView:
    """What one render reads: the interval's snapshot, the live streams, and what each socket was last known to serve.

    ``resources`` keeps a socket's resource name across refreshes: a plugin that
    is down at a refresh lists no devices, so its name cannot be inferred then.
    """

    snapshot: NodeSnapshot | None
    live: Mapping[str, LiveSocket]
    resources: Mapping[str, str]
    refreshed_at: float | None


def merged_snapshot(view: ExporterView) -> NodeSnapshot:
    """The interval's snapshot with each plugin socket as its live stream says now."""
    assert view.snapshot is not None
    plugins: list[PluginProbe] = []
    seen = set()
    for p in view.snapshot.plugins:
        seen.add(p.socket)
        live = view.live.get(p.socket)
        resource = p.resource or view.resources.get(p.socket)
        if live is None:
            plugins.append(replace(p, resource=resource))
        else:
            plugins.append(_as_live(p, live, resource))
    for socket, live in view.live.items():
        if socket not in seen:
            plugins.append(_as_live(PluginProbe(socket, live.status), live, view.resources.get(socket)))
    return replace(view.snapshot, plugins=tuple(plugins))


def _as_live(p: PluginProbe, live: LiveSocket, resource: str | None) -> PluginProbe:
    if live.up:
        return replace(p, status=PluginStatus.SERVING, devices=live.devices, resource=resource, error=None)
    return replace(p, status=live.status, devices=(), resource=resource, error=live.error)


def source_up(snapshot: NodeSnapshot) -> dict[str, bool]:
    """Whether each source was read whole at the last refresh."""

    def clean(source: str) -> bool:
        return not only_sources(snapshot, {source}).errors

    return {
        POD_RESOURCES: snapshot.pods is not None and snapshot.allocatable is not None and clean(POD_RESOURCES),
        PLUGINS: not any(e.source == PLUGINS_DIR_SOURCE for e in snapshot.errors),
        CHECKPOINT: snapshot.checkpoint is not None,
        TOPOLOGY: snapshot.topology is not None,
        IDENTITIES: clean(IDENTITIES),
    }


def health_value(health: str) -> float:
    """1 healthy, 0 not, -1 unknown (a device no source vouches for, or one held that its plugin no longer lists)."""
    if health == HEALTHY:
        return 1.0
    if health in (UNKNOWN, MISSING):
        return -1.0
    return 0.0


def _is_device_plugin(p: PluginProbe) -> bool:
    return p.registry is None or p.registry.type == DEVICE_PLUGIN_TYPE


def families(view: ExporterView) -> Iterator[Metric]:
    """Every family of the contract that the state can fill; none before the first refresh."""
    if view.snapshot is None or view.refreshed_at is None:
        return
    snap = merged_snapshot(view)
    up = source_up(view.snapshot)
    pods_known = view.snapshot.pods is not None

    sources = GaugeMetricFamily(
        "devctl_source_up",
        "Whether devctl read this node source whole at the last refresh (1) or not (0).",
        labels=["source"],
    )
    for name in SOURCES:
        sources.add_metric([name], 1.0 if up[name] else 0.0)
    yield sources

    refreshed = GaugeMetricFamily(
        "devctl_last_refresh_timestamp_seconds",
        "When pod-resources, the checkpoint and sysfs were last read (seconds since the epoch).",
    )
    refreshed.add_metric([], view.refreshed_at)
    yield refreshed

    plugin_up = GaugeMetricFamily(
        "devctl_plugin_up",
        "Whether a device plugin socket serves a live ListAndWatch stream (1) or not (0).",
        labels=["kind", "socket", "resource"],
    )
    live_resources = set()
    for p in sorted(snap.plugins, key=lambda p: p.socket):
        if not _is_device_plugin(p):
            continue
        serving = p.status == PluginStatus.SERVING
        plugin_up.add_metric([DEVICE_PLUGIN, p.socket, p.resource or ""], 1.0 if serving else 0.0)
        if serving and p.resource and p.socket in view.live:
            live_resources.add(p.resource)
    yield plugin_up

    rows = resources_view(snap)
    capacity = GaugeMetricFamily(
        "devctl_resource_capacity",
        "Devices of an extended resource, as its plugin lists them.",
        labels=["kind", "resource"],
    )
    allocatable = GaugeMetricFamily(
        "devctl_resource_allocatable", "Healthy devices of an extended resource.", labels=["kind", "resource"]
    )
    allocated = GaugeMetricFamily(
        "devctl_resource_allocated",
        "Devices of an extended resource that containers hold (pod-resources).",
        labels=["kind", "resource"],
    )
    for r in rows:
        # A number a failed source would have given is None in the views, or (for
        # pod-resources) not known at all: no sample then, never a zero.
        if r.capacity is not None:
            capacity.add_metric([DEVICE_PLUGIN, r.name], float(r.capacity))
        if r.allocatable is not None:
            allocatable.add_metric([DEVICE_PLUGIN, r.name], float(r.allocatable))
        if pods_known and r.allocated is not None:
            allocated.add_metric([DEVICE_PLUGIN, r.name], float(r.allocated))
    yield capacity
    yield allocatable
    yield allocated

    health = GaugeMetricFamily(
        "devctl_device_health",
        "Health of a device from its plugin's live stream: 1 healthy, 0 unhealthy, -1 unknown.",
        labels=["kind", "resource", "device", "numa"],
    )
    held = GaugeMetricFamily(
        "devctl_device_allocated",
        "1 for each container that holds the device (pod-resources).",
        labels=["kind", "resource", "device", "namespace", "pod", "container"],
    )
    for d in devices_view(snap):
        if d.resource in live_resources:
            health.add_metric([DEVICE_PLUGIN, d.resource, d.id, numa_text(d.numa_nodes)], health_value(d.health))
        if pods_known:
            for h in d.allocated_to:
                held.add_metric([DEVICE_PLUGIN, d.resource, d.id, h.namespace, h.pod, h.container], 1.0)
    yield health
    yield held

    findings = GaugeMetricFamily(
        "devctl_doctor_findings",
        "Findings of devctl doctor on this node, by severity and code.",
        labels=["severity", "code"],
    )
    for (severity, code), n in sorted(Counter((f.severity, f.code) for f in diagnose(snap)).items()):
        findings.add_metric([severity, code], float(n))
    yield findings
    # DRA drivers (kind="dra" rows above, and devctl_claim_state{namespace,claim,driver,state})
    # are added here once the snapshot carries DRA state; until then no DRA series exist.


class NodeCollector(Collector):
    """A prometheus-client collector over the exporter's latest state; every scrape reads, none fetches."""

    def __init__(self, current: Callable[[], ExporterView]):
        self._current = current

    def collect(self) -> Iterator[Metric]:
        yield from families(self._current())
