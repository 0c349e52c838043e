"""The metric families of ``devctl exporter``, rendered from the latest state: no I/O, no RPC.

Names and labels are the CLI contract's (cli.md, ``devctl exporter``). Work is
split by how often its input changes. Once per interval, ``prepare`` runs
devctl's own views (``devctl.analyze``) and checks (``devctl.analyze.doctor``) on the
refreshed snapshot, with the live streams' device lists in place of the
interval's probes, so ``devctl ls`` on the node and ``devctl fleet ls`` tell the
same story. On every stream update, ``families`` only lays the live device
lists over that: health, capacity and allocatable of a live plugin follow its
stream at once, at a cost linear in its devices.

A source that failed is ``devctl_source_up{source}=0`` and the series that
depend on it are absent — never zeros, which would read as "nothing held".

DRA drivers are ``kind="dra"`` rows of the same families: the refresh reads
each driver's list, claims and holders, and each driver's live health stream
(``exporter.dra``) lays its later changes over that list at every render, so
health, capacity and allocatable follow the stream at once (devctl's DRA view,
``dra_inventory``, is run again then: a driver has few devices).
``devctl_claim_state`` says what holds each claim in ``dra_manager_state``, as
``devctl claims`` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from devctl.analyze import (
    CHECKPOINT,
    DRA_CHECKPOINT,
    IDENTITIES,
    KUBELET_STATE,
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
from devctl.analyze.claims import claims_view
from devctl.analyze.dra_inventory import dra_inventory
from devctl.analyze.rows import FREE_MEANING, free_count
from devctl.core.doctor import DoctorExtras, diagnose_node
from devctl.core.watch import numa_text
from devctl.exporter.dra import DriverLive, live_probes
from devctl.exporter.live import LiveSocket
from devctl.model import CDI, HEALTHY, RUNTIME, Device, NodeSnapshot, PluginProbe, PluginStatus, Source

# The ``kind`` label: devices of device plugins, and DRA drivers' devices (the views' ``kind``).
DEVICE_PLUGIN = "device-plugin"
DRA = "dra"

# The sources each refresh reads and ``devctl_source_up`` reports, in the order they are listed:
# the DRA ones give the claims (dra_manager_state) and their devices' NUMA nodes (CDI specs).
# KUBELET_STATE: doctor's checks of the CPU and memory managers' state files (a checksum the kubelet will refuse
# to start on) are the exporter's findings too; the files are small and read in one pass.
SOURCES = (POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES, DRA_CHECKPOINT, CDI, KUBELET_STATE)
# Read beside them for doctor's pod-level findings (which containers the runtime keeps from starting, and why),
# so that devctl_doctor_findings counts what `devctl doctor` finds; not a source_up series of its own.
READ = (*SOURCES, RUNTIME)


@dataclass(frozen=True)
class Refresh:
    """What one refresh gives, computed once per interval: the snapshot and devctl's views of it."""

    at: float  # seconds since the epoch
    snapshot: NodeSnapshot
    source_up: Mapping[str, bool]
    resources: tuple[ResourceRow, ...]
    devices: Mapping[str, Mapping[str, DeviceRow]]  # resource -> device ID -> row (holders, NUMA)
    dra_devices: tuple[DeviceRow, ...]  # every DRA driver's devices, ID <pool>/<device>
    claims: tuple[tuple[str, str, str, str], ...]  # (namespace, claim, driver, state) of each known state
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
    dra: Mapping[str, DriverLive] = field(default_factory=dict)  # each followed DRA driver's health stream


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

    # A socket's own failure is its devctl_plugin_up 0; the source is down when it was not read as a whole:
    # its reader failed, or a sockets directory could not be listed (an error no socket's probe holds).
    plugins_whole = not any(
        e.source in (PLUGINS, PLUGINS_DIR_SOURCE) or (e.source == Source.REGISTRY and e.subject is None)
        for e in snapshot.errors
    )
    return {
        POD_RESOURCES: snapshot.pods is not None and snapshot.allocatable is not None and clean(POD_RESOURCES),
        PLUGINS: plugins_whole,
        CHECKPOINT: snapshot.checkpoint is not None,
        TOPOLOGY: snapshot.topology is not None,
        IDENTITIES: clean(IDENTITIES),
        # A node that never ran DRA has no dra_manager_state and no CDI dir: read, and empty.
        DRA_CHECKPOINT: clean(DRA_CHECKPOINT),
        CDI: clean(CDI),
        KUBELET_STATE: clean(KUBELET_STATE),
    }


