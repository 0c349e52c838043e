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

Every series selector of every query carries ``{job=~"JOB"}`` (``devctl fleet
--job``): a Prometheus that scrapes something else that happens to export a
``devctl_*`` family (another job, an old exporter under test) does not add its
series to the fleet. The default matches the plain scrape job of
deploy/prometheus-scrape.yaml (``devctl-exporter``) and the Prometheus
Operator's PodMonitor job (``<namespace>/devctl-exporter``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from devctl.base.errors import DevctlError
from devctl.fleet.prometheus import Sample
from devctl.model.findings import SEVERITIES

# Instant queries asked together -> each one's vector, in order.
QueryAll = Callable[[Sequence[str]], list[list[Sample]]]

HEALTH = {1.0: "Healthy", 0.0: "Unhealthy", -1.0: "Unknown"}

# The scrape jobs whose series are the fleet's: deploy/prometheus-scrape.yaml's job and the PodMonitor's namespace/name.
DEFAULT_JOB = "(.+/)?devctl-exporter"


class BadJob(DevctlError, ValueError):
    """``--job`` is not a regular expression: a usage error."""


def job_matcher(job: str) -> str:
    """``{job=~"JOB"}`` for a selector; raises BadJob for a pattern that is no regex.

    Python's ``re`` stands in for Prometheus' RE2 here (the common syntax is the
    same); the string is quoted as PromQL reads it (Go's escapes, which JSON's are).
    """
    try:
        re.compile(job)
    except re.error as e:
        raise BadJob(f"--job {job!r} is not a regular expression: {e}") from None
    return "{job=~" + json.dumps(job, ensure_ascii=False) + "}"


# free is the node's own FREE (devctl_resource_free, analyze.free_count), never worked out here from the others:
# allocatable - allocated would count a held unhealthy device twice. A node that sends none: unknown.
RESOURCE_NUMBERS = ("capacity", "allocatable", "allocated", "free")


def resource_series(job: str = DEFAULT_JOB) -> tuple[str, ...]:
    m = job_matcher(job)
    return tuple(f"max by (node, instance, kind, resource) (devctl_resource_{n}{m})" for n in RESOURCE_NUMBERS)


def nodes_query(job: str = DEFAULT_JOB) -> str:
    return f"max by (node, instance) (devctl_last_refresh_timestamp_seconds{job_matcher(job)})"


def unhealthy_held_query(job: str = DEFAULT_JOB) -> str:
    """Devices a node reports unhealthy that a container still holds, with the NUMA label of the health series."""
    m = job_matcher(job)
    return (
        f"devctl_device_allocated{m} * on (job, instance, kind, resource, device) group_left (numa) "
        f"(devctl_device_health{m} == 0)"
    )


RESOURCE_SERIES = resource_series()
NODES = nodes_query()
UNHEALTHY_HELD = unhealthy_held_query()


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


def fleet_resources(query_all: QueryAll, job: str = DEFAULT_JOB) -> tuple[FleetResourceRow, ...]:
    """Per node and resource: capacity, allocatable, allocated, free, unhealthy; every reporting node at least once."""
    numbers: dict[tuple[str, str, str], dict[str, int | None]] = {}
    *vectors, reporting = query_all([*resource_series(job), nodes_query(job)])
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


def fleet_devices(
    query_all: QueryAll, unhealthy_held: bool = False, job: str = DEFAULT_JOB
) -> tuple[FleetDeviceRow, ...]:
    """Every device of every node; with ``unhealthy_held`` only the unhealthy ones a container still holds."""
    health: dict[tuple[str, str, str, str], tuple[str, str | None]] = {}
    holders: dict[tuple[str, str, str, str], list[FleetHolder]] = {}

    def key(labels: dict[str, str]) -> tuple[str, str, str, str]:
        return node_of(labels), labels.get("kind", ""), labels.get("resource", ""), labels.get("device", "")

    if unhealthy_held:
        (unhealthy,) = query_all([unhealthy_held_query(job)])
        for s in unhealthy:
            health[key(s.labels)] = ("Unhealthy", s.labels.get("numa"))
            holders.setdefault(key(s.labels), []).append(_holder(s.labels))
    else:
        m = job_matcher(job)
        every, allocated = query_all([f"devctl_device_health{m}", f"devctl_device_allocated{m}"])
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


def fleet_findings(query_all: QueryAll, job: str = DEFAULT_JOB) -> tuple[FleetFindingRow, ...]:
    """Doctor's findings of every node, by severity and code; most severe first, then by node."""
    (findings,) = query_all([f"sum by (node, instance, severity, code) (devctl_doctor_findings{job_matcher(job)})"])
    rows = [
        FleetFindingRow(node_of(s.labels), s.labels.get("severity", ""), s.labels.get("code", ""), _count(s.value))
        for s in findings
    ]
    rank: dict[str, int] = {severity: i for i, severity in enumerate(SEVERITIES)}
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
