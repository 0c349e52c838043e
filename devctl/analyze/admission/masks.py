"""NUMA masks as integers, for the hint providers' enumeration (issue 31: 16 NUMA nodes are 65,535 masks).

The kubelet's ``generateCPUTopologyHints``, ``generateDeviceTopologyHints`` and the memory manager's
``calculateHints`` test every mask by summing over its nodes. Here a mask is an integer over the nodes' positions
(bit ``i`` is ``nodes[i]``), the per-mask sums are built once for all masks (a mask's sum is that of the mask
without its lowest bit plus that bit's value), and a mask becomes a ``frozenset`` only when it is a hint.
The order is ``bitmask.IterateBitMasks``' (``hints.iterate_masks``): one node first, then two, each size in the
nodes' combination order; the answers are the same lists, hint by hint (tests/test_fit_hints_fast.py).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from devctl.model.machine import TopologyHint


class MaskSpace:
    """Every non-empty mask of ``nodes`` (sorted, as the kubelet orders them) as integers over their positions."""

    def __init__(self, nodes: Iterable[int]) -> None:
        self.nodes: tuple[int, ...] = tuple(sorted(set(nodes)))
        self.index: dict[int, int] = {n: i for i, n in enumerate(self.nodes)}
        self.size = 1 << len(self.nodes)
        self._order: list[int] | None = None
        self._sets: list[frozenset[int]] = []

    @functools.cached_property
    def width(self) -> list[int]:
        """For every mask (by integer), how many nodes it holds."""
        width = [0] * self.size
        for m in range(1, self.size):
            width[m] = width[m & (m - 1)] + 1
        return width

    @functools.cached_property
    def _preferred(self) -> list[TopologyHint | None]:
        return [None] * self.size

    @functools.cached_property
    def _other(self) -> list[TopologyHint | None]:
        return [None] * self.size

    def same_nodes(self, nodes: Iterable[int]) -> bool:
        return self.nodes == tuple(sorted(set(nodes)))

    def bits(self, nodes: Iterable[int]) -> int:
        """The mask of ``nodes``; a node the machine does not have adds nothing."""
        out = 0
        for n in nodes:
            i = self.index.get(n)
            if i is not None:
                out |= 1 << i
        return out

    def sums(self, values: Mapping[int, int]) -> list[int]:
        """For every mask (by integer), the sum of ``values`` over its nodes (a missing node counts 0)."""
        per_bit = [values.get(n, 0) for n in self.nodes]
        out = [0] * self.size
        for m in range(1, self.size):
            low = m & -m
            out[m] = out[m ^ low] + per_bit[low.bit_length() - 1]
        return out

    def unions(self, values: Mapping[int, int]) -> list[int]:
        """For every mask (by integer), the OR of ``values`` (bit sets) over its nodes."""
        per_bit = [values.get(n, 0) for n in self.nodes]
        out = [0] * self.size
        for m in range(1, self.size):
            low = m & -m
            out[m] = out[m ^ low] | per_bit[low.bit_length() - 1]
        return out

    def ordered(self) -> list[int]:
        """Every mask in ``IterateBitMasks``' order: one node first, then two, each size in combination order."""
        if self._order is None:
            bit = [1 << i for i in range(len(self.nodes))]
            sets: list[frozenset[int]] = [frozenset()] * self.size
            order: list[int] = []
            for size in range(1, len(self.nodes) + 1):
                for combo in itertools.combinations(range(len(self.nodes)), size):
                    m = sum(map(bit.__getitem__, combo))
                    sets[m] = frozenset(map(self.nodes.__getitem__, combo))
                    order.append(m)
            self._sets, self._order = sets, order
        return self._order

    def mask(self, m: int) -> frozenset[int]:
        """The mask ``m`` as the nodes it holds (one ``frozenset`` per mask, shared by every hint of this space)."""
        self.ordered()
        return self._sets[m]

    def narrowest(self, holds: Callable[[int], bool]) -> int | None:
        """The fewest nodes of a mask for which ``holds`` is true; ``None`` when none is."""
        for m in self.ordered():
            if holds(m):
                return self.width[m]
        return None

    def hints(self, fits: Callable[[int], bool], preferred: Callable[[int], bool]) -> list[TopologyHint]:
        """The hints of the masks that ``fits`` keeps, in the kubelet's order, preferred as ``preferred`` says.
        One hint value per mask and flag: hints are immutable, so every provider of this space shares them."""
        order, sets = self.ordered(), self._sets
        made = (self._other, self._preferred)
        out: list[TopologyHint] = []
        for m in order:
            if fits(m):
                flag = preferred(m)
                table = made[flag]
                got = table[m]
                if got is None:
                    got = table[m] = TopologyHint(sets[m], flag)
                out.append(got)
        return out


def covers_all(required: Sequence[int]) -> Callable[[int], bool]:
    """A mask test: the mask meets every one of ``required`` (masks; 0 is met by none)."""
    needs = tuple(required)
    return lambda m: all(m & g for g in needs)


def space_for(nodes: Iterable[int], space: MaskSpace | None) -> MaskSpace:
    """``space`` when it is over ``nodes`` (its hint values then shared), else a new one."""
    listed = tuple(nodes)
    return space if space is not None and space.same_nodes(listed) else MaskSpace(listed)
