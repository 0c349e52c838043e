"""The metric families of ``devctl exporter``, rendered from the latest state: no I/O, no RPC.

Names and labels are the CLI contract's (cli.md, ``devctl exporter``). Work is
split by how often its input changes. Once per interval, ``prepare`` runs
devctl's own views (``devctl.analyze``) and checks (``devctl.doctor``) on the
refreshed snapshot, with the live streams' device lists in place of the
interval's probes, so ``devctl ls`` on the node and ``devctl fleet ls`` tell the
same story. On every stream update, ``families`` only lays the live device
lists over that: health, capacity and allocatable of a live plugin follow its
stream at once, at a cost linear in its devices.

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
    DeviceRow,
    ResourceRow,
    devices_view,
    only_sources,
    resources_view,
)
from devctl.doctor import diagnose
from devctl.exporter.live import LiveSocket
from devctl.model import HEALTHY, Device, NodeSnapshot, PluginProbe, PluginStatus
from devctl.watch import numa_text

# The ``kind`` label: devices of device plugins; DRA drivers' devices will be ``dra``.
DEVICE_PLUGIN = "device-plugin"
# A registry socket that is a device plugin (pluginregistration's PluginInfo.type).
DEVICE_PLUGIN_TYPE = "DevicePlugin"

# The sources ``devctl_source_up`` reports, in the order they are listed.
SOURCES = (POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES)


@dataclass(frozen=True)
class Refresh:
    """What one refresh gives, computed once per interval: the snapshot and devctl's views of it."""

    at: float  # seconds since the epoch
    snapshot: NodeSnapshot
    source_up: Mapping[str, bool]
    resources: tuple[ResourceRow, ...]
    devices: Mapping[str, Mapping[str, DeviceRow]]  # resource -> device ID -> row (holders, NUMA)
    findings: tuple[tuple[str, str, int], ...]  # (severity, code, how many)


@dataclass(frozen=True)
class ExporterView:
    """What one render reads: the last refresh, the live streams, and what each socket was last known to serve.

    ``resources`` keeps a socket's resource name across refreshes: a plugin that
    is down at a refresh lists no devices, so its name cannot be inferred then.
    """

    refresh: Refresh | None
    live: Mapping[str, LiveSocket]
    resources: Mapping[str, str]


def merged_plugins(
    snapshot: NodeSnapshot, live: Mapping[str, LiveSocket], resources: Mapping[str, str]
) -> tuple[PluginProbe, ...]:
    """The snapshot's plugin probes with each socket as its live stream says now (and sockets found since)."""
    plugins: list[PluginProbe] = []
    seen = set()
    for p in snapshot.plugins:
        seen.add(p.socket)
        state = live.get(p.socket)
        resource = p.resource or resources.get(p.socket)
        plugins.append(replace(p, resource=resource) if state is None else _as_live(p, state, resource))
    for socket, state in live.items():
        if socket not in seen:
            plugins.append(_as_live(PluginProbe(socket, state.status), state, resources.get(socket)))
    return tuple(plugins)


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


def prepare(snapshot: NodeSnapshot, live: Mapping[str, LiveSocket], resources: Mapping[str, str], at: float) -> Refresh:
    """devctl's views and checks of a refreshed snapshot, its plugins as the live streams say now."""
    merged = replace(snapshot, plugins=merged_plugins(snapshot, live, resources))
    devices: dict[str, dict[str, DeviceRow]] = {}
    for d in devices_view(merged):
        devices.setdefault(d.resource, {})[d.id] = d
    counts = Counter((f.severity, f.code) for f in diagnose(merged))
    return Refresh(
        at=at,
        snapshot=snapshot,
        source_up=source_up(snapshot),
        resources=resources_view(merged),
        devices=devices,
        findings=tuple((severity, code, n) for (severity, code), n in sorted(counts.items())),
    )


def health_value(health: str) -> float:
    """1 healthy, 0 not, -1 unknown (a device no source vouches for, or one held that its plugin no longer lists)."""
    if health == HEALTHY:
        return 1.0
    if health in (UNKNOWN, MISSING):
        return -1.0
    return 0.0


def _is_device_plugin(p: PluginProbe) -> bool:
    return p.registry is None or p.registry.type == DEVICE_PLUGIN_TYPE


