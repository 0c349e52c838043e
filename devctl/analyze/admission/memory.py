"""The memory manager's ``Static`` policy, simplified from kubelet v1.32 ``memorymanager/policy_static.go``.

Guaranteed pods only (others: no preference), over ``memory`` and ``hugepages-*``. A NUMA mask is a hint when the
memory still free on its nodes holds the request of every resource; preferred when its width is the smallest
whose nodes could hold it at all (their memory less ``reservedMemory``). Not followed: the rule that a new
multi-node group may not overlap another pod's group partially (``isAffinityViolatingNUMAAllocations``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from devctl.analyze.admission.hints import iterate_masks
from devctl.analyze.admission.masks import MaskSpace, space_for
from devctl.base.errors import DevctlError
from devctl.model.machine import ContainerRequest, TopologyHint

STATIC = "Static"


class MemoryAllocationError(DevctlError):
    """The memory manager's ``Allocate`` failed; ``message`` is its error text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def memory_requests(containers: Sequence[ContainerRequest], qos: str) -> dict[str, int]:
    """The memory and hugepages a Guaranteed container (or the containers summed) asks for; ``{}`` otherwise."""
    if qos != "Guaranteed":
        return {}
    out: dict[str, int] = {}
    for container in containers:
        for name, amount in container.requests.items():
            if (name == "memory" or name.startswith("hugepages-")) and amount > 0:
                out[name] = out.get(name, 0) + amount
    return out


def _holds(nodes: frozenset[int], table: Mapping[int, Mapping[str, int]], requests: Mapping[str, int]) -> bool:
    return all(sum(table.get(n, {}).get(r, 0) for n in nodes) >= amount for r, amount in requests.items())


def memory_hints(
    numa_nodes: Sequence[int],
    free: Mapping[int, Mapping[str, int]],
    capacity: Mapping[int, Mapping[str, int]],
    requests: Mapping[str, int],
    *,
    space: MaskSpace | None = None,
) -> list[TopologyHint] | None:
    """``GetTopologyHints`` of the Static policy; ``None`` (no preference) when nothing is asked. ``space``: the
    masks of ``numa_nodes`` shared with the other providers (``masks.MaskSpace``)."""
    if not requests:
        return None
    space = space_for(numa_nodes, space)
    can = _holding(space, capacity, requests)
    width = space.width
    narrowest = space.narrowest(can)
    best = len(numa_nodes) if narrowest is None else narrowest
    return space.hints(_holding(space, free, requests), lambda m: width[m] == best)


def _holding(
    space: MaskSpace, table: Mapping[int, Mapping[str, int]], requests: Mapping[str, int]
) -> Callable[[int], bool]:
    """``_holds`` for every mask at once: each resource's amounts summed by mask."""
    sums = [
        (space.sums({n: table.get(n, {}).get(r, 0) for n in space.nodes}), amount) for r, amount in requests.items()
    ]
    return lambda m: all(s[m] >= amount for s, amount in sums)


def allocate_memory(
    numa_nodes: Sequence[int],
    free: Mapping[int, Mapping[str, int]],
    requests: Mapping[str, int],
    affinity: frozenset[int] | None,
) -> tuple[int, ...]:
    """The NUMA nodes the memory comes from: the affinity when it holds the request, else the narrowest mask that
    does (``getDefaultHint``); raises ``MemoryAllocationError`` when none does."""
    if not requests:
        return ()
    if affinity is not None and _holds(affinity, free, requests):
        return tuple(sorted(affinity))
    for mask in iterate_masks(numa_nodes):
        if _holds(mask, free, requests):
            return tuple(sorted(mask))
    raise MemoryAllocationError(
        "failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    )
