"""GetPreferredAllocation's choice: fewest NUMA nodes, must-include honoured, healthy only, deterministic."""

from __future__ import annotations

from devctl.lab.plugin.preferred import preferred_allocation
from devctl.model import UNHEALTHY, Device


def gpus(*numa: int | tuple[int, ...] | None) -> list[Device]:
    out = []
    for i, n in enumerate(numa):
        nodes = () if n is None else (n,) if isinstance(n, int) else n
        out.append(Device(f"g{i}", numa_nodes=nodes))
    return out


def ids(devices: list[Device]) -> list[str]:
    return [d.id for d in devices]


def test_stays_on_one_numa_node_when_it_can() -> None:
    devices = gpus(0, 1, 0, 1, 1)
    assert preferred_allocation(devices, ids(devices), [], 2) == ["g0", "g2"]  # both nodes fit; NUMA 0 fits tighter
    assert preferred_allocation(devices, ids(devices), [], 3) == ["g1", "g3", "g4"]  # only NUMA 1 holds three


def test_tightest_fit_keeps_bigger_groups_whole() -> None:
    devices = gpus(0, 0, 0, 0, 1, 1)
    assert preferred_allocation(devices, ids(devices), [], 2) == ["g4", "g5"]


def test_spans_two_nodes_only_when_it_must() -> None:
    devices = gpus(0, 0, 1, 1)
    chosen = preferred_allocation(devices, ids(devices), [], 3)
    assert len(chosen) == 3 and set(chosen) <= set(ids(devices))


def test_must_include_is_kept_and_pulls_toward_its_node() -> None:
    devices = gpus(0, 0, 0, 1, 1, 1)
    # g3 is on NUMA 1, so the rest comes from NUMA 1 although NUMA 0 is listed first
    assert preferred_allocation(devices, ids(devices), ["g3"], 3) == ["g3", "g4", "g5"]
    # a must-include on each node: prefer the rest on those nodes, must-include first in the answer
    assert preferred_allocation(devices, ids(devices), ["g5", "g0"], 3) == ["g5", "g0", "g1"]


def test_must_include_fills_on_its_own_node_first_when_spanning() -> None:
    devices = gpus(0, 0, 1, 1, 1)
    # g0 on NUMA 0 with one more there; the request needs four, so NUMA 1 adds two
    chosen = preferred_allocation(devices, ids(devices), ["g0"], 4)
    assert chosen[0] == "g0" and "g1" in chosen and len(chosen) == 4


def test_only_healthy_available_devices() -> None:
    devices = gpus(0, 0, 0, 1, 1)
    devices[0] = Device("g0", health=UNHEALTHY, numa_nodes=(0,))
    # g0 is unhealthy and g2 not offered: NUMA 0 has only g1, so NUMA 1 wins
    assert preferred_allocation(devices, ["g0", "g1", "g3", "g4"], [], 2) == ["g3", "g4"]
    # IDs the plugin does not know are never chosen
    assert preferred_allocation(devices, ["zz", "g1"], [], 2) == ["g1"]


def test_devices_without_topology() -> None:
    devices = gpus(None, None, None)
    assert preferred_allocation(devices, ids(devices), [], 2) == ["g0", "g1"]
    # mixed: located devices come before ones of unknown locality
    mixed = gpus(None, 0, None, 0)
    assert preferred_allocation(mixed, ids(mixed), [], 2) == ["g1", "g3"]
    assert preferred_allocation(mixed, ids(mixed), [], 3) == ["g0", "g1", "g3"]


def test_device_on_two_numa_nodes_counts_both() -> None:
    devices = [Device("a", numa_nodes=(0, 1)), Device("b", numa_nodes=(0,)), Device("c", numa_nodes=(0,))]
    assert preferred_allocation(devices, ["a", "b", "c"], [], 2) == ["b", "c"]


def test_short_supply_and_edge_sizes() -> None:
    devices = gpus(0, 1)
    assert preferred_allocation(devices, ids(devices), [], 5) == ["g0", "g1"]  # all there is; kubelet fills the rest
    assert preferred_allocation(devices, ids(devices), ["g1"], 1) == ["g1"]
    assert preferred_allocation(devices, ids(devices), [], 0) == []


def test_deterministic_whatever_the_request_order() -> None:
    devices = gpus(1, 0, 1, 0, 1, 0)
    forward = preferred_allocation(devices, ids(devices), [], 3)
    backward = preferred_allocation(devices, list(reversed(ids(devices))), [], 3)
    assert forward == backward == ["g1", "g3", "g5"]
