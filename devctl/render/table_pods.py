"""``devctl pods`` and ``get``: what each container got, its devices' health, memory, NUMA and claims."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from devctl.base.units import format_bytes, format_cpulist
from devctl.model import (
    HEALTHY,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    PodResources,
)
from devctl.render.style import paint

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    pass

from devctl.render.grid import TableStyle, grid, numa_cell, short_name


def _memory(memory: Iterable[ContainerMemory]) -> str:
    totals: dict[str, int] = {}
    for m in memory:
        totals[m.type] = totals.get(m.type, 0) + m.size
    return " ".join(f"{t}={format_bytes(n)}" for t, n in totals.items())


def _devices(c: ContainerResources, wide: bool, health: Health | None = None) -> str:
    """Each resource's devices: IDs under full names when wide (a device that is not Healthy with its health
    beside it, ``GPU-5(Unhealthy)``), else counts under short names (DRA drivers too)."""
    if wide:
        known = health or {}

        def ids(d: ContainerDevices) -> str:
            of = known.get(d.resource, {})
            return ",".join(i if of.get(i, HEALTHY) == HEALTHY else f"{i}({of[i]})" for i in d.ids)

        return " ".join(f"{d.resource}={ids(d)}" for d in c.devices)
    devices = c.devices
    if len(devices) == 1 and not c.dynamic_resources:  # most containers: one resource, no claims
        (d,) = devices
        return f"{short_name(d.resource)}={len(d.ids)}"
    counts: dict[str, int] = {}
    for d in devices:
        name = short_name(d.resource)
        counts[name] = counts.get(name, 0) + len(d.ids)
    for r in c.dynamic_resources:
        for dev in r.devices:
            counts[dev.driver] = counts.get(dev.driver, 0) + 1
    return " ".join(f"{name}={n}" for name, n in counts.items())


# Each device plugin device's health: resource -> device ID -> Healthy, Unhealthy, Missing or Unknown.
Health = Mapping[str, Mapping[str, str]]


def healthy_of(c: ContainerResources, health: Health | None) -> tuple[int | None, int]:
    """How many of the container's devices (device plugins' and DRA claims') are Healthy, and of how many;
    None when the health of any is unknown (its plugin or driver did not say): unknown, never 0."""
    total = 0
    healthy = 0
    unknown = False
    for d in c.devices:
        of = health.get(d.resource) if health is not None else None
        for i in d.ids:
            total += 1
            h = of.get(i) if of is not None else None
            if h is None or h == "Unknown":
                unknown = True
            elif h == HEALTHY:
                healthy += 1
    for r in c.dynamic_resources:
        for dev in r.devices:
            total += 1
            if dev.health is None:
                unknown = True
            elif dev.health == HEALTHY:
                healthy += 1
    return (None if unknown else healthy), total


def _healthy_cell(c: ContainerResources, health: Health | None, color: bool) -> object:
    """``3/4`` (healthy of all, as claims' HEALTHY), ``?/4`` when any health is unknown, ``<none>`` for no device."""
    healthy, total = healthy_of(c, health)
    if not total:
        return ""
    if healthy is None:
        return paint(f"?/{total}", "yellow", color)
    return paint(f"{healthy}/{total}", "red" if healthy < total else "green", color)


def _claims(c: ContainerResources) -> str:
    return " ".join(
        f"{r.claim_namespace}/{r.claim_name}="
        + ",".join(
            f"{d.driver}/{d.pool}/{d.device}" + ("" if d.share_id is None else f" (share {d.share_id})")
            for d in r.devices
        )
        for r in c.dynamic_resources
    )


def pods_table(pods: Sequence[PodResources], style: TableStyle, health: Health | None = None) -> str:
    """One row per container: its devices (counts by short name; IDs when wide), how many are healthy
    (``health``: each device plugin device's; a DRA device's is its own) and its exclusive CPUs.

    ``wide`` adds the memory the memory manager pinned, the NUMA nodes and the DRA claims.
    """
    headers = ["namespace", "pod", "container", "devices", "healthy", "cpus"]
    if style.wide:
        headers += ["memory", "numa", "claims"]
    out = []
    for p in pods:
        for c in p.containers:
            cpus = format_cpulist(c.cpu_ids) if c.cpu_ids else ""
            row: list[object] = [
                p.namespace,
                p.name,
                c.name,
                _devices(c, style.wide, health),
                _healthy_cell(c, health, style.color),
                cpus,
            ]
            if style.wide:
                numa = sorted(
                    {n for d in c.devices for n in d.numa_nodes} | {n for m in c.memory for n in m.numa_nodes}
                )
                row += [_memory(c.memory), numa_cell(numa), _claims(c)]
            out.append(row)
    return grid(headers, out, style, cut=(0, 1, 2))  # NAMESPACE, POD, CONTAINER; never DEVICES, HEALTHY or CPUS