def _live_lists(plugins: tuple[PluginProbe, ...], live: Mapping[str, LiveSocket]) -> dict[str, tuple[Device, ...]]:
    """Resource -> the device list of the live stream that speaks for it (the first serving socket by path)."""
    lists: dict[str, tuple[Device, ...]] = {}
    for p in sorted(plugins, key=lambda p: p.socket):
        if p.resource and p.status == PluginStatus.SERVING and p.socket in live and p.resource not in lists:
            lists[p.resource] = p.devices
    return lists


def families(view: ExporterView) -> Iterator[Metric]:
    """Every family of the contract that the state can fill; none before the first refresh."""
    refresh = view.refresh
    if refresh is None:
        return
    plugins = merged_plugins(refresh.snapshot, view.live, view.resources)
    pods_known = refresh.snapshot.pods is not None

    sources = GaugeMetricFamily(
        "devctl_source_up",
        "Whether devctl read this node source whole at the last refresh (1) or not (0).",
        labels=["source"],
    )
    for name in SOURCES:
        sources.add_metric([name], 1.0 if refresh.source_up[name] else 0.0)
    yield sources

    refreshed = GaugeMetricFamily(
        "devctl_last_refresh_timestamp_seconds",
        "When pod-resources, the checkpoint and sysfs were last read (seconds since the epoch).",
    )
    refreshed.add_metric([], refresh.at)
    yield refreshed

    plugin_up = GaugeMetricFamily(
        "devctl_plugin_up",
        "Whether a device plugin socket serves a live ListAndWatch stream (1) or not (0).",
        labels=["kind", "socket", "resource"],
    )
    for p in sorted(plugins, key=lambda p: p.socket):
        if _is_device_plugin(p):
            plugin_up.add_metric(
                [DEVICE_PLUGIN, p.socket, p.resource or ""], 1.0 if p.status == PluginStatus.SERVING else 0.0
            )
    yield plugin_up

    lists = _live_lists(plugins, view.live)
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
    for r in refresh.resources:
        listed = lists.get(r.name)
        if listed is not None:
            # The live list counts as `devctl ls` counts a serving plugin's: listed, and healthy among them.
            capacity.add_metric([DEVICE_PLUGIN, r.name], float(len(listed)))
            allocatable.add_metric([DEVICE_PLUGIN, r.name], float(sum(d.healthy for d in listed)))
        else:
            # A number a failed source would have given is None in the views: no sample then, never a zero.
            if r.capacity is not None:
                capacity.add_metric([DEVICE_PLUGIN, r.name], float(r.capacity))
            if r.allocatable is not None:
                allocatable.add_metric([DEVICE_PLUGIN, r.name], float(r.allocatable))
        if pods_known and r.allocated is not None:
            allocated.add_metric([DEVICE_PLUGIN, r.name], float(r.allocated))
    for name, listed in sorted(lists.items()):
        if all(r.name != name for r in refresh.resources):  # a plugin that appeared since the refresh
            capacity.add_metric([DEVICE_PLUGIN, name], float(len(listed)))
            allocatable.add_metric([DEVICE_PLUGIN, name], float(sum(d.healthy for d in listed)))
    yield capacity
    yield allocatable
    yield allocated

    health = GaugeMetricFamily(
        "devctl_device_health",
        "Health of a device from its plugin's live stream: 1 healthy, 0 unhealthy, -1 unknown.",
        labels=["kind", "resource", "device", "numa"],
    )
    for name, listed in sorted(lists.items()):
        ids = set()
        for d in listed:
            ids.add(d.id)
            health.add_metric([DEVICE_PLUGIN, name, d.id, numa_text(d.numa_nodes)], health_value(d.health))
        # Held, but the live plugin no longer lists it (removed or renamed since Allocate): unknown.
        for dev_id, row in refresh.devices.get(name, {}).items():
            if dev_id not in ids and row.allocated_to:
                health.add_metric([DEVICE_PLUGIN, name, dev_id, numa_text(row.numa_nodes)], -1.0)
    yield health

    held = GaugeMetricFamily(
        "devctl_device_allocated",
        "1 for each container that holds the device (pod-resources).",
        labels=["kind", "resource", "device", "namespace", "pod", "container"],
    )
    if pods_known:
        for name, rows in refresh.devices.items():
            for dev_id, row in rows.items():
                for h in row.allocated_to:
                    held.add_metric([DEVICE_PLUGIN, name, dev_id, h.namespace, h.pod, h.container], 1.0)
    yield held

    findings = GaugeMetricFamily(
        "devctl_doctor_findings",
        "Findings of devctl doctor on this node at the last refresh, by severity and code.",
        labels=["severity", "code"],
    )
    for severity, code, n in refresh.findings:
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
