"""The topology manager's merge (devctl.analyze.admission.hints), case by case.

Cases follow kubelet v1.32 pkg/kubelet/cm/topologymanager: policy_test.go (commonPolicyMergeTestCases),
policy_best_effort_test.go, policy_restricted_test.go, policy_single_numa_node_test.go, policy_options_test.go and
bitmask/bitmask_test.go, written as our own data; each names the upstream case it follows.
"""

from __future__ import annotations

import pytest

from devctl.analyze.admission.hints import (
    NumaInfo,
    PolicyError,
    check_policy,
    is_narrower,
    iterate_masks,
    merge,
    merge_permutation,
)
from devctl.model.machine import TopologyHint


def h(nodes: tuple[int, ...] | None, preferred: bool) -> TopologyHint:
    return TopologyHint(None if nodes is None else frozenset(nodes), preferred)


TWO = NumaInfo((0, 1))
FOUR = NumaInfo((0, 1, 2, 3))

# (upstream case name, providers, expected best for best-effort/restricted, expected for single-numa-node)
CASES = [
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], h((0, 1), True), h(None, True)),
    (
        "HintProvider returns -nil map[string][]TopologyHint from provider",
        [{"r": None}],
        h((0, 1), True),
        h(None, True),
    ),
    (
        "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
        [{"r": []}],
        h((0, 1), False),
        h(None, False),
    ),
    (
        "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
        [{"r": [h(None, True)]}],
        h((0, 1), True),
        h(None, True),
    ),
    (
        "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
        [{"r": [h(None, False)]}],
        h((0, 1), False),
        h(None, False),
    ),
    (
        "Two providers, 1 hint each, same mask, both preferred 1/2",
        [{"a": [h((0,), True)]}, {"b": [h((0,), True)]}],
        h((0,), True),
        h((0,), True),
    ),
    (
        "Two providers, 1 hint each, same mask, both preferred 2/2",
        [{"a": [h((1,), True)]}, {"b": [h((1,), True)]}],
        h((1,), True),
        h((1,), True),
    ),
    (
        "Two providers, 1 hint each, no common mask",
        [{"a": [h((0,), True)]}, {"b": [h((1,), True)]}],
        h((0, 1), False),
        h(None, False),
    ),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
        [{"a": [h((0,), True)]}, {"b": [h((0,), False)]}],
        h((0,), False),
        h(None, False),
    ),
    (
        "Two providers, 1 no hints, 1 single hint preferred 1/2",
        [{}, {"b": [h((0,), True)]}],
        h((0,), True),
        h((0,), True),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
        [{"a": [h((0,), True), h((1,), True)]}, {"b": [h((0,), True)]}],
        h((0,), True),
        h((0,), True),
    ),
    (
        "Two providers, both with 2 hints, matching narrower preferred hint from both",
        [{"a": [h((0,), True), h((1,), True)]}, {"b": [h((0,), True), h((1,), True), h((0, 1), False)]}],
        h((0,), True),
        h((0,), True),
    ),
    (
        "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
        [{"a": [h((1,), True), h((0, 1), True)]}, {"b": [h((0,), True), h((1,), True), h((0, 1), False)]}],
        h((1,), True),
        h((1,), True),
    ),
    (
        "Multiple resources, same provider",
        [{"a": [h((1,), True), h((0, 1), False)], "b": [h((1,), True)]}],
        h((1,), True),
        h((1,), True),
    ),
    (
        "Two providers, wide preferred hint only: single-numa-node drops it",
        [{"a": [h((0, 1), True)]}, {"b": [h((0, 1), True)]}],
        h((0, 1), True),
        h(None, False),
    ),
]


@pytest.mark.parametrize(("name", "providers", "expected", "single"), CASES, ids=[c[0] for c in CASES])
def test_merge_two_numa_nodes(name, providers, expected, single):
    best, admit = merge("best-effort", providers, TWO)
    assert (best, admit) == (expected, True)
    best, admit = merge("restricted", providers, TWO)
    assert (best, admit) == (expected, expected.preferred)
    best, admit = merge("single-numa-node", providers, TWO)
    assert (best, admit) == (single, single.preferred)


def test_none_policy_admits_with_no_affinity():
    """policy_none_test.go TestPolicyNoneMerge: any hints, {nil, true}, admitted."""
    assert merge("none", [{"a": [h((0,), False)]}], TWO) == (h(None, True), True)


def test_merged_preferred_only_when_masks_equal():
    """PR #108052 (policy_test.go, "Two providers, 1 hint each, 1 wider mask, both preferred"): 0111 & 0011."""
    merged = merge_permutation(FOUR.default, [h((0, 1, 2), True), h((0, 1), True)])
    assert merged == h((0, 1), False)
    best, admit = merge("restricted", [{"a": [h((0, 1), True)]}, {"b": [h((0, 2), True)]}], FOUR)
    assert best == h((0,), False) and admit is False


def test_non_preferred_best_is_closest_to_widest_narrowest():
    """policy_test.go (PR #108154) "bestNonPreferredAffinityCount": among non-preferred merges, the one as wide
    as the widest provider's narrowest hint wins over a narrower one."""
    providers = [
        {"a": [h((0, 1), True), h((0, 1, 2, 3), False)]},
        {"b": [h((0,), False), h((0, 1, 2), False), h((2, 3), True)]},
    ]
    best, admit = merge("best-effort", providers, FOUR)
    assert best == h((0, 1), False) and admit


def test_prefer_closest_numa_nodes_uses_distances():
    """policy_options_test.go / numa_info_test.go TestClosest: equal width, lower mean distance wins."""
    info = NumaInfo((0, 1, 2, 3), {0: (10, 21, 11, 21), 1: (21, 10, 21, 11), 2: (11, 21, 10, 21), 3: (21, 11, 21, 10)})
    providers = [{"a": [h((0, 1), True), h((0, 2), True)]}]
    assert merge("best-effort", providers, info)[0] == h((0, 1), True)
    closest = merge("best-effort", providers, info, {"prefer-closest-numa-nodes": "true"})[0]
    assert closest == h((0, 2), True)


@pytest.mark.parametrize(
    ("policy", "nodes", "options", "ok"),
    [
        ("best-effort", 8, {}, True),
        ("best-effort", 9, {}, False),  # policy_options_test.go: more than 8 nodes need the option
        ("restricted", 9, {"max-allowable-numa-nodes": "9"}, True),
        ("none", 16, {}, True),
        ("bogus", 2, {}, False),
        ("restricted", 2, {"max-allowable-numa-nodes": "x"}, False),
    ],
)
def test_check_policy(policy, nodes, options, ok):
    if ok:
        check_policy(policy, nodes, options)
    else:
        with pytest.raises(PolicyError):
            check_policy(policy, nodes, options)


@pytest.mark.parametrize(
    ("a", "b", "narrower"),
    [((0,), (1,), True), ((1,), (0,), False), ((0,), (0, 1), True), ((0, 1), (2,), False), ((0, 2), (1, 2), True)],
)
def test_is_narrower(a, b, narrower):
    """bitmask_test.go TestIsNarrowerThan: fewer bits, then the lower value."""
    assert is_narrower(frozenset(a), frozenset(b)) is narrower


def test_iterate_masks_order():
    """bitmask_test.go TestIterateBitMasks: 2^n - 1 masks, one node first."""
    masks = list(iterate_masks([0, 1, 2]))
    assert [sorted(m) for m in masks] == [[0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]]