def prepare(
    snapshot: NodeSnapshot,
    live: Mapping[str, LiveSocket],
    resources: Mapping[str, str],
    at: float,
    extras: DoctorExtras | None = None,
    before: NodeSnapshot | None = None,
) -> Refresh:
    """devctl's views and checks of a refreshed snapshot, its plugins as the live streams say now; ``before``, the
    last refresh's reading, stands for doctor's second reading of a plugin that disagrees with the kubelet."""
    merged = replace(snapshot, plugins=merged_plugins(snapshot, live, resources))
    devices: dict[str, dict[str, DeviceRow]] = {}
    dra_devices = []
    for d in devices_view(merged):
        if d.kind == DRA:
            dra_devices.append(d)
        else:
            devices.setdefault(d.resource, {})[d.id] = d
    # A claim whose state is unknown (pod-resources unread) has no series: unknown is not guessed.
    claims = tuple(
        (c.namespace, c.name, driver, c.state)
        for c in claims_view(merged)
        if c.state is not None
        for driver in c.drivers
    )
    # doctor's own reading of the node: the refresh as read, never with the live streams laid over it (a socket
    # followed after it was deleted, or up again since its probe failed, would be a finding doctor never makes:
    # plugin-unreachable for its no-plugin, or source-unreadable for a probe error no row explains).
    counts = Counter((f.severity, f.code) for f in diagnose_node(snapshot, before, extras))
    return Refresh(
        at=at,
        snapshot=snapshot,
        source_up=source_up(snapshot),
        resources=resources_view(merged),
        devices=devices,
        dra_devices=tuple(dra_devices),
        claims=claims,
        findings=tuple((severity, code, n) for (severity, code), n in sorted(counts.items())),
    )


def health_value(health: str) -> float:
    """1 healthy, 0 not, -1 unknown (a device no source vouches for, or one held that its plugin no longer lists)."""
    if health == HEALTHY:
        return 1.0
    if health in (UNKNOWN, MISSING):
        return -1.0
    return 0.0


def _dra_driver(p: PluginProbe) -> str | None:
    """The driver a registration socket names, when it is a DRA driver's."""
    return p.dra_driver


def _dra_serving(p: PluginProbe) -> bool:
    """A DRA driver serves when its registration socket and its endpoint both do (as `devctl plugins` says)."""
    return p.status == PluginStatus.SERVING and p.dra is not None and p.dra.status == PluginStatus.SERVING


def _live_lists(plugins: tuple[PluginProbe, ...], live: Mapping[str, LiveSocket]) -> dict[str, Sequence[Device]]:
    """Resource -> the device list of the live stream that speaks for it (the first serving socket by path)."""
    lists: dict[str, Sequence[Device]] = {}
    for p in sorted(plugins, key=lambda p: p.socket):
        if p.resource and p.status == PluginStatus.SERVING and p.socket in live and p.resource not in lists:
            lists[p.resource] = p.devices
    return lists


def _live_free(listed: Sequence[Device], rows: Mapping[str, DeviceRow]) -> int:
    """FREE of a live plugin's list: its healthy devices that no container held at the refresh (analyze.free_count)."""
    healthy = {d.id for d in listed if d.healthy}
    return free_count(len(healthy), (dev_id for dev_id, row in rows.items() if row.allocated_to), healthy.__contains__)


