"""The device manager's part of admission, as kubelet v1.32 ``pkg/kubelet/cm/devicemanager`` decides it.

- Hints (``topology_hints.go``, ``generateDeviceTopologyHints``): every NUMA mask holding every reusable device
  and enough available (healthy, unallocated) ones; preferred when its width is the smallest that the
  resource's devices - all of them, healthy or not, as upstream counts ``allDevices`` - could satisfy. A
  resource none of whose devices reports a NUMA node has no preference (``None``); one without enough devices
  gets ``[]``. Devices the container already holds regenerate their own hints (``[]`` if the count changed).
- Allocation (``manager.go``, ``devicesToAllocate``/``filterByAffinity``): reusable devices first, then the
  devices on the affinity's NUMA nodes, the plugin's preferred allocation where it offers one, then the others.
  v1.32 takes "any k of a set" in Go map order, i.e. at random: ``DeviceChoice`` then says the choice is open,
  and gives the per-node counts only when every possible answer has the same ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from devctl.analyze.admission.inputs import DeviceInfo
from devctl.analyze.admission.masks import MaskSpace, covers_all, space_for
from devctl.base.errors import DevctlError
from devctl.model.machine import TopologyHint


class DeviceAllocationError(DevctlError):
    """The device manager's ``Allocate`` failed; ``message`` is its error text (the kubelet wraps it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def has_topology(devices: Iterable[DeviceInfo]) -> bool:
    """``deviceHasTopologyAlignment``: any device (healthy or not) reports a NUMA node."""
    return any(d.numa_nodes for d in devices)


def generate_hints(
    devices: Sequence[DeviceInfo],
    nodes: Sequence[int],
    available: frozenset[str],
    reusable: frozenset[str],
    request: int,
    *,
    space: MaskSpace | None = None,
) -> list[TopologyHint]:
    """``generateDeviceTopologyHints``: masks in the kubelet's order, preferred at the minimal width."""
    by_id = {d.id: d for d in devices}
    space = space_for(nodes, space)
    # Devices counted by the NUMA nodes they are on: a mask is checked against a few groups, not every device.
    every = _count_by_mask(space, Counter(d.numa_nodes for d in devices if d.numa_nodes))
    free = _count_by_mask(space, Counter(by_id[i].numa_nodes for i in available if i in by_id and by_id[i].numa_nodes))
    placed = [by_id[i].numa_nodes for i in reusable if i in by_id and by_id[i].numa_nodes]
    needs = covers_all([space.bits(group) for group in placed])
    narrowest = space.narrowest(lambda m: every[m] >= request)
    best = len(nodes) if narrowest is None else narrowest
    width, base = space.width, len(placed)
    return space.hints(lambda m: needs(m) and base + free[m] >= request, lambda m: width[m] == best)


def _count_by_mask(space: MaskSpace, groups: Counter[frozenset[int]]) -> list[int]:
    """For every mask, how many devices have a NUMA node in it: single-node groups summed by mask, the others
    (a device on several nodes) added where they meet the mask."""
    single: Counter[int] = Counter()
    several: Counter[int] = Counter()
    for group, n in groups.items():
        bits = space.bits(group)
        if bits and bits & (bits - 1) == 0:
            single[next(iter(g for g in group if g in space.index))] += n
        elif bits:
            several[bits] += n
    out = space.sums(single)
    for bits, n in several.items():
        out = [c + n if m & bits else c for m, c in enumerate(out)]
    return out


def resource_hints(
    devices: Sequence[DeviceInfo],
    nodes: Sequence[int],
    allocated: frozenset[str],
    request: int,
    *,
    reusable: frozenset[str] = frozenset(),
    held: frozenset[str] = frozenset(),
    space: MaskSpace | None = None,
) -> list[TopologyHint] | None:
    """One resource's hints (``GetTopologyHints``/``GetPodTopologyHints``); ``None``: no preference.

    ``allocated``: every ID some container holds; ``held``: the IDs this container (or pod) already holds.
    """
    if not has_topology(devices):
        return None
    if held:
        if len(held) != request:
            return []
        return generate_hints(devices, nodes, held, frozenset(), request, space=space)
    available = available_devices(devices, allocated)
    if len(available | reusable) < request:
        return []
    return generate_hints(devices, nodes, available, reusable, request, space=space)


def available_devices(devices: Iterable[DeviceInfo], allocated: frozenset[str]) -> frozenset[str]:
    """``getAvailableDevices``: healthy and not allocated."""
    return frozenset(d.id for d in devices if d.healthy) - allocated


