"""The static CPU policy's hints and CPU assignment (devctl.analyze.admission.cpus / cpu_assign, issue 31).

Rows follow kubelet v1.32's ``pkg/kubelet/cm/cpumanager/cpu_assignment_test.go`` and ``policy_static_test.go``
(named per row), on our own descriptions of the upstream test machines; rows marked "ours" are our own data.
"""

from __future__ import annotations

import time

import pytest

from devctl.analyze.admission import cpu_assign, cpus
from devctl.analyze.admission.cpus import CpuAllocationError
from devctl.base.units import parse_cpulist
from devctl.model import CpuAssignment
from devctl.model.machine import ContainerRequest, Cpu, MachineTopology, TopologyHint


def machine(layout: dict[int, tuple[int, int, int]]) -> MachineTopology:
    """CPU id -> (core, socket, numa)."""
    return MachineTopology(cpus=tuple(Cpu(i, *layout[i]) for i in sorted(layout)))


# topoSingleSocketHT: 1 socket, 4 cores, 2 threads each (CPU i and i+4)
SINGLE_HT = machine({i: (i % 4, 0, 0) for i in range(8)})
# topoDualSocketHT: 2 sockets = 2 NUMA nodes, 6 cores; even CPUs on socket 0, odd on socket 1; siblings i, i+6
DUAL_HT = machine({i: (i % 6, i % 2, i % 2) for i in range(12)})
# topoDualSocketNoHT: 8 cores, CPUs 0-3 on socket 0, 4-7 on socket 1
DUAL_NOHT = machine({i: (i, i // 4, i // 4) for i in range(8)})
# topoTripleSocketHT: sibling pairs; CPUs 0-5 socket/NUMA 1, 6-11 socket/NUMA 0, 12-17 socket/NUMA 2
TRIPLE_HT = machine({i: (i - i % 2, {0: 1, 1: 0, 2: 2}[i // 6], {0: 1, 1: 0, 2: 2}[i // 6]) for i in range(18)})
# topoDualSocketMultiNumaPerSocketHT (dual Xeon Gold 6230): NUMA n holds 10n..10n+9 and their siblings +40;
# sockets hold NUMA 0-1 and 2-3
MULTI_NUMA = machine({i: (i % 40, (i % 40) // 20, (i % 40) // 10) for i in range(80)})


def cpuset(text: str) -> frozenset[int]:
    return frozenset(parse_cpulist(text)) if text else frozenset()


def guaranteed(cpu_milli: int) -> ContainerRequest:
    return ContainerRequest("c", requests={"cpu": cpu_milli}, limits={"cpu": cpu_milli})


# --- cpu_assignment_test.go: the accumulator's orders ---------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "topo", "available", "numas", "sockets"),
    [
        # TestCPUAccumulatorFreeSockets / FreeNUMANodes / FreeSocketsAndNUMANodes
        ("single socket HT, 1 socket free", SINGLE_HT, "0-7", [0], [0]),
        ("single socket HT, 0 sockets free", SINGLE_HT, "1-7", [], []),
        ("dual socket HT, 2 sockets free", DUAL_HT, "0-11", [0, 1], [0, 1]),
        ("dual socket HT, 1 socket free", DUAL_HT, "0-9,11", [1], [1]),
        ("dual socket HT, 0 sockets free", DUAL_HT, "0,2-9,11", [], []),
        ("multi numa per socket, 2 Socket/4 NUMA Node free", MULTI_NUMA, "0-79", [0, 1, 2, 3], [0, 1]),
        ("multi numa per socket, 1 Socket/3 NUMA node free", MULTI_NUMA, "1-79", [1, 2, 3], [1]),
        ("multi numa per socket, 1 Socket/ 2 NUMA node free", MULTI_NUMA, "1-9,11-79", [2, 3], [1]),
        ("multi numa per socket, 1 NUMA node free", MULTI_NUMA, "1-9,11-59,61-79", [3], []),
        ("multi numa per socket, 0 Socket/ 2 NUMA node free", MULTI_NUMA, "1-59,61-79", [1, 3], []),
        ("multi numa per socket, 0 NUMA node free", MULTI_NUMA, "1-9,11-59,61-78", [], []),
    ],
)
def test_free_numa_nodes_and_sockets(case, topo, available, numas, sockets):
    acc = cpu_assign._Accumulator(cpu_assign.CpuTopology(topo), cpuset(available), 0, False)
    assert acc.free_numas() == numas, case
    assert sorted(acc.free_sockets()) == sockets, case


@pytest.mark.parametrize(
    ("case", "topo", "available", "expect"),
    [
        # TestCPUAccumulatorFreeCores
        ("single socket HT, 4 cores free", SINGLE_HT, "0-7", [0, 1, 2, 3]),
        ("single socket HT, 3 cores free", SINGLE_HT, "0-2,4-6", [0, 1, 2]),
        ("single socket HT, 3 cores free (1 partially consumed)", SINGLE_HT, "0-6", [0, 1, 2]),
        ("single socket HT, 0 cores free", SINGLE_HT, "", []),
        ("single socket HT, 0 cores free (4 partially consumed)", SINGLE_HT, "0-3", []),
        ("dual socket HT, 6 cores free", DUAL_HT, "0-11", [0, 2, 4, 1, 3, 5]),
        ("dual socket HT, 5 cores free (1 consumed from socket 0)", DUAL_HT, "1-5,7-11", [2, 4, 1, 3, 5]),
        ("dual socket HT, 4 cores free (1 consumed from each socket)", DUAL_HT, "2-5,8-11", [2, 4, 3, 5]),
    ],
)
def test_free_cores(case, topo, available, expect):
    acc = cpu_assign._Accumulator(cpu_assign.CpuTopology(topo), cpuset(available), 0, False)
    assert acc.free_cores() == expect, case


@pytest.mark.parametrize(
    ("case", "topo", "available", "expect"),
    [
        # TestCPUAccumulatorFreeCPUs
        ("single socket HT, 8 cpus free", SINGLE_HT, "0-7", [0, 4, 1, 5, 2, 6, 3, 7]),
        ("single socket HT, 5 cpus free", SINGLE_HT, "3-7", [4, 5, 6, 3, 7]),
        ("dual socket HT, 12 cpus free", DUAL_HT, "0-11", [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("dual socket HT, 11 cpus free", DUAL_HT, "1-11", [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("dual socket HT, 10 cpus free", DUAL_HT, "1-5,7-11", [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
        ("triple socket HT, 12 cpus free", TRIPLE_HT, "0-3,6-13", [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11]),
    ],
)
def test_free_cpus_order(case, topo, available, expect):
    acc = cpu_assign._Accumulator(cpu_assign.CpuTopology(topo), cpuset(available), 0, False)
    assert acc.ordered_cpus() == expect, case


# --- cpu_assignment_test.go: takeByTopology ---------------------------------------------------------------------

# commonTakeByTopologyTestCases: (description, machine, available, count, error, result)
COMMON = [
    ("take more cpus than are available from single socket with HT", SINGLE_HT, "0,2,4,6", 5,
     "not enough cpus available to satisfy request: requested=5, available=4", ""),
    ("take zero cpus from single socket with HT", SINGLE_HT, "0-7", 0, "", ""),
    ("take one cpu from single socket with HT", SINGLE_HT, "0-7", 1, "", "0"),
    ("take one cpu from single socket with HT, some cpus are taken", SINGLE_HT, "1,3,5-7", 1, "", "6"),
    ("take two cpus from single socket with HT", SINGLE_HT, "0-7", 2, "", "0,4"),
    ("take all cpus from single socket with HT", SINGLE_HT, "0-7", 8, "", "0-7"),
    ("take two cpus from single socket with HT, only one core totally free", SINGLE_HT, "0-3,6", 2, "", "2,6"),
    ("take a socket of cpus from dual socket with HT", DUAL_HT, "0-11", 6, "", "0,2,4,6,8,10"),
    ("take a socket of cpus from dual socket with multi-numa-per-socket with HT", MULTI_NUMA, "0-79", 40, "",
     "0-19,40-59"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MULTI_NUMA, "0-79", 20, "",
     "0-9,40-49"),
    ("... with 1 NUMA node already taken", MULTI_NUMA, "10-39,50-79", 20, "", "10-19,50-59"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MULTI_NUMA,
     "0-79", 60, "", "0-29,40-69"),
    ("take a socket and a NUMA node ..., a core taken", MULTI_NUMA, "1-39,41-79", 60, "", "10-39,50-79"),
]  # fmt: skip

# TestTakeByTopologyNUMAPacked's own rows (the uncore-cache rows need cache ids the model does not have)
PACKED = [
    ("take one cpu from dual socket with HT - core from Socket 0", DUAL_HT, "1-5,7-11", 1, "", "2"),
    ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 from the second",
     DUAL_HT, "0-11", 8, "", "0-2,4,6-8,10"),
    ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes and 2 from the fourth", MULTI_NUMA,
     "0-79", 64, "", "0-31,40-71"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "topo", "available", "count", "error", "result"), COMMON + PACKED)
def test_take_by_topology_numa_packed(case, topo, available, count, error, result):
    """TestTakeByTopologyNUMAPacked."""
    t = cpu_assign.CpuTopology(topo)
    if error:
        with pytest.raises(cpu_assign.TakeError) as caught:
            cpu_assign.take_packed(t, cpuset(available), count)
        assert str(caught.value) == error
    else:
        assert cpu_assign.take_packed(t, cpuset(available), count) == cpuset(result), case


@pytest.mark.parametrize(
    ("case", "topo", "available", "count", "result"),
    [
        # TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption (distribute-cpus-across-cores)
        ("take a socket of cpus from single socket with HT, 3 cpus", SINGLE_HT, "0-7", 3, "0-2"),
        ("take a socket of cpus from dual socket with HT, 2 cpus", DUAL_HT, "0-11", 2, "0,2"),
        ("take a socket of cpus from dual socket with HT, 3 cpus", DUAL_HT, "0-11", 3, "0,2,4"),
        ("take a socket of cpus from dual socket with HT, 6 cpus", DUAL_HT, "0-11", 6, "0,2,4,6,8,10"),
        ("take cpus from dual socket with HT, 8 cpus", DUAL_HT, "0-11", 8, "0-4,6,8,10"),
        ("take a socket of cpus from dual socket without HT, 2 cpus", DUAL_NOHT, "0-7", 2, "0,1"),
        ("dual socket with multi numa per socket and HT, 8 cpus", MULTI_NUMA, "0-79", 8, "0-7"),
    ],
)
def test_take_spread_across_cores(case, topo, available, count, result):
    assert cpu_assign.take_packed(cpu_assign.CpuTopology(topo), cpuset(available), count, spread=True) == cpuset(
        result
    ), case


DISTRIBUTED = [
    ("allocate 4 full cores with 2 distributed across each NUMA node", DUAL_HT, "0-11", 8, 1, "0-3,6-9"),
    ("allocate 32 full cores with 8 distributed across each NUMA node", MULTI_NUMA, "0-79", 64, 1,
     "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", MULTI_NUMA, "0-79", 48, 1,
     "0-7,10-17,20-27,40-47,50-57,60-67"),
    ("... (taking all but 2 from the first NUMA node)", MULTI_NUMA, "1-29,32-39,41-69,72-79", 48, 1,
     "1-8,10-17,20-27,41-48,50-57,60-67"),
    ("... across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)",
     MULTI_NUMA, "2-29,31-39,42-69,71-79", 48, 1, "10-17,20-27,31-38,50-57,60-67,71-78"),
    ("allocate 8 full cores with 2 distributed across each NUMA node", MULTI_NUMA,
     "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16, 1, "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
    ("take one cpu from dual socket with HT - core from Socket 0", DUAL_HT, "1-5,7-11", 1, 1, "1"),
    ("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", DUAL_HT, "1-5,7-11", 1, 2,
     "2"),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes", MULTI_NUMA, "0-79", 26, 1,
     "0-6,10-16,40-45,50-55"),
    ("... (cpuGroupSize 2)", MULTI_NUMA, "0-79", 26, 2, "0-6,10-15,40-46,50-55"),
    ("allocate 31 full cores with 15 CPUs on each NUMA node and 1 spilling over to each of NUMA 0, 1",
     MULTI_NUMA, "0-79", 62, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
    ("... 14 CPUs on each NUMA node and 2 spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)", MULTI_NUMA,
     "0-79", 62, 2, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
    ("... 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)", MULTI_NUMA,
     "0-8,10-18,20-39,40-48,50-58,60-79", 62, 1, "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
    ("... 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)", MULTI_NUMA,
     "0-8,10-18,20-39,40-48,50-58,60-79", 62, 2, "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
    ("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request", MULTI_NUMA,
     "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34, 1, "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "topo", "available", "count", "group", "result"),
    [(c, t, a, n, 1, r) for c, t, a, n, e, r in COMMON if not e] + DISTRIBUTED,
)
def test_take_by_topology_numa_distributed(case, topo, available, count, group, result):
    """TestTakeByTopologyNUMADistributed (with commonTakeByTopologyExtendedTestCases)."""
    t = cpu_assign.CpuTopology(topo)
    assert cpu_assign.take_distributed(t, cpuset(available), count, group) == cpuset(result), case


def test_distributed_not_enough_is_the_kubelets_error():
    with pytest.raises(cpu_assign.TakeError, match=r"requested=5, available=4$"):
        cpu_assign.take_distributed(cpu_assign.CpuTopology(SINGLE_HT), cpuset("0,2,4,6"), 5, 1)


# --- policy_static.go: exclusive CPUs, reserved CPUs, the shared pool ------------------------------------------


@pytest.mark.parametrize(
    ("qos", "milli", "expect"),
    [("Guaranteed", 2000, 2), ("Guaranteed", 1500, 0), ("Guaranteed", 0, 0), ("Burstable", 2000, 0)],
)
def test_exclusive_cpus_only_for_guaranteed_integer_requests(qos, milli, expect):
    assert cpus.exclusive_cpus(guaranteed(milli), qos) == expect


def test_pod_exclusive_cpus_counts_sidecars_with_the_apps():
    """podGuaranteedCPUs: init peak (sidecar 2 + init 4 = 6) beats the long-running sum (2 + 3). Ours."""
    pod = [
        ContainerRequest("side", init=True, restartable=True, requests={"cpu": 2000}),
        ContainerRequest("init", init=True, requests={"cpu": 4000}),
        ContainerRequest("app", requests={"cpu": 3000}),
        ContainerRequest("no-cpu"),
    ]
    assert cpus.pod_exclusive_cpus(pod, "Guaranteed") == 6
    assert cpus.pod_exclusive_cpus(pod[:1] + pod[2:] + [ContainerRequest("b", requests={"cpu": 5000})],
                                   "Guaranteed") == 10  # fmt: skip


@pytest.mark.parametrize(
    ("case", "topo", "milli", "expect"),
    [
        ("NewStaticPolicy's own example: 8 CPUs with HT, 2 reserved", SINGLE_HT, 2000, (0, 4)),
        ("TestStaticPolicyAdd rows' numReservedCPUs 1", SINGLE_HT, 1000, (0,)),
        ("half a CPU rounds up to one", DUAL_HT, 500, (0,)),
        ("ours: 3 on dual socket HT fill core 0 then CPU 2", DUAL_HT, 3000, (0, 2, 6)),
        ("ours: nothing reserved", DUAL_HT, 0, ()),
    ],
)
def test_reserved_cpus_taken_by_topology(case, topo, milli, expect):
    assert cpus.reserved_cpus(topo, milli) == expect, case


def test_reserving_more_cpus_than_the_machine_has_fails():
    with pytest.raises(CpuAllocationError, match="requested=9, available=8"):
        cpus.reserved_cpus(SINGLE_HT, 9000)


def test_shared_pool_is_every_cpu_less_assignments_and_reserved():
    held = [CpuAssignment("uid-1", "train", (1, 5)), CpuAssignment("uid-2", "serve", (2,))]
    assert cpus.shared_pool(SINGLE_HT, (0,), held) == cpuset("3-4,6-7")


# --- policy_static_test.go: TestStaticPolicyAdd ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "topo", "reserved", "default", "count", "affinity", "options", "expect"),
    [
        ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SINGLE_HT, "0", "0-7", 1, None, {}, "4"),
        ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", DUAL_HT, "0", "0-11", 6, None, {},
         "1,3,5,7,9,11"),
        ("ours: 6 CPUs, CPU 1 held: two cores of socket 0, one of socket 1", DUAL_HT, "0", "0,2-11", 6, None, {},
         "2-4,8-10"),
        ("ours: affinity NUMA 1 first", DUAL_HT, "0", "0-11", 2, frozenset({1}), {}, "1,7"),
        ("ours: NUMA 0 has none left: a core of NUMA 1, then a thread", DUAL_HT, "0", "0-1,3,5,7,9,11", 3,
         frozenset({0}), {}, "1,3,7"),
        ("ours: align-by-socket widens NUMA 1 to socket 0 (NUMA 0-1)", MULTI_NUMA, "0", "0-79", 24,
         frozenset({1}), {"align-by-socket": "true"}, "1-2,10-19,41-42,50-59"),
        # CPU 0 reserved leaves NUMA 0 with 19: NUMA 1+2 (two sockets) balance best, the first such pair
        ("ours: distribute-cpus-across-numa skips the NUMA node a reserved CPU unbalances", MULTI_NUMA, "0",
         "0-79", 26, None, {"distribute-cpus-across-numa": "true"}, "10-16,20-26,50-55,60-65"),
    ],
)  # fmt: skip
def test_static_policy_add(case, topo, reserved, default, count, affinity, options, expect):
    available = cpuset(default) - cpuset(reserved)
    got = cpus.allocate_cpus(topo, available, count, affinity, options, reserved=cpuset(reserved))
    assert got == tuple(sorted(cpuset(expect))), case


@pytest.mark.parametrize(
    ("case", "reserved", "default", "count", "message"),
    [
        ("odd request on an HT machine", "0", "0-7", 3,
         "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"),
        ("a reserved thread makes its sibling unusable", "0", "0-7", 8,
         "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 6, requested CPUs = 8, "
         "CPUs per core = 2"),
    ],
)  # fmt: skip
def test_full_pcpus_only_refuses_with_smt_alignment_error(case, reserved, default, count, message):
    """TestStaticPolicyAdd's full-pcpus-only rows (SMTAlignmentError), on our data."""
    available = cpuset(default) - cpuset(reserved)
    with pytest.raises(CpuAllocationError) as caught:
        cpus.allocate_cpus(SINGLE_HT, available, count, None, {"full-pcpus-only": "true"}, reserved=cpuset(reserved))
    assert (caught.value.reason, caught.value.message) == ("SMTAlignmentError", message), case


def test_full_pcpus_only_takes_whole_cores():
    got = cpus.allocate_cpus(SINGLE_HT, cpuset("1-7"), 4, None, {"full-pcpus-only": "true"}, reserved=cpuset("0"))
    assert got == (1, 2, 5, 6)


def test_not_enough_cpus_is_unexpected_admission_error_with_the_kubelets_text():
    """TestStaticPolicyAdd "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", on our data."""
    with pytest.raises(CpuAllocationError) as caught:
        cpus.allocate_cpus(SINGLE_HT, cpuset("1-3"), 4, None, {})
    assert caught.value.reason == "UnexpectedAdmissionError"
    assert caught.value.message == "not enough cpus available to satisfy request: requested=4, available=3"


def test_reusable_init_cpus_are_taken_again():
    assert cpus.allocate_cpus(DUAL_HT, cpuset("3,5"), 2, None, {}, reusable=cpuset("1,7")) == (1, 7)


# --- hints: generateCPUTopologyHints (policy_static_test.go, topology_hints_test.go TestGetTopologyHints) --------


def hints(*rows: tuple[str, bool]) -> list[TopologyHint]:
    return [TopologyHint(cpuset(mask), preferred) for mask, preferred in rows]


@pytest.mark.parametrize(
    ("case", "topo", "available", "milli", "options", "reusable", "expect"),
    [
        ("Request 1 CPU, all free", DUAL_HT, "0-11", 1000, {}, "", hints(("0", True), ("1", True), ("0-1", False))),
        ("Request 6 CPUs, a socket's worth", DUAL_HT, "0-11", 6000, {}, "",
         hints(("0", True), ("1", True), ("0-1", False))),
        ("Request 7 CPUs: only both NUMA nodes, preferred", DUAL_HT, "0-11", 7000, {}, "", hints(("0-1", True))),
        ("Request 6 CPUs, 5 left on NUMA 0", DUAL_HT, "1-11", 6000, {}, "",
         hints(("1", True), ("0-1", False))),
        ("Request 6 CPUs, 4 and 5 free: no single-node hint, none preferred", DUAL_HT, "1-5,8-11", 6000, {}, "",
         hints(("0-1", False))),
        ("Request 13 CPUs: more than the machine", DUAL_HT, "0-11", 13000, {}, "", []),
        ("reusable CPUs on NUMA 0 rule out NUMA 1 alone", DUAL_HT, "1,3,5", 2000, {}, "0",
         hints(("0-1", False))),
        ("align-by-socket: NUMA pairs of one socket preferred too", MULTI_NUMA, "0-79", 20000,
         {"align-by-socket": "true"}, "",
         hints(("0", True), ("1", True), ("2", True), ("3", True), ("0-1", True), ("0,2", False),
               ("0,3", False), ("1-2", False), ("1,3", False), ("2-3", True), ("0-2", False), ("0-1,3", False),
               ("0,2-3", False), ("1-3", False), ("0-3", False))),
    ],
)  # fmt: skip
def test_cpu_hints(case, topo, available, milli, options, reusable, expect):
    got = cpus.cpu_hints(topo, cpuset(available), guaranteed(milli), "Guaranteed", options, cpuset(reusable))
    assert got == expect, case


def test_no_exclusive_cpus_is_no_preference():
    assert cpus.cpu_hints(DUAL_HT, cpuset("0-11"), guaranteed(1500), "Guaranteed", {}, frozenset()) is None
    assert cpus.cpu_hints(DUAL_HT, cpuset("0-11"), guaranteed(2000), "Burstable", {}, frozenset()) is None


def test_hints_regenerated_from_an_existing_assignment():
    """GetTopologyHints after a kubelet restart: from the assigned CPUs alone; another size is no hint at all."""
    req = guaranteed(2000)
    assert cpus.cpu_hints(DUAL_HT, frozenset(), req, "Guaranteed", {}, allocated=cpuset("1,7")) == hints(
        ("1", True), ("0-1", False)
    )
    assert cpus.cpu_hints(DUAL_HT, cpuset("0-11"), req, "Guaranteed", {}, allocated=cpuset("1")) == []


def test_a_large_machine_answers_quickly():
    """16 NUMA nodes x 64 CPUs: every one of 65,535 masks, and an allocation (a generous "does not hang")."""
    big = machine({i: (i - i % 2, i // 512, i // 64) for i in range(1024)})
    start = time.monotonic()
    got = cpus.cpu_hints(big, frozenset(range(1024)), guaranteed(64000), "Guaranteed", {}, frozenset())
    assert got is not None and len(got) == 2**16 - 1
    assert sum(h.preferred for h in got) == 16
    assert len(cpus.allocate_cpus(big, frozenset(range(1, 1024)), 100, frozenset({3}), {})) == 100
    assert time.monotonic() - start < 60
