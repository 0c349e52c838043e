"""The host's NUMA nodes and PCI devices, read from sysfs, with names from udev when it is the real one.

The kubelet's topology manager and device plugins speak of NUMA node numbers;
sysfs is where those numbers meet CPUs, memory and the PCI slots of devices, so
``devctl topo`` can show which GPU sits beside which cores. Reading is plain
file I/O (call it in a thread from async code) and never fails on one bad
file: a value that cannot be read is left out, because a partial topology is
still worth showing to someone troubleshooting a node.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace

from devctl.base.errors import DevctlError
from devctl.base.units import parse_cpulist
from devctl.model import ErrorKind, HostTopology, Hugepages, NumaNode, PciDevice
from devctl.model.pci import normalize_pci_address
from devctl.node.files import FileReadError, read_file
from devctl.node.pciids import database, hex_id, pci_names

# Layout as the kernel writes it: drivers/base/node.c (node<N>/cpulist, meminfo,
# hugepages/), mm/hugetlb.c (nr_hugepages, free_hugepages), drivers/pci/pci-sysfs.c
# (numa_node, vendor, device, class) and drivers/base/cpu.c (cpu/online).
NODE_DIR = "devices/system/node"
CPU_ONLINE = "devices/system/cpu/online"
PCI_DIR = "bus/pci/devices"
GLOBAL_HUGEPAGES = "kernel/mm/hugepages"

# A sysfs attribute is at most a page; a node's meminfo is the longest devctl reads.
ATTRIBUTE_LIMIT = 64 * 1024

_NODE_NAME = re.compile(r"node(\d+)")
_HUGEPAGES_NAME = re.compile(r"hugepages-(\d+)kB")
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", re.MULTILINE)
# domain:bus:slot.function; the kernel prints the domain with at least four hex
# digits, nvidia-smi with eight, and some tools leave it out.


class TopologyError(DevctlError):
    """The sysfs root itself cannot be read; the message is one line."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.OTHER):
        super().__init__(message)
        self.kind = kind


def read_topology(sysfs: str, use_udev: bool = True) -> HostTopology:
    """NUMA nodes and PCI devices under ``sysfs`` (``/sys``, ``/host/sys`` or a simulated tree).

    A kernel without NUMA has no ``devices/system/node``; it is shown as one
    node 0 holding every online CPU. Names of vendors and devices come from the
    udev database, which only describes the real ``/sys`` of this host
    (``with_database_names`` names the others from their IDs).
    """
    try:
        os.listdir(sysfs)
    except OSError as err:
        raise TopologyError(f"cannot read sysfs at {sysfs}: {err.strerror or err}", ErrorKind.of_oserror(err)) from None
    pci = _read_pci_devices(sysfs)
    if use_udev and os.path.realpath(sysfs) == "/sys":
        pci = _with_udev_names(pci)
    return HostTopology(numa_nodes=_read_numa_nodes(sysfs), pci_devices=pci)


def read_attribute(path: str) -> str | None:
    """A small sysfs file's text, or None when it is missing, unreadable, not a regular file or not text.

    Every sysfs attribute reports a size of 4096 whatever it holds, and a
    simulated or bind-mounted tree may hold anything, so the safe reader caps
    it at a few pages.
    """
    try:
        return read_file(path, ATTRIBUTE_LIMIT).decode("ascii").strip()
    except (FileReadError, ValueError):
        return None


