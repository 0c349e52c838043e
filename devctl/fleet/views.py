"""The fleet's answers, from the series every node's ``devctl exporter`` gives Prometheus.

Each view is a few instant PromQL queries, asked at once and joined by node;
devctl keeps no data of its own. Each query names its metric exactly (a regex
over ``__name__`` makes Prometheus scan every metric name's postings) and keeps
only the labels the view needs (``max by``: a smaller reply to decode; two jobs
scraping the same exporter give the same value). A node is named by the ``node`` label the scrape config sets (the
PodMonitor and scrape job in deploy/ copy the pod's node name into it), else by
the target's ``instance``. A number a node could not know (its pod-resources
was down, so it sent no allocation series) is ``None`` here: ``?`` in tables,
``null`` in JSON — never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from devctl.fleet.prometheus import Sample

# Instant queries asked together -> each one's vector, in order.
QueryAll = Callable[[Sequence[str]], list[list[Sample]]]

HEALTH = {1.0: "Healthy", 0.0: "Unhealthy", -1.0: "Unknown"}
SEVERITIES = ("error", "warning", "info")

# free is the node's own FREE (devctl_resource_free, analyze.free_count), never worked out here from the others:
# allocatable - allocated would count a held unhealthy device twice. A node that sends none: unknown.
RESOURCE_NUMBERS = ("capacity", "allocatable", "allocated", "free")
RESOURCE_SERIES = tuple(f"max by (node, instance, kind, resource) (devctl_resource_{n})" for n in RESOURCE_NUMBERS)
NODES = "max by (node, instance) (devctl_last_refresh_timestamp_seconds)"

# Devices a node reports unhealthy that a container still holds, with the NUMA label of the health series.
UNHEALTHY_HELD = (
    "devctl_device_allocated * on (job, instance, kind, resource, device) group_left (numa) (devctl_device_health == 0)"
)


@dataclass(frozen=True)
class FleetResourceRow:
    """One extended resource on one node (``devctl fleet ls``); ``resource`` is None for a node that has none."""

    node: str
    resource: str | None
    kind: str | None
    capacity: int | None
    allocatable: int | None
    allocated: int | None
    free: int | None
    unhealthy: int | None


@dataclass(frozen=True)
class FleetHolder:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class FleetDeviceRow:
    """One device on one node (``devctl fleet devices``); ``state`` as in ``devctl devices``."""

    node: str
    resource: str
    kind: str
    id: str
    health: str
    numa: str | None
    state: str
    allocated_to: tuple[FleetHolder, ...]


@dataclass(frozen=True)
class FleetFindingRow:
    """How many findings of one code a node's doctor reports (``devctl fleet doctor``)."""

    node: str
    severity: str
    code: str
    count: int | None


def node_of(labels: dict[str, str]) -> str:
    return labels.get("node") or labels.get("instance") or "?"


def _count(value: float) -> int | None:
    """A count as a node sent it; NaN or ±Inf (any scrape target may send them) is unknown, never 0 nor a crash."""
    return round(value) if math.isfinite(value) else None


def fleet_resources(query_all: QueryAll) -> tuple[FleetResourceRow, ...]:
    """Per node and resource: capacity, allocatable, allocated, free, unhealthy; every reporting node at least once."""
    numbers: dict[tuple[str, str, str], dict[str, int | None]] = {}
    *vectors, reporting = query_all([*RESOURCE_SERIES, NODES])
    for number, vector in zip(RESOURCE_NUMBERS, vectors, strict=True):
        for s in vector:
            labels = s.labels
            key = (
                labels.get("node") or labels.get("instance") or "?",
                labels.get("kind", ""),
                labels.get("resource", ""),
            )
            numbers.setdefault(key, {})[number] = _count(s.value)
    nodes = {node_of(s.labels) for s in reporting}
    rows = []
    for (node, kind, resource), n in numbers.items():
        capacity, allocatable, allocated, free = (n.get(k) for k in RESOURCE_NUMBERS)
        rows.append(
            FleetResourceRow(
                node=node,
                resource=resource,
                kind=kind or None,
                capacity=capacity,
                allocatable=allocatable,
                allocated=allocated,
                free=free,
                unhealthy=capacity - allocatable if capacity is not None and allocatable is not None else None,
            )
        )
    for node in nodes - {r.node for r in rows}:
        rows.append(FleetResourceRow(node, None, None, None, None, None, None, None))
    return tuple(sorted(rows, key=lambda r: (r.node, r.resource or "")))


def _state(health: str, held: bool) -> str:
    # As on the node: a device no source vouches for either way is not counted as unhealthy.
    if health != "Unhealthy":
        return "allocated" if held else "free"
    return "unhealthy-allocated" if held else "unhealthy"


def _holder(labels: dict[str, str]) -> FleetHolder:
    return FleetHolder(labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))


def fleet_devices(query_all: QueryAll, unhealthy_held: bool = False) -> tuple[FleetDeviceRow, ...]:
    """Every device of every node; with ``unhealthy_held`` only the unhealthy ones a container still holds."""
    health: dict[tuple[str, str, str, str], tuple[str, str | None]] = {}
    holders: dict[tuple[str, str, str, str], list[FleetHolder]] = {}

    def key(labels: dict[str, str]) -> tuple[str, str, str, str]:
        return node_of(labels), labels.get("kind", ""), labels.get("resource", ""), labels.get("device", "")

    if unhealthy_held:
        (unhealthy,) = query_all([UNHEALTHY_HELD])
        for s in unhealthy:
            health[key(s.labels)] = ("Unhealthy", s.labels.get("numa"))
            holders.setdefault(key(s.labels), []).append(_holder(s.labels))
    else:
        every, allocated = query_all(["devctl_device_health", "devctl_device_allocated"])
        for s in every:
            health[key(s.labels)] = (HEALTH.get(s.value, "Unknown"), s.labels.get("numa"))
        for s in allocated:
            holders.setdefault(key(s.labels), []).append(_holder(s.labels))
    rows = []
    for k in sorted(set(health) | set(holders)):
        node, kind, resource, device = k
        status, numa = health.get(k, ("Unknown", None))
        held = tuple(sorted(set(holders.get(k, ())), key=lambda h: (h.namespace, h.pod, h.container)))
        rows.append(FleetDeviceRow(node, resource, kind, device, status, numa, _state(status, bool(held)), held))
    return tuple(rows)


def fleet_findings(query_all: QueryAll) -> tuple[FleetFindingRow, ...]:
    """Doctor's findings of every node, by severity and code; most severe first, then by node."""
    (findings,) = query_all(["sum by (node, instance, severity, code) (devctl_doctor_findings)"])
    rows = [
        FleetFindingRow(node_of(s.labels), s.labels.get("severity", ""), s.labels.get("code", ""), _count(s.value))
        for s in findings
    ]
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    return tuple(sorted(rows, key=lambda r: (rank.get(r.severity, len(rank)), r.node, r.code)))


def only(rows: Iterable[object], nodes: Iterable[str], resources: Iterable[str]) -> list[object]:
    """Rows of the named nodes and resources (all when none are named)."""
    wanted_nodes, wanted_resources = set(nodes), set(resources)
    return [
        r
        for r in rows
        if (not wanted_nodes or getattr(r, "node", None) in wanted_nodes)
        and (not wanted_resources or getattr(r, "resource", None) in wanted_resources)
    ]
