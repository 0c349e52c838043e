"""The machine's CPUs, cores, sockets and NUMA nodes from sysfs, as the kubelet's CPU manager sees them.

The kubelet learns its topology from cAdvisor (``utils/sysinfo.GetNodesInfo``) and turns it into
``cpumanager/topology.CPUDetails`` (``topology.Discover``); this module reads the same files and makes the
same choices, so that ``devctl fit`` places CPUs as the kubelet would:

- the online CPUs: ``devices/system/cpu/online``;
- each one's ``topology/physical_package_id`` (the socket) and ``topology/core_id``; a CPU without either is
  left out, as cAdvisor leaves it out (with a warning in the kubelet's log);
- cores: CPUs of one NUMA node with the same socket and ``core_id`` are one core, whose id is the lowest CPU
  id among them (``getUniqueCoreID``: core ids unique across sockets). On real machines that is the lowest of
  ``thread_siblings_list``, read only where ``core_id`` is missing;
- NUMA nodes: ``devices/system/node/nodeN/cpulist``. A kernel without ``devices/system/node`` (no NUMA) has
  cAdvisor number the nodes by socket (``getCPUTopology``), as here. An online CPU that no node lists is not
  in the kubelet's topology either, and is left out;
- ``nodeN/distance`` (``None`` for all when one is missing or does not fit the node count: cAdvisor then
  has no distances, and ``prefer-closest-numa-nodes`` has nothing to go by) and ``nodeN/meminfo``'s MemTotal.

Bounds: at most 1024 online CPUs and 64 NUMA nodes (more is a ``too-large`` failure, never a partial machine
dressed as the whole); each attribute through the safe reader, at most 64 KiB.
"""

from __future__ import annotations

import os
import re

from devctl.base.errors import DevctlError
from devctl.base.units import parse_cpulist
from devctl.model import ErrorKind, SourceError
from devctl.model.machine import Cpu, MachineTopology
from devctl.node.files import FileReadError, read_file
from devctl.node.sysfs import ATTRIBUTE_LIMIT, NODE_DIR, read_attribute, read_attribute_int

MACHINE_SOURCE = "machine"
MAX_CPUS = 1024
MAX_NODES = 64

CPU_DIR = "devices/system/cpu"
_NODE_NAME = re.compile(r"node(\d+)")
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", re.MULTILINE)


class MachineError(DevctlError):
    """The CPU topology cannot be read at all (or is beyond the bounds); the message is one line."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.OTHER):
        super().__init__(message)
        self.kind = kind


def read_machine(sysfs: str) -> MachineTopology:
    """The online CPUs (id, core, socket, NUMA node), NUMA distances and memory under ``sysfs``; raises
    MachineError when no CPU's topology can be read."""
    online_path = os.path.join(sysfs, CPU_DIR, "online")
    try:
        online = _cpulist(read_file(online_path, ATTRIBUTE_LIMIT).decode("ascii"))
    except FileReadError as err:
        raise MachineError(f"cannot read the online CPUs: {err}", err.kind) from None
    except ValueError:
        raise MachineError(f"{online_path}: not a CPU list", ErrorKind.MALFORMED) from None
    except OverflowError as err:
        raise MachineError(f"{err} online CPUs: devctl reads at most {MAX_CPUS}", ErrorKind.TOO_LARGE) from None
    nodes = _node_cpus(sysfs)
    numa_of: dict[int, int] = {cpu: node for node, cpus in nodes.items() for cpu in cpus}
    groups: dict[tuple[int, int, int], list[int]] = {}
    places: dict[int, tuple[int, int, int]] = {}
    for cpu in online:
        topology = os.path.join(sysfs, CPU_DIR, f"cpu{cpu}", "topology")
        socket = read_attribute_int(os.path.join(topology, "physical_package_id"))
        if socket is None:
            continue
        numa = numa_of.get(cpu) if nodes else socket
        if numa is None:
            continue
        core_id = read_attribute_int(os.path.join(topology, "core_id"))
        if core_id is None:
            siblings = _read_cpus(os.path.join(topology, "thread_siblings_list"))
            if not siblings:
                continue
            core_id = -1 - min(siblings)  # its own group, apart from every core_id sysfs gives
        key = (numa, socket, core_id)
        groups.setdefault(key, []).append(cpu)
        places[cpu] = key
    if not places:
        raise MachineError(
            f"no CPU topology under {os.path.join(sysfs, CPU_DIR)} (no physical_package_id of an online CPU)",
            ErrorKind.MISSING,
        )
    cpus = tuple(Cpu(id=cpu, core=min(groups[key]), socket=key[1], numa=key[0]) for cpu, key in sorted(places.items()))
    return MachineTopology(cpus=cpus, distances=_distances(sysfs, nodes), memory=_memory(sysfs, nodes))


def read_machine_source(sysfs: str) -> tuple[MachineTopology | None, SourceError | None]:
    """:func:`read_machine` for a collector: the machine, or None and the failure as a ``SourceError``."""
    try:
        return read_machine(sysfs), None
    except MachineError as err:
        return None, SourceError(MACHINE_SOURCE, str(err), err.kind)


def _node_cpus(sysfs: str) -> dict[int, tuple[int, ...]]:
    """NUMA node -> its CPUs; empty when the kernel has no ``devices/system/node`` (no NUMA)."""
    directory = os.path.join(sysfs, NODE_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    numbered = sorted((int(m.group(1)), name) for name in names if (m := _NODE_NAME.fullmatch(name)))
    if len(numbered) > MAX_NODES:
        raise MachineError(f"{len(numbered)} NUMA nodes: devctl reads at most {MAX_NODES}", ErrorKind.TOO_LARGE)
    return {node: _read_cpus(os.path.join(directory, name, "cpulist")) for node, name in numbered}


def _distances(sysfs: str, nodes: dict[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]] | None:
    if not nodes:
        return None
    distances: dict[int, tuple[int, ...]] = {}
    for node in nodes:
        text = read_attribute(os.path.join(sysfs, NODE_DIR, f"node{node}", "distance"))
        try:
            row = tuple(int(part) for part in text.split()) if text is not None else ()
        except ValueError:
            row = ()
        if len(row) != len(nodes):
            return None
        distances[node] = row
    return distances


def _memory(sysfs: str, nodes: dict[int, tuple[int, ...]]) -> dict[int, int]:
    memory: dict[int, int] = {}
    for node in nodes:
        text = read_attribute(os.path.join(sysfs, NODE_DIR, f"node{node}", "meminfo"))
        match = _MEMTOTAL.search(text) if text else None
        if match:
            memory[node] = int(match.group(1)) * 1024
    return memory


def _read_cpus(path: str) -> tuple[int, ...]:
    text = read_attribute(path)
    try:
        return _cpulist(text) if text is not None else ()
    except (ValueError, OverflowError):
        return ()


def _cpulist(text: str) -> tuple[int, ...]:
    """parse_cpulist, counted first: a list of more than MAX_CPUS raises OverflowError (its count) unexpanded."""
    count = 0
    for lo, hi in re.findall(r"(\d+)(?:-(\d+))?", text):
        count += int(hi) - int(lo) + 1 if hi else 1
    if count > MAX_CPUS:
        raise OverflowError(count)
    return parse_cpulist(text)