def read_attribute_int(path: str) -> int | None:
    text = read_attribute(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _read_cpus(path: str) -> tuple[int, ...]:
    text = read_attribute(path)
    try:
        return parse_cpulist(text) if text is not None else ()
    except ValueError:
        return ()


def _numbered(directory: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """(number, name) of the entries of ``directory`` named by ``pattern``, sorted by number."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(int(m.group(1)), name) for name in names if (m := pattern.fullmatch(name))]
    return sorted(found)


def _read_numa_nodes(sysfs: str) -> tuple[NumaNode, ...]:
    node_dir = os.path.join(sysfs, NODE_DIR)
    if not os.path.lexists(node_dir):
        # A kernel built without CONFIG_NUMA: the whole machine is one node.
        online = os.path.join(sysfs, CPU_ONLINE)
        if not os.path.lexists(online):
            return ()
        hugepages = _read_hugepages(os.path.join(sysfs, GLOBAL_HUGEPAGES))
        return (NumaNode(id=0, cpus=_read_cpus(online), hugepages=hugepages),)
    nodes = []
    for node_id, name in _numbered(node_dir, _NODE_NAME):
        path = os.path.join(node_dir, name)
        nodes.append(
            NumaNode(
                id=node_id,
                cpus=_read_cpus(os.path.join(path, "cpulist")),
                memory_bytes=_read_memtotal(os.path.join(path, "meminfo")),
                hugepages=_read_hugepages(os.path.join(path, "hugepages")),
            )
        )
    return tuple(nodes)


def _read_memtotal(path: str) -> int:
    """Bytes of ``Node N MemTotal:  65536 kB`` in a node's meminfo; 0 (unknown) when absent."""
    text = read_attribute(path)
    match = _MEMTOTAL.search(text) if text else None
    return int(match.group(1)) * 1024 if match else 0


def _read_hugepages(directory: str) -> tuple[Hugepages, ...]:
    """One entry per page size whose counts can both be read."""
    pools = []
    for size_kb, name in _numbered(directory, _HUGEPAGES_NAME):
        total = read_attribute_int(os.path.join(directory, name, "nr_hugepages"))
        free = read_attribute_int(os.path.join(directory, name, "free_hugepages"))
        if total is not None and free is not None:
            pools.append(Hugepages(size_kb=size_kb, total=total, free=free))
    return tuple(pools)


def _read_pci_devices(sysfs: str) -> tuple[PciDevice, ...]:
    pci_dir = os.path.join(sysfs, PCI_DIR)
    try:
        addresses = sorted(os.listdir(pci_dir))
    except OSError:
        return ()
    devices = []
    for address in addresses:
        path = os.path.join(pci_dir, address)
        numa = read_attribute_int(os.path.join(path, "numa_node"))
        try:
            driver: str | None = os.path.basename(os.readlink(os.path.join(path, "driver")))
        except OSError:  # no driver bound (or the link cannot be read)
            driver = None
        devices.append(
            PciDevice(
                address=address,
                numa_node=numa if numa is not None else -1,
                vendor_id=read_attribute(os.path.join(path, "vendor")) or "",
                device_id=read_attribute(os.path.join(path, "device")) or "",
                class_id=read_attribute(os.path.join(path, "class")) or "",
                driver=driver,
            )
        )
    return tuple(devices)


def _with_udev_names(devices: tuple[PciDevice, ...]) -> tuple[PciDevice, ...]:
    """Vendor and model names from udev's hwdb properties; the devices unchanged if udev has none.

    One enumeration of the PCI subsystem through libudev (no subprocess per
    device). The names are a nicety: a missing libudev, a container without
    ``/run/udev`` or any other failure just leaves them out.
    """
    try:
        import pyudev

        names: dict[str, tuple[str | None, str | None]] = {}
        for dev in pyudev.Context().list_devices(subsystem="pci"):
            props = dev.properties
            vendor = props.get("ID_VENDOR_FROM_DATABASE")
            model = props.get("ID_MODEL_FROM_DATABASE")
            if vendor or model:
                names[dev.sys_name] = (vendor, model)
    except Exception:  # a nicety: libudev and its database may be absent or unreadable
        return devices
    if not names:
        return devices
    return tuple(_named(d, names.get(d.address)) for d in devices)


def with_database_names(topology: HostTopology) -> HostTopology:
    """``topology`` with names from the PCI IDs database (devctl.node.pciids) for the devices udev did not name.

    Unchanged when the machine has no database. The names come from the
    devices' IDs, not from the host, so a simulated tree is named as well.
    """
    devices = topology.pci_devices
    unnamed = [d for d in devices if d.vendor_name is None and d.vendor_id and d.device_id]
    if not unnamed:
        return topology
    names = pci_names(((d.vendor_id, d.device_id) for d in unnamed), database())
    if not names:
        return topology
    named = tuple(
        _named(d, names.get((hex_id(d.vendor_id), hex_id(d.device_id)))) if d.vendor_name is None else d
        for d in devices
    )
    return replace(topology, pci_devices=named)


def _named(device: PciDevice, names: tuple[str | None, str | None] | None) -> PciDevice:
    if names is None:
        return device
    return replace(device, vendor_name=names[0], device_name=names[1])


# --- lookups on a topology ----------------------------------------------------------


def pci_index(topology: HostTopology) -> Mapping[str, PciDevice]:
    """PCI devices by their kernel address, for many lookups on one topology."""
    return {d.address: d for d in topology.pci_devices}


def numa_of_pci(topology: HostTopology, address: str) -> int:
    """The NUMA node of the PCI device at ``address`` (any common spelling); -1 when unknown."""
    wanted = normalize_pci_address(address)
    for device in topology.pci_devices:
        if device.address == wanted:
            return device.numa_node
    return -1


def numa_of_cpus(topology: HostTopology) -> Mapping[int, int]:
    """CPU number -> its NUMA node, to place a container's exclusive CPUs."""
    return {cpu: node.id for node in topology.numa_nodes for cpu in node.cpus}