@dataclass(frozen=True)
class Layout:
    """One render's reading of the state: the refresh with the live streams laid over it."""

    refresh: Refresh
    plugins: tuple[PluginProbe, ...]
    lists: Mapping[str, Sequence[Device]]  # resource -> its live stream's device list
    dra_resources: list[ResourceRow]
    dra_devices: list[DeviceRow]
    pods_known: bool


def layout(view: ExporterView) -> Layout | None:
    """The state as one render shows it; None before the first refresh."""
    refresh = view.refresh
    if refresh is None:
        return None
    snapshot = refresh.snapshot
    dra_resources = [r for r in refresh.resources if r.kind == DRA]
    dra_devices = list(refresh.dra_devices)
    probes = live_probes(snapshot.plugins, view.dra)
    if probes is not snapshot.plugins:  # a DRA health stream said something since the refresh read it
        snapshot = replace(snapshot, plugins=probes)
        dra_resources, dra_devices = dra_inventory(snapshot)
    plugins = merged_plugins(snapshot, view.live, view.resources)
    lists = _live_lists(plugins, view.live)
    return Layout(refresh, plugins, lists, dra_resources, dra_devices, snapshot.pods is not None)


def families(lay: Layout | None) -> Iterator[Metric]:
    """Every family of the contract that the state can fill but ``devctl_device_health`` (``HealthLines``)."""
    if lay is None:
        return
    yield _source_up_family(lay.refresh)
    yield _last_refresh_family(lay.refresh)
    yield _plugin_up_family(lay.plugins)
    yield from _resource_families(lay)
    yield _device_allocated_family(lay)
    yield _claim_state_family(lay.refresh)
    yield _findings_family(lay.refresh)


def _source_up_family(refresh: Refresh) -> GaugeMetricFamily:
    sources = GaugeMetricFamily(
        "devctl_source_up",
        "Whether devctl read this node source whole at the last refresh (1) or not (0).",
        labels=["source"],
    )
    for name in SOURCES:
        sources.add_metric([name], 1.0 if refresh.source_up[name] else 0.0)
    return sources


def _last_refresh_family(refresh: Refresh) -> GaugeMetricFamily:
    refreshed = GaugeMetricFamily(
        "devctl_last_refresh_timestamp_seconds",
        "When pod-resources, the checkpoint and sysfs were last read (seconds since the epoch).",
    )
    refreshed.add_metric([], refresh.at)
    return refreshed


def _plugin_up_family(plugins: tuple[PluginProbe, ...]) -> GaugeMetricFamily:
    plugin_up = GaugeMetricFamily(
        "devctl_plugin_up",
        "Whether a device plugin socket serves a live ListAndWatch stream (1) or not (0); "
        "for a DRA driver's registration socket, whether it and the driver's endpoint answer.",
        labels=["kind", "socket", "resource"],
    )
    for p in sorted(plugins, key=lambda p: p.socket):
        driver = _dra_driver(p)
        if driver is not None:
            plugin_up.add_metric([DRA, p.socket, driver], 1.0 if _dra_serving(p) else 0.0)
        elif p.is_device_plugin:
            plugin_up.add_metric(
                [DEVICE_PLUGIN, p.socket, p.resource or ""], 1.0 if p.status == PluginStatus.SERVING else 0.0
            )
    return plugin_up


