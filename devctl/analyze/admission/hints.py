"""The topology manager's merge of hints, as kubelet v1.32 ``pkg/kubelet/cm/topologymanager`` decides it.

NUMA masks are frozensets of node ids; ``None`` is the kubelet's nil mask ("any node"). The order of masks is the
kubelet's bitmask order: fewer nodes first, then the smaller integer value (``IsNarrowerThan``/``IsLessThan``).

Followed: ``filterProvidersHints`` (a provider or resource without preference is ``{nil, preferred}``, one with
no possible affinity ``{nil, not preferred}``), ``mergePermutation`` (AND of the masks; preferred only when every
hint is preferred AND every non-nil mask is the same, PR #108052), ``HintMerger.compare`` (preferred first, then
narrowest; among non-preferred ones the width closest to, not above, the widest of the providers' narrowest
hints), ``prefer-closest-numa-nodes`` (``NUMAInfo.Closest``: mean distance, not for single-numa-node),
``max-allowable-numa-nodes`` (more than 8 NUMA nodes need it; the kubelet refuses to start otherwise) and the
four policies' admit rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from devctl.base.errors import DevctlError
from devctl.model.machine import TopologyHint

NONE = "none"
BEST_EFFORT = "best-effort"
RESTRICTED = "restricted"
SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)

PREFER_CLOSEST = "prefer-closest-numa-nodes"
MAX_ALLOWABLE = "max-allowable-numa-nodes"
DEFAULT_MAX_NUMA_NODES = 8

# One provider's answer: resource -> hints (None: no preference for that resource); None or {}: no preference.
ProviderHints = Mapping[str, "Sequence[TopologyHint] | None"] | None


class PolicyError(DevctlError, ValueError):
    """A topology manager setting the kubelet refuses at start (unknown policy, too many NUMA nodes)."""


def mask_value(mask: frozenset[int]) -> int:
    """The mask as the kubelet's bitmask integer."""
    return sum(1 << n for n in mask)


def is_narrower(a: frozenset[int], b: frozenset[int]) -> bool:
    """``IsNarrowerThan``: fewer nodes, or as many with the lower integer value."""
    if len(a) == len(b):
        return mask_value(a) < mask_value(b)
    return len(a) < len(b)


def iterate_masks(nodes: Sequence[int]) -> Iterator[frozenset[int]]:
    """``bitmask.IterateBitMasks``: every non-empty subset, one node first, then two, in the nodes' order."""
    ordered = sorted(nodes)
    for size in range(1, len(ordered) + 1):
        for combo in itertools.combinations(ordered, size):
            yield frozenset(combo)


@dataclass(frozen=True)
class NumaInfo:
    """The machine's NUMA nodes and distances (``NUMAInfo``); distances by node, as sysfs lists them."""

    nodes: tuple[int, ...]
    distances: Mapping[int, tuple[int, ...]] | None = None

    @property
    def default(self) -> frozenset[int]:
        return frozenset(self.nodes)

    def average_distance(self, mask: frozenset[int]) -> float | None:
        """``CalculateAverageFor``; ``None`` when sysfs gave no distances for a node of the mask."""
        if not mask or self.distances is None:
            return None
        order = sorted(self.nodes)
        total = 0
        for a in mask:
            row = self.distances.get(a)
            if row is None:
                return None
            for b in mask:
                index = order.index(b) if b in order else -1
                if index < 0 or index >= len(row):
                    return None
                total += row[index]
        return total / (len(mask) * len(mask))

    def narrowest(self, a: frozenset[int], b: frozenset[int]) -> frozenset[int]:
        return a if is_narrower(a, b) else b

    def closest(self, a: frozenset[int], b: frozenset[int]) -> frozenset[int]:
        """``NUMAInfo.Closest``: the narrower; at equal width the lower mean distance, then the lower value."""
        if len(a) != len(b):
            return self.narrowest(a, b)
        da, db = self.average_distance(a), self.average_distance(b)
        if da is None or db is None or da == db:
            return a if mask_value(a) < mask_value(b) else b
        return a if da < db else b


def check_policy(policy: str, nodes: int, options: Mapping[str, str]) -> None:
    """What ``NewManager`` refuses: an unknown policy, more NUMA nodes than ``max-allowable-numa-nodes``."""
    if policy not in POLICIES:
        raise PolicyError(f"unknown policy: {policy!r}")
    allowed = DEFAULT_MAX_NUMA_NODES
    if MAX_ALLOWABLE in options:
        try:
            allowed = int(options[MAX_ALLOWABLE])
        except ValueError:
            raise PolicyError(f"bad value for option {MAX_ALLOWABLE!r}: {options[MAX_ALLOWABLE]!r}") from None
    if policy != NONE and nodes > allowed:
        raise PolicyError(f"unsupported on machines with more than {allowed} NUMA Nodes")


def filter_provider_hints(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """``filterProvidersHints``: one list of hints per provider and resource."""
    out: list[list[TopologyHint]] = []
    for hints in providers:
        if not hints:
            out.append([TopologyHint(None, True)])
            continue
        for resource in sorted(hints):
            value = hints[resource]
            if value is None:
                out.append([TopologyHint(None, True)])
            elif not value:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(value))
    return out


