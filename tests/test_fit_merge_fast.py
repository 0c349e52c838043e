"""hints.merge_filtered's shortcut for preferred merges gives what the whole product of permutations gives.

The kubelet (topologymanager/policy.go ``HintMerger.Merge``) folds ``compare`` over every permutation; devctl
finds the best preferred merge from the providers' preferred masks instead (issue 31's speed bar: 16 NUMA nodes).
Random hint lists over 4 nodes, with and without distances and prefer-closest-numa-nodes, checked against the fold.
"""

from __future__ import annotations

import itertools
import random

import pytest

from devctl.analyze.admission.hints import (
    NumaInfo,
    _Merger,
    _narrowest_count,
    iterate_masks,
    merge_filtered,
    merge_permutation,
)
from devctl.model.machine import TopologyHint

NODES = (0, 1, 2, 3)
DISTANCES = {0: (10, 11, 20, 21), 1: (11, 10, 21, 20), 2: (20, 21, 10, 11), 3: (21, 20, 11, 10)}


def _fold(info: NumaInfo, filtered: list[list[TopologyHint]], closest: bool) -> TopologyHint:
    counts = [c for c in (_narrowest_count(h) for h in filtered) if c is not None]
    merger = _Merger(info, closest, max(counts, default=0))
    best = None
    for permutation in itertools.product(*filtered):
        best = merger.compare(best, merge_permutation(info.default, permutation))
    return best if best is not None else TopologyHint(info.default, False)


def _hints(rng: random.Random) -> list[TopologyHint]:
    masks = list(iterate_masks(NODES))
    picked = [TopologyHint(m, rng.random() < 0.4) for m in rng.sample(masks, rng.randint(0, 5))]
    if rng.random() < 0.15:
        picked.append(TopologyHint(None, rng.random() < 0.5))
    return picked


@pytest.mark.parametrize("seed", range(6))
def test_the_shortcut_agrees_with_every_permutation(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        filtered = [_hints(rng) for _ in range(rng.randint(1, 3))]
        closest = rng.random() < 0.5
        info = NumaInfo(NODES, DISTANCES if rng.random() < 0.5 else None)
        policy, options = "best-effort", {"prefer-closest-numa-nodes": "true" if closest else "false"}
        assert merge_filtered(info, filtered, policy, options) == _fold(info, filtered, closest), filtered
