"""The machine's CPUs, cores, sockets and NUMA nodes from sysfs, as the kubelet's CPU manager sees them (issue 31)."""

from __future__ import annotations

import tarfile
import time
from collections import Counter
from pathlib import Path

import pytest

from devctl.base.units import format_cpulist
from devctl.model import ErrorKind
from devctl.node.machine import MAX_CPUS, MachineError, read_machine, read_machine_source
from tests.shared_data import needs_shared, shared


def _tree(
    root: Path,
    sockets: int,
    cores: int,
    threads: int,
    nodes: int,
    *,
    distances: bool = True,
    numa: bool = True,
) -> Path:
    """A fake /sys: CPU ids numbered as Linux numbers them on x86 (first thread of every core, then the second
    ones), cores split evenly over the NUMA nodes, sockets over the nodes."""
    sysfs = root / "sys"
    per_thread = sockets * cores
    total = per_thread * threads
    cpu_dir = sysfs / "devices/system/cpu"
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text(f"0-{total - 1}\n")
    node_cpus: dict[int, list[int]] = {n: [] for n in range(nodes)}
    cores_per_node = per_thread // nodes
    for cpu in range(total):
        physical = cpu % per_thread  # the core's index across the machine
        socket, core_id = divmod(physical, cores)
        siblings = [physical + t * per_thread for t in range(threads)]
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{socket}\n")
        (topo / "core_id").write_text(f"{core_id}\n")
        (topo / "thread_siblings_list").write_text(format_cpulist(siblings) + "\n")
        node_cpus[physical // cores_per_node].append(cpu)
    if numa:
        for node, cpus in node_cpus.items():
            d = sysfs / "devices/system/node" / f"node{node}"
            d.mkdir(parents=True)
            (d / "cpulist").write_text(format_cpulist(cpus) + "\n")
            (d / "meminfo").write_text(
                f"Node {node} MemTotal:       {(node + 1) * 1024} kB\nNode {node} MemFree: 1 kB\n"
            )
            if distances:
                (d / "distance").write_text(" ".join("10" if n == node else "21" for n in range(nodes)) + "\n")
    return sysfs


def test_two_sockets_with_hyperthreads(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, sockets=2, cores=4, threads=2, nodes=2)
    machine = read_machine(str(sysfs))
    by_id = {cpu.id: cpu for cpu in machine.cpus}
    assert len(machine.cpus) == 16
    assert machine.numa_nodes == (0, 1)
    # cpu9 is the second thread of core 1 of socket 0: its core id is the lowest of its threads, 1
    assert (by_id[9].core, by_id[9].socket, by_id[9].numa) == (1, 0, 0)
    # core_id restarts at 0 on socket 1, but the kubelet's core ids are unique: cpu4 and cpu12 form core 4
    assert (by_id[12].core, by_id[12].socket, by_id[12].numa) == (4, 1, 1)
    assert len({cpu.core for cpu in machine.cpus}) == 8
    assert machine.distances == {0: (10, 21), 1: (21, 10)}
    assert machine.memory == {0: 1024 * 1024, 1: 2048 * 1024}


def test_sixteen_numa_nodes_of_64_cpus(tmp_path: Path) -> None:
    """More than 8 NUMA nodes (the kubelet's max-allowable-numa-nodes default) is read whole."""
    sysfs = _tree(tmp_path, sockets=4, cores=128, threads=2, nodes=16)
    started = time.monotonic()
    machine = read_machine(str(sysfs))
    elapsed = time.monotonic() - started
    assert len(machine.cpus) == 1024
    assert machine.numa_nodes == tuple(range(16))
    assert Counter(cpu.numa for cpu in machine.cpus) == dict.fromkeys(range(16), 64)
    assert machine.distances is not None and machine.distances[15][15] == 10 and len(machine.distances[3]) == 16
    assert elapsed < 30  # does not hang (a generous bound; measured in the report)


def test_missing_distances_are_unknown_not_zero(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, sockets=2, cores=2, threads=1, nodes=2, distances=False)
    machine = read_machine(str(sysfs))
    assert machine.distances is None
    assert machine.numa_nodes == (0, 1)


def test_one_missing_distance_file_makes_all_unknown(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, sockets=2, cores=2, threads=1, nodes=2)
    (sysfs / "devices/system/node/node1/distance").unlink()
    assert read_machine(str(sysfs)).distances is None


def test_without_numa_nodes_the_socket_is_the_node(tmp_path: Path) -> None:
    """cAdvisor's getCPUTopology (utils/sysinfo): no devices/system/node, nodes numbered by socket."""
    sysfs = _tree(tmp_path, sockets=2, cores=2, threads=2, nodes=2, numa=False)
    machine = read_machine(str(sysfs))
    assert {(cpu.socket, cpu.numa) for cpu in machine.cpus} == {(0, 0), (1, 1)}
    assert machine.distances is None


def test_a_cpu_no_node_lists_is_left_out_as_the_kubelet_leaves_it(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, sockets=1, cores=4, threads=1, nodes=1)
    (sysfs / "devices/system/node/node0/cpulist").write_text("0-2\n")
    assert [cpu.id for cpu in read_machine(str(sysfs)).cpus] == [0, 1, 2]


def test_offline_cpus_are_not_counted(tmp_path: Path) -> None:
    sysfs = _tree(tmp_path, sockets=1, cores=4, threads=1, nodes=1)
    (sysfs / "devices/system/cpu/online").write_text("0,2-3\n")
    assert [cpu.id for cpu in read_machine(str(sysfs)).cpus] == [0, 2, 3]


def test_no_cpu_topology_is_a_typed_failure(tmp_path: Path) -> None:
    with pytest.raises(MachineError) as caught:
        read_machine(str(tmp_path))
    assert caught.value.kind == ErrorKind.MISSING
    (tmp_path / "devices/system/cpu").mkdir(parents=True)
    (tmp_path / "devices/system/cpu/online").write_text("0-3\n")
    machine, error = read_machine_source(str(tmp_path))  # online CPUs, but no topology of any
    assert machine is None and error is not None
    assert error.kind == ErrorKind.MISSING and "physical_package_id" in error.message


def test_more_cpus_than_the_bound_is_too_large(tmp_path: Path) -> None:
    cpu = tmp_path / "devices/system/cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text(f"0-{MAX_CPUS * 1000}\n")  # not expanded before it is counted
    with pytest.raises(MachineError) as caught:
        read_machine(str(tmp_path))
    assert caught.value.kind == ErrorKind.TOO_LARGE


# --- real machines (hwloc's saved trees, ../shared/testdata/pci) ----------------------------------------------

# (tarball, online CPUs, sockets, NUMA nodes): sockets and NUMA nodes as ../shared/testdata/pci/README.md states
# them (32intel64: 2 sockets, NUMA 0 and 1; 32em64t: 2 NUMA nodes, sockets 0 and 1; 40intel64: 4 NUMA nodes);
# the CPU counts are the trees' own devices/system/cpu/online.
REAL = [
    ("32intel64-2p8co2t+8ve.tar.bz2", 32, 2, 2, 16),
    ("32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2", 16, 2, 2, 16),
    ("40intel64-2g2n4c+pcilocality.tar.bz2", 40, 4, 4, 40),
]


@needs_shared("pci")
@pytest.mark.parametrize(("tarball", "cpus", "sockets", "nodes", "cores"), REAL, ids=[r[0].split("-")[0] for r in REAL])
def test_real_machines(tmp_path: Path, tarball: str, cpus: int, sockets: int, nodes: int, cores: int) -> None:
    path = shared("pci", tarball)
    if not path.exists():
        pytest.skip(f"{path} not found")
    with tarfile.open(path) as archive:  # only the CPU and node trees: the PCI ones are most of the archive
        wanted = [m for m in archive if "/sys/devices/system/" in m.name]
        archive.extractall(tmp_path, members=wanted, filter="data")
    (top,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    machine = read_machine(str(top / "sys"))
    assert len(machine.cpus) == cpus
    assert len({cpu.socket for cpu in machine.cpus}) == sockets
    assert len(machine.numa_nodes) == nodes
    assert len({cpu.core for cpu in machine.cpus}) == cores
    assert machine.distances is not None and len(machine.distances) == nodes
