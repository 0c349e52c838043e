"""GetPreferredAllocation: choose devices that span as few NUMA nodes as possible.

The kubelet asks this of a plugin that offers it, with the candidates
(``available``), the devices it has already settled on (``must_include``) and the
container's total request (``size``); it intersects the answer with the
candidates and fills any shortfall itself
(pkg/kubelet/cm/devicemanager/manager.go, filterByAffinity / devicesToAllocate).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from devctl.model import Device


def preferred_allocation(
    devices: Sequence[Device], available: Sequence[str], must_include: Sequence[str], size: int
) -> list[str]:
    """The device IDs to allocate: ``must_include`` first, then the rest of the choice in device order.

    The choice is the smallest set of NUMA nodes, including those of the
    must-include devices, whose healthy available devices can fill the request;
    among equally small sets the tightest fit wins, so that larger free groups
    stay whole for later requests, and devices on the must-include devices' nodes
    are taken first. A device without topology could be anywhere, so it is taken
    only when located devices cannot fill the request. Only healthy devices from
    ``available`` are chosen.
    """
    must = list(dict.fromkeys(must_include))
    need = size - len(must)
    order = {d.id: i for i, d in enumerate(devices)}
    offered = set(available) - set(must)
    candidates = [d for d in devices if d.id in offered and d.healthy]
    located = [d for d in candidates if d.numa_nodes]
    if need <= 0:
        return must
    if len(located) <= need:
        unlocated = [d for d in candidates if not d.numa_nodes]
        return must + sorted((d.id for d in located + unlocated[: need - len(located)]), key=order.__getitem__)
    pinned = frozenset(n for d in devices if d.id in must for n in d.numa_nodes)
    nodes = sorted({n for d in located for n in d.numa_nodes} - pinned)

    def fits(span: frozenset[int]) -> list[Device]:
        return [d for d in located if set(d.numa_nodes) <= span]

    span = pinned
    for extra in range(len(nodes) + 1):
        spans = [pinned | frozenset(c) for c in combinations(nodes, extra)]
        enough = [(len(fits(s)), sorted(s)) for s in spans if len(fits(s)) >= need]
        if enough:
            span = frozenset(min(enough)[1])
            break

    def preference(d: Device) -> tuple[bool, int, int]:
        return (not set(d.numa_nodes) <= pinned, len(d.numa_nodes), order[d.id])

    chosen = sorted(fits(span), key=preference)[:need]
    return must + sorted((d.id for d in chosen), key=order.__getitem__)