@dataclass(frozen=True)
class _Counts:
    """The four families of a resource's device counts, filled row by row."""

    capacity: GaugeMetricFamily
    allocatable: GaugeMetricFamily
    allocated: GaugeMetricFamily
    free: GaugeMetricFamily

    def listed(self, name: str, listed: Sequence[Device]) -> None:
        """A live plugin's counts as `devctl ls` counts a serving plugin's: listed, and healthy among them."""
        self.capacity.add_metric([DEVICE_PLUGIN, name], float(len(listed)))
        self.allocatable.add_metric([DEVICE_PLUGIN, name], float(sum(d.healthy for d in listed)))

    def refreshed(self, r: ResourceRow, pods_known: bool) -> None:
        """A resource's counts as the refresh read them (a DRA driver's: its health stream's then)."""
        # A number a failed source would have given is None in the views: no sample then, never a zero.
        if r.capacity is not None:
            self.capacity.add_metric([r.kind, r.name], float(r.capacity))
        if r.allocatable is not None:
            self.allocatable.add_metric([r.kind, r.name], float(r.allocatable))
        if pods_known and r.free is not None:
            self.free.add_metric([r.kind, r.name], float(r.free))


def _resource_families(lay: Layout) -> tuple[GaugeMetricFamily, ...]:
    """capacity, allocatable, allocated and free of each resource, a live plugin's from its live list."""
    counts = _Counts(
        GaugeMetricFamily(
            "devctl_resource_capacity",
            "Devices of an extended resource, as its plugin lists them.",
            labels=["kind", "resource"],
        ),
        GaugeMetricFamily(
            "devctl_resource_allocatable", "Healthy devices of an extended resource.", labels=["kind", "resource"]
        ),
        GaugeMetricFamily(
            "devctl_resource_allocated",
            "Devices of an extended resource that containers hold (pod-resources).",
            labels=["kind", "resource"],
        ),
        GaugeMetricFamily(
            "devctl_resource_free",
            f"FREE of devctl ls: {FREE_MEANING}.",
            labels=["kind", "resource"],
        ),
    )
    refresh, pods_known = lay.refresh, lay.pods_known
    for r in (*(r for r in refresh.resources if r.kind != DRA), *lay.dra_resources):
        listed = lay.lists.get(r.name) if r.kind == DEVICE_PLUGIN else None
        if listed is None:
            counts.refreshed(r, pods_known)
        else:
            counts.listed(r.name, listed)
            if pods_known and r.free is not None:
                live_free = _live_free(listed, refresh.devices.get(r.name, {}))
                counts.free.add_metric([DEVICE_PLUGIN, r.name], float(live_free))
        if pods_known and r.allocated is not None:
            counts.allocated.add_metric([r.kind, r.name], float(r.allocated))
    known = {r.name for r in refresh.resources if r.kind == DEVICE_PLUGIN}
    for name, listed in sorted(lay.lists.items()):
        if name not in known:  # a plugin that appeared since the refresh
            counts.listed(name, listed)
    return counts.capacity, counts.allocatable, counts.allocated, counts.free


def _device_allocated_family(lay: Layout) -> GaugeMetricFamily:
    held = GaugeMetricFamily(
        "devctl_device_allocated",
        "1 for each container that holds the device (pod-resources; a DRA device: through a claim).",
        labels=["kind", "resource", "device", "namespace", "pod", "container"],
    )
    if not lay.pods_known:
        return held
    for name, rows in lay.refresh.devices.items():
        for dev_id, row in rows.items():
            for h in row.allocated_to or ():
                held.add_metric([DEVICE_PLUGIN, name, dev_id, h.namespace, h.pod, h.container], 1.0)
    for dra_row in lay.dra_devices:
        for h in dra_row.allocated_to or ():
            # A claim's pod that no container uses it in yet, or a claim with no pod, is no container holding it.
            if h.container:
                held.add_metric([DRA, dra_row.resource, dra_row.id, h.namespace, h.pod, h.container], 1.0)
    return held


def _claim_state_family(refresh: Refresh) -> GaugeMetricFamily:
    claim_state = GaugeMetricFamily(
        "devctl_claim_state",
        "1 for each DRA claim in dra_manager_state and each of its drivers, with what holds it: prepared, "
        "checkpointed, stale or driver-missing (no series while pod-resources is unread, unless driver-missing).",
        labels=["namespace", "claim", "driver", "state"],
    )
    for namespace, claim, driver, state in refresh.claims:
        claim_state.add_metric([namespace, claim, driver, state], 1.0)
    return claim_state


