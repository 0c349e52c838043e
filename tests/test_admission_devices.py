"""The device manager's hints and allocation (devctl.analyze.admission.devices).

Hint cases follow kubelet v1.32 pkg/kubelet/cm/devicemanager/topology_hints_test.go (TestGetTopologyHints,
TestTopologyAlignedAllocation), written as our own data; each names the upstream case it follows.
"""

from __future__ import annotations

import pytest

from devctl.analyze.admission.devices import DeviceAllocationError, allocate_devices, resource_hints
from devctl.analyze.admission.inputs import DeviceInfo
from devctl.model.machine import TopologyHint

NODES = (0, 1)


def d(name: str, *nodes: int, healthy: bool = True) -> DeviceInfo:
    return DeviceInfo(name, healthy, frozenset(nodes))


def h(nodes: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(frozenset(nodes), preferred)


FOUR = (d("Dev1", 0), d("Dev2", 0), d("Dev3", 1), d("Dev4", 1))

HINT_CASES = [
    ("Single Request, no alignment", (d("Dev1"), d("Dev2")), frozenset(), 1, frozenset(), None),
    (
        "Single Request, only one with alignment",
        (d("Dev1"), d("Dev2", 1)),
        frozenset(),
        1,
        frozenset(),
        [h((1,), True), h((0, 1), False)],
    ),
    (
        "Single Request, one device per socket",
        (d("Dev1", 0), d("Dev2", 1)),
        frozenset(),
        1,
        frozenset(),
        [h((0,), True), h((1,), True), h((0, 1), False)],
    ),
    (
        "Request for 2, one device per socket",
        (d("Dev1", 0), d("Dev2", 1)),
        frozenset(),
        2,
        frozenset(),
        [h((0, 1), True)],
    ),
    (
        "Request for 2, 2 devices per socket",
        FOUR,
        frozenset(),
        2,
        frozenset(),
        [h((0,), True), h((1,), True), h((0, 1), False)],
    ),
    (
        "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
        FOUR,
        frozenset({"Dev1", "Dev3"}),
        2,
        frozenset(),
        [h((0, 1), False)],
    ),
    ("Single device type, more requested than available", FOUR, frozenset(), 6, frozenset(), []),
    (
        "Single device type, all already allocated to container",
        FOUR,
        frozenset({"Dev1", "Dev2"}),
        2,
        frozenset({"Dev1", "Dev2"}),
        [h((0,), True), h((0, 1), False)],
    ),
    (
        "Single device type, less already allocated to container than requested",
        FOUR,
        frozenset({"Dev1"}),
        2,
        frozenset({"Dev1"}),
        [],
    ),
    (
        "Single device type, more already allocated to container than requested",
        FOUR,
        frozenset({"Dev1", "Dev2"}),
        1,
        frozenset({"Dev1", "Dev2"}),
        [],
    ),
    (
        "all devices unhealthy (our case): no hint can be satisfied",
        (d("Dev1", 0, healthy=False),),
        frozenset(),
        1,
        frozenset(),
        [],
    ),
    (
        "unhealthy devices still count for the preferred width (allDevices)",
        (d("Dev1", 0, healthy=False), d("Dev2", 0, healthy=False), d("Dev3", 0), d("Dev4", 1)),
        frozenset(),
        2,
        frozenset(),
        [h((0, 1), False)],
    ),
    (
        "a device on two NUMA nodes counts toward either",
        (d("Dev1", 0, 1), d("Dev2", 1)),
        frozenset(),
        2,
        frozenset(),
        [h((1,), True), h((0, 1), False)],
    ),
]


@pytest.mark.parametrize(
    ("name", "devices", "allocated", "count", "held", "expected"), HINT_CASES, ids=[c[0] for c in HINT_CASES]
)
def test_hints(name, devices, allocated, count, held, expected):
    assert resource_hints(devices, NODES, allocated, count, held=held) == expected


def test_reusable_devices_must_lie_in_the_mask():
    """topology_hints_test.go "Single device type, reusable devices": a mask without the reusable one is out."""
    got = resource_hints(FOUR, NODES, frozenset({"Dev1", "Dev3", "Dev4"}), 2, reusable=frozenset({"Dev1"}))
    assert got == [h((0,), True), h((0, 1), False)]


def test_aligned_allocation_decided_when_all_aligned_are_needed():
    """TestTopologyAlignedAllocation "Single Request, one device per socket, affinity 1": the one on node 1."""
    got = allocate_devices("r", (d("Dev1", 0), d("Dev2", 1)), frozenset(), 1, frozenset({1}))
    assert got.ids == ("Dev2",) and got.per_node == {1: 1} and not got.open


def test_random_pick_among_one_node_is_open_but_counts_are_known():
    got = allocate_devices("r", FOUR, frozenset(), 1, frozenset({0}))
    assert got.ids is None and got.per_node == {0: 1} and got.candidates == ("Dev1", "Dev2")


def test_random_pick_across_nodes_leaves_counts_open():
    got = allocate_devices("r", FOUR, frozenset(), 2, frozenset({0, 1}))
    assert got.ids is None and got.per_node is None and got.numa_nodes == (0, 1)


def test_preferred_allocation_decides_the_ids():
    """TestTopologyAlignedAllocation with getPreferredAllocationFunc: the plugin's answer inside the aligned set."""
    got = allocate_devices("r", FOUR, frozenset(), 1, frozenset({0}), preferred=("Dev3", "Dev2"))
    # Dev3 is ranked first but not aligned: the kubelet intersects with the aligned set; the plugin here answered
    # with its first ID in the pool it was given (the aligned devices), Dev2.
    assert got.ids == ("Dev2",)


def test_aligned_first_then_the_rest():
    """TestTopologyAlignedAllocation "Request for 3, 2 devices on one socket": both aligned, one more elsewhere."""
    got = allocate_devices("r", (d("Dev1", 0), d("Dev2", 0), d("Dev3", 1)), frozenset(), 3, frozenset({0}))
    assert got.ids == ("Dev1", "Dev2", "Dev3") and got.per_node == {0: 2, 1: 1}


@pytest.mark.parametrize(
    ("devices", "allocated", "count", "held", "message"),
    [
        (
            (d("G0", 0, healthy=False),),
            frozenset(),
            1,
            frozenset(),
            "no healthy devices present; cannot allocate unhealthy devices r",
        ),
        (
            (d("G0", 0), d("G1", 0)),
            frozenset({"G0"}),
            2,
            frozenset(),
            "requested number of devices unavailable for r. Requested: 2, Available: 1",
        ),
        (
            (d("G0", 0, healthy=False), d("G1", 0)),
            frozenset({"G0"}),
            1,
            frozenset({"G0"}),
            "previously allocated devices are no longer healthy; cannot allocate unhealthy devices r",
        ),
    ],
)
def test_allocation_failures_in_the_kubelets_words(devices, allocated, count, held, message):
    with pytest.raises(DeviceAllocationError) as err:
        allocate_devices("r", devices, allocated, count, None, held=held)
    assert err.value.message == message