def merge_permutation(default: frozenset[int], permutation: Sequence[TopologyHint]) -> TopologyHint:
    """``mergePermutation``: AND of the masks; preferred when all are, and all non-nil masks are equal."""
    preferred = True
    merged = default
    first: frozenset[int] | None = None
    for hint in permutation:
        if hint.numa_nodes is not None:
            if first is None:
                first = hint.numa_nodes
            elif hint.numa_nodes != first:
                preferred = False
            merged = merged & hint.numa_nodes
        if not hint.preferred:
            preferred = False
    return TopologyHint(merged, preferred)


def _narrowest_count(hints: Sequence[TopologyHint]) -> int | None:
    """The width of the narrowest non-nil mask (``IsNarrowerThan`` ranks by width first, so only width counts)."""
    return min((len(h.numa_nodes) for h in hints if h.numa_nodes is not None), default=None)


@dataclass(frozen=True)
class _Merger:
    info: NumaInfo
    closest: bool
    best_non_preferred: int

    def masks(self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint:
        a, b = current.numa_nodes or frozenset(), candidate.numa_nodes or frozenset()
        if a == b:
            return current
        best = self.info.closest(a, b) if self.closest else self.info.narrowest(a, b)
        return current if best == a else candidate

    def compare(self, current: TopologyHint | None, candidate: TopologyHint) -> TopologyHint | None:
        """``HintMerger.compare``, case by case as upstream numbers them."""
        cand = len(candidate.numa_nodes or ())
        if cand == 0:
            return current
        if current is None:
            return candidate
        if current.preferred != candidate.preferred:
            return candidate if candidate.preferred else current
        if current.preferred:
            return self.masks(current, candidate)
        cur, best = len(current.numa_nodes or ()), self.best_non_preferred
        if cur > best:  # case 1
            return self.masks(current, candidate)
        if cur == best:  # case 2
            return self.masks(current, candidate) if cand == best else current
        if cand > best:  # case 3a
            return current
        if cand == best:  # case 3b
            return candidate
        if cand != cur:  # cases 3ca, 3cb
            return candidate if cand > cur else current
        return self.masks(current, candidate)  # case 3cc


def _best_preferred(merger: _Merger, filtered: Sequence[Sequence[TopologyHint]]) -> TopologyHint | None:
    """The best preferred merge without the product: a permutation merges preferred exactly when every hint in it
    is preferred and its non-nil masks are one mask M (or all are nil: the default). So the preferred merges are
    the masks M preferred by every provider that has no preferred nil hint, and the compare among preferred
    merges is a total order (``_Merger.masks``). The product is only walked when no preferred merge exists."""
    sets = [{h.numa_nodes for h in hints if h.preferred and h.numa_nodes is not None} for hints in filtered]
    free = [any(h.preferred and h.numa_nodes is None for h in hints) for hints in filtered]
    candidates: set[frozenset[int]] = set().union(*sets) if sets else set()
    for masks, any_ok in zip(sets, free, strict=True):
        if not any_ok:
            candidates &= masks
    if all(free):
        candidates.add(merger.info.default)
    best: TopologyHint | None = None
    for mask in sorted(candidates, key=lambda m: (len(m), mask_value(m))):
        best = merger.compare(best, TopologyHint(mask, True))
    return best


def merge_filtered(
    info: NumaInfo, filtered: Sequence[Sequence[TopologyHint]], policy: str, options: Mapping[str, str]
) -> TopologyHint:
    """``HintMerger.Merge`` over every permutation; ``{default, not preferred}`` when none gives a mask."""
    counts = [c for c in (_narrowest_count(h) for h in filtered) if c is not None]
    closest = policy != SINGLE_NUMA_NODE and options.get(PREFER_CLOSEST, "false").strip().lower() in ("1", "t", "true")
    merger = _Merger(info, closest, max(counts, default=0))
    best: TopologyHint | None = _best_preferred(merger, filtered)
    if best is not None:  # a preferred merge beats every other: the same answer as the whole product gives
        return best
    for permutation in itertools.product(*filtered):
        best = merger.compare(best, merge_permutation(info.default, permutation))
    return best if best is not None else TopologyHint(info.default, False)


def merge(
    policy: str, providers: Sequence[ProviderHints], info: NumaInfo, options: Mapping[str, str] | None = None
) -> tuple[TopologyHint, bool]:
    """The policy's ``Merge``: the best hint and whether the pod is admitted.

    ``none`` admits with no affinity; ``best-effort`` admits whatever is best; ``restricted`` only a preferred
    best; ``single-numa-node`` merges single-node and "any" preferred hints only, gives the nil mask for "all
    nodes", and admits only a preferred best.
    """
    opts = options or {}
    if policy == NONE:
        return TopologyHint(None, True), True
    filtered = filter_provider_hints(providers)
    if policy == SINGLE_NUMA_NODE:
        filtered = [
            [h for h in hints if h.preferred and (h.numa_nodes is None or len(h.numa_nodes) == 1)] for hints in filtered
        ]
    best = merge_filtered(info, filtered, policy, opts)
    if policy == SINGLE_NUMA_NODE:
        if best.numa_nodes == info.default:
            best = TopologyHint(None, best.preferred)
        return best, best.preferred
    if policy == RESTRICTED:
        return best, best.preferred
    if policy == BEST_EFFORT:
        return best, True
    raise PolicyError(f"unknown policy: {policy!r}")