def _findings_family(refresh: Refresh) -> GaugeMetricFamily:
    findings = GaugeMetricFamily(
        "devctl_doctor_findings",
        "Findings of devctl doctor on this node at the last refresh, by severity and code.",
        labels=["severity", "code"],
    )
    for severity, code, n in refresh.findings:
        findings.add_metric([severity, code], float(n))
    return findings


HEALTH_HELP = (
    "Health of a device from its plugin's live stream (a DRA driver's: its live health stream): "
    "1 healthy, 0 unhealthy, -1 unknown."
)
_HEALTH_HEAD = f"# HELP devctl_device_health {HEALTH_HELP}\n# TYPE devctl_device_health gauge\n".encode()


def _escape(value: str) -> str:
    """A label value as the text exposition format writes it (backslash, line feed and double quote escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _health_line(kind: str, resource: str, device: str, numa: str, value: float) -> str:
    # Labels in name order and the value as prometheus-client writes them: the parser reads both back exactly.
    return (
        f'devctl_device_health{{device="{_escape(device)}",kind="{kind}",numa="{_escape(numa)}",'
        f'resource="{_escape(resource)}"}} {value!r}\n'
    )


_NO_ROWS: Mapping[str, DeviceRow] = MappingProxyType({})  # one object: a resource the refresh did not see stays kept


class HealthLines:
    """``devctl_device_health``, the family as large as the node, written here with each resource's lines kept.

    prometheus-client formats every sample in Python (about 50 µs each): the
    10,000 health samples of a large node cost half a second per build, most of
    it for resources that did not change. A resource's lines are written again
    only when its live list or its refresh changed (a new tuple, a new dict);
    a health flip costs one resource's lines. ``tests/test_exporter_lines.py``
    checks them against prometheus-client's own output.
    """

    def __init__(self) -> None:
        # resource -> (the live list and the refresh's rows its lines were written from, the lines)
        self._kept: dict[str, tuple[Sequence[Device], Mapping[str, DeviceRow], bytes]] = {}

    def render(self, lay: Layout | None) -> bytes:
        if lay is None:
            return b""
        parts = [_HEALTH_HEAD]
        kept = {}
        for name, listed in sorted(lay.lists.items()):
            rows = lay.refresh.devices.get(name, _NO_ROWS)
            hit = self._kept.get(name)
            if hit is not None and hit[0] is listed and hit[1] is rows:
                chunk = hit[2]
            else:
                chunk = self._resource(name, listed, rows)
            kept[name] = (listed, rows, chunk)
            parts.append(chunk)
        self._kept = kept
        # Listed by its health stream, or held by a claim with no stream to vouch for it (-1).
        parts.append(
            "".join(
                _health_line(DRA, d.resource, d.id, numa_text(d.numa_nodes), health_value(d.health))
                for d in lay.dra_devices
            ).encode()
        )
        return b"".join(parts)

    @staticmethod
    def _resource(name: str, listed: Sequence[Device], rows: Mapping[str, DeviceRow]) -> bytes:
        lines = [
            _health_line(DEVICE_PLUGIN, name, d.id, numa_text(d.numa_nodes), health_value(d.health)) for d in listed
        ]
        ids = {d.id for d in listed}
        # Held, but the live plugin no longer lists it (removed or renamed since Allocate): unknown.
        lines += [
            _health_line(DEVICE_PLUGIN, name, dev_id, numa_text(row.numa_nodes), -1.0)
            for dev_id, row in rows.items()
            if dev_id not in ids and row.allocated_to
        ]
        return "".join(lines).encode()


class NodeCollector(Collector):
    """A prometheus-client collector over the layout being rendered; every scrape reads, none fetches."""

    def __init__(self, current: Callable[[], Layout | None]):
        self._current = current

    def collect(self) -> Iterator[Metric]:
        yield from families(self._current())