def filter_by_affinity(
    devices: Sequence[DeviceInfo], available: frozenset[str], affinity: frozenset[int] | None
) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``filterByAffinity``: (on the affinity's nodes, on other nodes, without NUMA node)."""
    if affinity is None or not has_topology(devices):
        return frozenset(), frozenset(), available
    by_id = {d.id: d for d in devices}
    aligned, unaligned, none = set(), set(), set()
    for device_id in available:
        device_nodes = by_id[device_id].numa_nodes if device_id in by_id else frozenset()
        if not device_nodes:
            none.add(device_id)
        elif device_nodes & affinity:
            aligned.add(device_id)
        else:
            unaligned.add(device_id)
    return frozenset(aligned), frozenset(unaligned), frozenset(none)


@dataclass(frozen=True)
class DeviceChoice:
    """What one container gets of one resource.

    ``ids``: the IDs when every answer the kubelet could give is the same, else ``None`` (the choice is open:
    ``candidates`` lists the IDs it picks among). ``per_node``: NUMA node -> devices taken from it (a device on
    two nodes counts on each; ``-1`` is "no NUMA node"), ``None`` when that too is open. ``numa_nodes``: the nodes
    the devices are on when decided, else every node they could come from. ``chosen``: one answer the kubelet
    could give, which admission carries on with.
    """

    resource: str
    count: int
    ids: tuple[str, ...] | None
    numa_nodes: tuple[int, ...]
    per_node: Mapping[int, int] | None
    chosen: tuple[str, ...]
    candidates: tuple[str, ...] = ()

    @property
    def open(self) -> bool:
        return self.ids is None


def _nodes_of(by_id: Mapping[str, DeviceInfo], ids: Iterable[str]) -> frozenset[int]:
    out: set[int] = set()
    for i in ids:
        nodes = by_id[i].numa_nodes if i in by_id else frozenset()
        out |= nodes or {-1}
    return frozenset(out)


def _per_node(by_id: Mapping[str, DeviceInfo], ids: Iterable[str]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for i in ids:
        nodes = by_id[i].numa_nodes if i in by_id else frozenset()
        for node in nodes or {-1}:
            counts[node] = counts.get(node, 0) + 1
    return counts


class _Picker:
    """``allocateRemainingFrom``: all of a set when it does not cover the need, else any ``needed`` of it."""

    def __init__(self, by_id: Mapping[str, DeviceInfo], needed: int) -> None:
        self.by_id = by_id
        self.needed = needed
        self.taken: list[str] = []
        self.open_pools: list[frozenset[str]] = []
        self.ids_open = False
        self.counts_open = False

    def take(self, pool: Iterable[str]) -> bool:
        rest = sorted(frozenset(pool) - set(self.taken))
        if self.needed <= 0:
            return True
        if len(rest) <= self.needed:
            self.taken.extend(rest)
            self.needed -= len(rest)
            return self.needed == 0
        self.ids_open = True
        if len({self.by_id[i].numa_nodes if i in self.by_id else frozenset() for i in rest}) > 1:
            self.counts_open = True
        self.open_pools.append(frozenset(rest))
        self.taken.extend(rest[: self.needed])
        self.needed = 0
        return True


def _ranked(preferred: Sequence[str] | None, pool: frozenset[str], must: Sequence[str], size: int) -> frozenset[str]:
    """A plugin's preferred allocation as a ranking: what it must include, then its first IDs in ``pool``."""
    if preferred is None:
        return frozenset()
    out = list(dict.fromkeys(must))
    for i in preferred:
        if len(out) >= size:
            break
        if i in pool and i not in out:
            out.append(i)
    return frozenset(out)


def allocate_devices(
    resource: str,
    devices: Sequence[DeviceInfo],
    allocated: frozenset[str],
    request: int,
    affinity: frozenset[int] | None,
    *,
    reusable: frozenset[str] = frozenset(),
    held: frozenset[str] = frozenset(),
    preferred: Sequence[str] | None = None,
) -> DeviceChoice:
    """``devicesToAllocate`` for one resource; raises ``DeviceAllocationError`` with the kubelet's text."""
    by_id = {d.id: d for d in devices}
    healthy = frozenset(d.id for d in devices if d.healthy)
    needed = request - len(held) if held else request
    if held and needed != 0:
        raise DeviceAllocationError(f'changed request for resource "{resource}" from {len(held)} to {request}')
    if not healthy:
        raise DeviceAllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
    if not held <= healthy:
        raise DeviceAllocationError(
            f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
        )
    picker = _Picker(by_id, needed)
    if needed == 0:
        return _choice(resource, picker, tuple(sorted(held)), by_id)
    if not picker.take(reusable):
        available = healthy - allocated - frozenset(picker.taken)
        if len(available) < picker.needed:
            raise DeviceAllocationError(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {picker.needed}, Available: {len(available)}"
            )
        aligned, unaligned, no_affinity = filter_by_affinity(devices, available, affinity)
        must = tuple(picker.taken)
        if picker.needed < len(aligned):
            ranked = _ranked(preferred, aligned | frozenset(must), must, request)
            if not picker.take(ranked & aligned):
                picker.take(aligned)
        elif not picker.take(aligned):
            ranked = _ranked(preferred, available | frozenset(must), tuple(picker.taken), request)
            if not picker.take(ranked & available) and not picker.take(unaligned):
                picker.take(no_affinity)
    return _choice(resource, picker, (), by_id)


def _choice(resource: str, picker: _Picker, held: tuple[str, ...], by_id: Mapping[str, DeviceInfo]) -> DeviceChoice:
    chosen = held or tuple(sorted(picker.taken))
    count = len(chosen)
    if not picker.ids_open:
        return DeviceChoice(
            resource, count, chosen, tuple(sorted(_nodes_of(by_id, chosen))), _per_node(by_id, chosen), chosen
        )
    candidates = frozenset(chosen).union(*picker.open_pools)
    per_node = None if picker.counts_open else _per_node(by_id, chosen)
    nodes = _nodes_of(by_id, chosen if per_node is not None else candidates)
    return DeviceChoice(resource, count, None, tuple(sorted(nodes)), per_node, chosen, tuple(sorted(candidates)))


def container_device_requests(requests: Mapping[str, int], registered: Iterable[str]) -> dict[str, int]:
    """``getContainerDeviceRequest``: the device-plugin resources among a container's limits, above zero."""
    known = frozenset(registered)
    return {r: n for r, n in sorted(requests.items()) if r in known and n > 0}
