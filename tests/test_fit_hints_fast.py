"""The providers' hints by mask integers (analyze/admission/masks.py) are the kubelet's hints, hint for hint.

The references below are devctl's former implementations, which test every NUMA mask as kubelet v1.32 does
(cpumanager/policy_static.go ``generateCPUTopologyHints``, devicemanager/topology_hints.go
``generateDeviceTopologyHints``, memorymanager/policy_static.go ``calculateHints``); the fast ones must give the
same list (so the same set, with the same preferred flags, in the same order) on many random machines.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from devctl.analyze.admission.cpu_assign import CpuTopology
from devctl.analyze.admission.cpus import ALIGN_BY_SOCKET, generate_cpu_hints
from devctl.analyze.admission.devices import generate_hints
from devctl.analyze.admission.hints import iterate_masks
from devctl.analyze.admission.inputs import DeviceInfo
from devctl.analyze.admission.masks import MaskSpace
from devctl.analyze.admission.memory import memory_hints
from devctl.model.machine import Cpu, MachineTopology, TopologyHint


def _slow_cpu(machine, available, reusable, count, options):  # type: ignore[no-untyped-def]
    topo = CpuTopology(machine)
    nodes = sorted(topo.numa_cpus)
    total = {n: len(topo.numa_cpus[n]) for n in nodes}
    free = dict.fromkeys(nodes, 0)
    for cpu in available:
        if cpu in topo.numa_of:
            free[topo.numa_of[cpu]] += 1
    needs = {topo.numa_of.get(c, -1) for c in reusable}
    narrowest = len(nodes)
    masks = []
    for mask in iterate_masks(nodes):
        if len(mask) < narrowest and sum(total[n] for n in mask) >= count:
            narrowest = len(mask)
        if needs <= mask and len(reusable) + sum(free[n] for n in mask) >= count:
            masks.append(mask)
    by_socket = options.get(ALIGN_BY_SOCKET) == "true"
    per = len(topo.numa_cpus) // len(topo.socket_cpus) if topo.socket_cpus else 0

    def aligned(mask):  # type: ignore[no-untyped-def]
        return per > 0 and len(topo.sockets_of_numas(mask)) == (narrowest + per - 1) // per

    return [TopologyHint(m, len(m) == narrowest or (by_socket and aligned(m))) for m in masks]


def _slow_devices(devices, nodes, available, reusable, request):  # type: ignore[no-untyped-def]
    by_id = {d.id: d for d in devices}
    every = Counter(d.numa_nodes for d in devices if d.numa_nodes)
    free = Counter(by_id[i].numa_nodes for i in available if i in by_id and by_id[i].numa_nodes)
    narrowest, found = len(nodes), []
    for mask in iterate_masks(nodes):
        if sum(n for g, n in every.items() if g & mask) >= request and len(mask) < narrowest:
            narrowest = len(mask)
        placed = [by_id[i].numa_nodes for i in reusable if i in by_id and by_id[i].numa_nodes]
        if all(g & mask for g in placed) and len(placed) + sum(n for g, n in free.items() if g & mask) >= request:
            found.append(mask)
    return [TopologyHint(m, len(m) == narrowest) for m in found]


def _slow_memory(nodes, free, capacity, requests):  # type: ignore[no-untyped-def]
    def holds(m, table):  # type: ignore[no-untyped-def]
        return all(sum(table.get(n, {}).get(r, 0) for n in m) >= a for r, a in requests.items())

    masks = list(iterate_masks(nodes))
    narrowest = min((len(m) for m in masks if holds(m, capacity)), default=len(nodes))
    return [TopologyHint(m, len(m) == narrowest) for m in masks if holds(m, free)]


def _machine(rng: random.Random) -> MachineTopology:
    """1-6 NUMA nodes (ids with gaps), 1-3 sockets, 0-5 CPUs each, HT or not."""
    nodes = sorted(rng.sample(range(8), rng.randint(1, 6)))
    sockets = rng.randint(1, 3)
    cpus, cid = [], 0
    for i, node in enumerate(nodes):
        for _ in range(rng.randint(0 if i else 1, 5)):
            cpus.append(Cpu(cid, cid // rng.choice((1, 2)), i * sockets // len(nodes), node))
            cid += 1
    return MachineTopology(tuple(cpus), None, {})


@pytest.mark.parametrize("seed", range(4))
def test_cpu_hints_equal_the_every_mask_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        machine = _machine(rng)
        ids = [c.id for c in machine.cpus]
        available = frozenset(rng.sample(ids, rng.randint(0, len(ids))))
        reusable = frozenset(rng.sample(ids, rng.randint(0, min(2, len(ids)))))
        if rng.random() < 0.1:
            reusable |= {999}  # a CPU the machine does not have: no mask holds it
        count = rng.randint(1, len(ids) + 1)
        options = {ALIGN_BY_SOCKET: "true"} if rng.random() < 0.5 else {}
        expected = _slow_cpu(machine, available, reusable, count, options)
        assert generate_cpu_hints(machine, available, reusable, count, options) == expected


@pytest.mark.parametrize("seed", range(4))
def test_device_hints_equal_the_every_mask_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        nodes = sorted(rng.sample(range(8), rng.randint(1, 6)))
        groups = [frozenset(), frozenset({9})] + [
            frozenset(rng.sample(nodes, rng.randint(1, min(2, len(nodes))))) for _ in range(3)
        ]
        groups += [frozenset({n}) for n in nodes]
        devices = tuple(DeviceInfo(f"d{i}", rng.random() < 0.8, rng.choice(groups)) for i in range(rng.randint(1, 12)))
        ids = [d.id for d in devices] + ["gone"]
        available = frozenset(rng.sample(ids, rng.randint(0, len(ids))))
        reusable = frozenset(rng.sample(ids, rng.randint(0, 2)))
        request = rng.randint(1, len(devices) + 1)
        expected = _slow_devices(devices, nodes, available, reusable, request)
        assert generate_hints(devices, nodes, available, reusable, request) == expected
        # one shared space gives the same lists again (its hint values are reused, not changed)
        space = MaskSpace(nodes)
        generate_hints(devices, nodes, available, frozenset(), 1, space=space)
        assert generate_hints(devices, nodes, available, reusable, request, space=space) == expected


@pytest.mark.parametrize("seed", range(4))
def test_memory_hints_equal_the_every_mask_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        nodes = sorted(rng.sample(range(8), rng.randint(1, 6)))
        names = ("memory", "hugepages-2Mi")
        capacity = {n: {r: rng.randint(0, 8) for r in names} for n in nodes if rng.random() < 0.9}
        free = {n: {r: rng.randint(0, v) for r, v in t.items()} for n, t in capacity.items()}
        requests = {r: rng.randint(1, 12) for r in rng.sample(names, rng.randint(1, 2))}
        expected = _slow_memory(nodes, free, capacity, requests)
        assert memory_hints(nodes, free, capacity, requests) == expected


def test_sixteen_nodes_give_every_holding_mask() -> None:
    """At 16 nodes a small request is held by every one of the 65,535 masks; the preferred are the 16 singles."""
    cpus = tuple(Cpu(n * 4 + i, n * 4 + i, n // 8, n) for n in range(16) for i in range(4))
    machine = MachineTopology(cpus, None, {})
    hints = generate_cpu_hints(machine, frozenset(c.id for c in cpus), frozenset(), 2, {})
    assert len(hints) == 65535
    assert {h.numa_nodes for h in hints if h.preferred} == {frozenset({n}) for n in range(16)}
