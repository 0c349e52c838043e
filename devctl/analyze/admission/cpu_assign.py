"""Which CPUs the kubelet's static CPU policy takes: its ``takeByTopology``, as a pure function over the machine.

Follows kubelet v1.32 ``pkg/kubelet/cm/cpumanager/cpu_assignment.go`` (written anew from reading it):

- ``take_packed`` is ``takeByTopologyNUMAPacked``: whole NUMA nodes and whole sockets first (NUMA nodes first when
  the machine has at least as many sockets as NUMA nodes, sockets first otherwise), then whole cores (skipped with
  ``distribute-cpus-across-cores``), then single threads. Every level is walked in ascending order of free CPUs,
  then id, nested as the kubelet nests it (NUMA → socket → core, or socket → NUMA → core).
- ``take_distributed`` is ``takeByTopologyNUMADistributed`` (``distribute-cpus-across-numa``): the fewest NUMA
  nodes over which the request spreads evenly in groups, the remainder placed where it leaves the free CPUs most
  balanced (the kubelet's standard deviation, rounded to three places), else the packed answer.

Not followed: ``prefer-align-cpus-by-uncorecache`` (the model has no uncore cache ids).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence

from devctl.base.errors import DevctlError
from devctl.model.machine import MachineTopology


class TakeError(DevctlError):
    """``takeByTopology`` failed; ``str()`` is the kubelet's own error text."""


class CpuTopology:
    """The kubelet's ``topology.CPUTopology`` of a machine: the CPUs of each NUMA node, socket and core."""

    def __init__(self, machine: MachineTopology) -> None:
        self.numa_of: dict[int, int] = {}
        self.socket_of: dict[int, int] = {}
        self.core_of: dict[int, int] = {}
        self.numa_cpus: dict[int, frozenset[int]] = {}
        self.socket_cpus: dict[int, frozenset[int]] = {}
        self.core_cpus: dict[int, frozenset[int]] = {}
        groups: tuple[dict[int, set[int]], dict[int, set[int]], dict[int, set[int]]] = ({}, {}, {})
        for cpu in machine.cpus:
            self.numa_of[cpu.id], self.socket_of[cpu.id], self.core_of[cpu.id] = cpu.numa, cpu.socket, cpu.core
            groups[0].setdefault(cpu.numa, set()).add(cpu.id)
            groups[1].setdefault(cpu.socket, set()).add(cpu.id)
            groups[2].setdefault(cpu.core, set()).add(cpu.id)
        self.numa_cpus = {k: frozenset(v) for k, v in groups[0].items()}
        self.socket_cpus = {k: frozenset(v) for k, v in groups[1].items()}
        self.core_cpus = {k: frozenset(v) for k, v in groups[2].items()}
        self.all = frozenset(self.numa_of)
        n = len(self.all)
        # CPUsPerCore and CPUsPerSocket as the kubelet divides them (0 on an empty machine).
        self.per_core = n // len(self.core_cpus) if self.core_cpus else 0
        self.per_socket = n // len(self.socket_cpus) if self.socket_cpus else 0
        self.numa_first = len(self.socket_cpus) >= len(self.numa_cpus)

    def cpus_in_numas(self, numas: Iterable[int]) -> frozenset[int]:
        out: set[int] = set()
        for numa in numas:
            out |= self.numa_cpus.get(numa, frozenset())
        return frozenset(out)

    def sockets_of_numas(self, numas: Iterable[int]) -> frozenset[int]:
        wanted = set(numas)
        return frozenset(self.socket_of[c] for c in self.all if self.numa_of[c] in wanted)


