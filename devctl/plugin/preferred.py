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
    stay whole for later requests. Devices without topology fit on any set of
    nodes but come last, because nothing is known about their locality. Only
    healthy devices from ``available`` are chosen.
    """
    must = list(dict.fromkeys(must_include))
    need = size - len(must)
    by_id = {d.id: d for d in devices}
    order = {d.id: i for i, d in enumerate(devices)}
    offered = set(available) - set(must)
    candidates = [d for d in devices if d.id in offered and d.healthy]
    if need <= 0 or not candidates:
        return must
    pinned = frozenset(n for i in must if i in by_id for n in by_id[i].numa_nodes)
    nodes = sorted({n for d in candidates for n in d.numa_nodes} - pinned)

    def fits(span: frozenset[int]) -> list[Device]:
        return [d for d in candidates if set(d.numa_nodes) <= span]

    span = frozenset(pinned | set(nodes))
    for extra in range(len(nodes) + 1):
        fitting = [(len(fits(pinned | set(c))), c) for c in combinations(nodes, extra)]
        enough = [(count, c) for count, c in fitting if count >= need]
        if enough:
            span = pinned | set(min(enough)[1])
            break

    def preference(d: Device) -> tuple[int, int, int]:
        # Devices on the must-include devices' nodes first, then other located ones, then unknown locality.
        rank = 2 if not d.numa_nodes else (0 if set(d.numa_nodes) <= pinned else 1)
        return (rank, len(d.numa_nodes), order[d.id])

    chosen = sorted(fits(span), key=preference)[:need]
    return must + sorted((d.id for d in chosen), key=order.__getitem__)