class _Accumulator:
    """The kubelet's ``cpuAccumulator``: what is still free (``details``), what is taken, how many are needed."""

    def __init__(self, topo: CpuTopology, available: Iterable[int], count: int, spread: bool) -> None:
        self.topo = topo
        self.free = set(available) & topo.all
        self.needed = count
        self.result: set[int] = set()
        self.spread = spread

    def take(self, cpus: Iterable[int]) -> None:
        got = set(cpus)
        self.result |= got
        self.free -= got
        self.needed -= len(got)

    def satisfied(self) -> bool:
        return self.needed < 1

    def _group(self, of: dict[int, int], within: Callable[[int], bool] = lambda _c: True) -> dict[int, int]:
        """Free CPUs per group id (NUMA node, socket or core), among the free CPUs ``within`` keeps."""
        counts: dict[int, int] = {}
        for cpu in self.free:
            if within(cpu):
                counts[of[cpu]] = counts.get(of[cpu], 0) + 1
        return counts

    @staticmethod
    def _ascending(counts: dict[int, int]) -> list[int]:
        return sorted(counts, key=lambda i: (counts[i], i))

    def _nested(self, outer: list[int], outer_of: dict[int, int], inner_of: dict[int, int]) -> list[int]:
        free_inner = self._group(inner_of)
        out: list[int] = []
        for group in outer:
            inner = {inner_of[c] for c in self.free if outer_of[c] == group}
            out += sorted(inner, key=lambda i: (free_inner[i], i))
        return out

    def numas(self) -> list[int]:
        t = self.topo
        if t.numa_first:
            return self._ascending(self._group(t.numa_of))
        return self._nested(self.sockets(), t.socket_of, t.numa_of)

    def sockets(self) -> list[int]:
        t = self.topo
        if t.numa_first:
            return self._nested(self.numas(), t.numa_of, t.socket_of)
        return self._ascending(self._group(t.socket_of))

    def cores(self) -> list[int]:
        t = self.topo
        if t.numa_first:
            return self._nested(self.sockets(), t.socket_of, t.core_of)
        return self._nested(self.numas(), t.numa_of, t.core_of)

    def ordered_cpus(self) -> list[int]:
        """``sortAvailableCPUsPacked`` (core by core) or, spreading, ``sortAvailableCPUsSpread`` (by socket, id)."""
        t = self.topo
        out: list[int] = []
        if self.spread:
            for socket in self.sockets():
                out += sorted(c for c in self.free if t.socket_of[c] == socket)
        else:
            for core in self.cores():
                out += sorted(c for c in self.free if t.core_of[c] == core)
        return out

    def _take_full(self, order: list[int], cpus: dict[int, frozenset[int]], size: Callable[[int], int]) -> None:
        for group in order:
            if self.needed >= size(group):
                self.take(cpus[group])

    def free_numas(self) -> list[int]:
        """``freeNUMANodes``: the NUMA nodes all of whose CPUs are free, in ``numas()`` order."""
        t = self.topo
        return [n for n in self.numas() if len(self.free & t.numa_cpus[n]) == len(t.numa_cpus[n])]

    def free_sockets(self) -> list[int]:
        t = self.topo
        return [s for s in self.sockets() if len(self.free & t.socket_cpus[s]) == t.per_socket]

    def free_cores(self) -> list[int]:
        t = self.topo
        return [c for c in self.cores() if len(self.free & t.core_cpus[c]) == t.per_core]

    def take_full_numas(self) -> None:
        t = self.topo
        self._take_full(self.free_numas(), t.numa_cpus, lambda n: len(t.numa_cpus[n]))

    def take_full_sockets(self) -> None:
        t = self.topo
        self._take_full(self.free_sockets(), t.socket_cpus, lambda s: len(t.socket_cpus[s]))

    def take_full_cores(self) -> None:
        t = self.topo
        self._take_full(self.free_cores(), t.core_cpus, lambda c: len(t.core_cpus[c]))

    def take_remaining(self) -> None:
        for cpu in self.ordered_cpus():
            self.take((cpu,))
            if self.satisfied():
                return


def _not_enough(count: int, available: int) -> TakeError:
    return TakeError(f"not enough cpus available to satisfy request: requested={count}, available={available}")


def take_packed(topo: CpuTopology, available: Iterable[int], count: int, *, spread: bool = False) -> frozenset[int]:
    """``takeByTopologyNUMAPacked``: ``count`` CPUs out of ``available``; raises ``TakeError``."""
    pool = frozenset(available)
    acc = _Accumulator(topo, pool, count, spread)
    if acc.satisfied():
        return frozenset()
    if acc.needed > len(acc.free):
        raise _not_enough(count, len(pool))
    steps = (acc.take_full_numas, acc.take_full_sockets)
    if not topo.numa_first:
        steps = (acc.take_full_sockets, acc.take_full_numas)
    for step in (*steps, *(() if spread else (acc.take_full_cores,)), acc.take_remaining):
        step()
        if acc.satisfied():
            return frozenset(acc.result)
    raise TakeError("failed to allocate cpus")


def _go_round3(value: float) -> float:
    """Go's ``math.Round(v*1000)/1000`` for the non-negative values it is used on (half away from zero)."""
    return math.floor(value * 1000 + 0.5) / 1000


def _stdev(values: Sequence[int]) -> float:
    mean = _go_round3(sum(values) / len(values))
    return _go_round3(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)))


def _spread_remainder(after: dict[int, int], subset: Sequence[int], remainder: int, group: int) -> dict[int, int]:
    """Hand ``remainder`` CPUs out over ``subset`` in groups, round-robin, as the kubelet counts it."""
    left = dict(after)
    while remainder > 0:
        progress = False
        for numa in subset:
            if remainder == 0:
                break
            if left[numa] < group:
                continue
            left[numa] -= group
            remainder -= group
            progress = True
        if not progress:
            break
    return left


def _balance(
    acc: _Accumulator, numas: list[int], combo: Sequence[int], count: int, group: int
) -> tuple[float, tuple[int, ...]] | None:
    """The best balance score of spreading ``count`` over ``combo`` and the NUMA nodes taking the remainder."""
    free = {n: len(acc.free & acc.topo.numa_cpus[n]) for n in numas}
    if sum(free[n] for n in combo) < count or sum(free[n] // group for n in combo) * group < count:
        return None
    share = (count // len(combo) // group) * group
    if any(free[n] < share for n in combo):
        return None
    after = dict(free)
    for numa in combo:
        after[numa] -= share
    remainder = count - share * len(combo)
    if remainder == 0:
        return _stdev(list(after.values())), ()
    candidates = [n for n in combo if after[n] >= group]
    best: tuple[float, tuple[int, ...]] = (math.inf, ())
    for k in range(len(candidates), 0, -1):
        for subset in itertools.combinations(candidates, k):
            if sum(after[n] for n in subset) < remainder:
                continue
            score = _stdev(list(_spread_remainder(after, subset, remainder, group).values()))
            if score < best[0]:
                best = (score, subset)
    return best


def take_distributed(
    topo: CpuTopology, available: Iterable[int], count: int, group: int, *, spread: bool = False
) -> frozenset[int]:
    """``takeByTopologyNUMADistributed`` with CPU groups of ``group`` (a core's threads under full-pcpus-only)."""
    pool = frozenset(available)
    if group < 1 or count % group:
        return take_packed(topo, pool, count, spread=spread)
    acc = _Accumulator(topo, pool, count, spread)
    if acc.satisfied():
        return frozenset()
    if acc.needed > len(acc.free):
        raise _not_enough(count, len(pool))
    numas = acc.numas()
    groups_total = (len(topo.all) - 1) // group + 1
    groups_per_numa = (groups_total - 1) // len(topo.numa_cpus) + 1
    groups_needed = (count - 1) // group + 1
    low, high = (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, len(numas))
    for k in range(low, high + 1):
        best: tuple[float, tuple[int, ...], tuple[int, ...]] | None = None
        for combo in itertools.combinations(numas, k):
            scored = _balance(acc, numas, combo, count, group)
            if scored is not None and (best is None or scored[0] < best[0]):
                best = (scored[0], scored[1], combo)
                if scored[0] == 0:
                    break
        if best is None or best[0] == math.inf:
            continue
        _, remainder_numas, combo = best
        share = (count // len(combo) // group) * group
        for numa in combo:
            acc.take(take_packed(topo, acc.free & topo.numa_cpus[numa], share, spread=spread))
        remainder = count - share * len(combo)
        while remainder > 0:
            progress = False
            for numa in remainder_numas:
                if remainder == 0:
                    break
                if len(acc.free & topo.numa_cpus[numa]) < group:
                    continue
                acc.take(take_packed(topo, acc.free & topo.numa_cpus[numa], group, spread=spread))
                remainder -= group
                progress = True
            if not progress:
                break
        if acc.needed != 0:
            raise TakeError(f"accounting error, not enough CPUs allocated, remaining: {acc.needed}")
        return frozenset(acc.result)
    return take_packed(topo, pool, count, spread=spread)
