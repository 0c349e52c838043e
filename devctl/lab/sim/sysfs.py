"""A scenario's host topology written as a sysfs tree, so the simulated node has a ``/sys`` to read.

devctl reads the simulated node exactly as a real one (``devctl.node.sysfs``),
so the simulator writes the files the kernel would, in the kernel's formats:
whatever ``read_topology`` makes of the tree is what a real host with that
topology would show.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from devctl.base.units import format_cpulist
from devctl.lab.sim.pcietree import SimPci, config_header, cpumask
from devctl.model import Hugepages, NumaNode, PciDevice
from devctl.model.pci import normalize_pci_address
from devctl.node.sysfs import CPU_ONLINE, NODE_DIR, PCI_DIR

_NODE_NAME = re.compile(r"node\d+")
_HUGEPAGES_NAME = re.compile(r"hugepages-\d+kB")


def write_topology(
    sysfs: Path,
    numa_nodes: Sequence[NumaNode],
    pci_devices: Sequence[PciDevice] = (),
    online_cpus: str | None = None,
) -> None:
    """Write (or rewrite) the NUMA nodes, online CPUs and PCI devices under ``sysfs``.

    Calling it again on the same tree replaces what the previous call wrote:
    nodes and PCI devices that are no longer given are removed. No nodes at
    all makes a kernel without NUMA, read back as one node 0 of the online
    CPUs. ``online_cpus`` defaults to every CPU of the nodes. Node memory is
    written in kB, as the kernel counts it, so a size that is not a multiple of
    1 KiB is rounded down. Udev names (``vendor_name``, ``device_name``) have no
    place in sysfs and are not written. Bad input raises ValueError before
    anything is written.
    """
    sysfs = Path(sysfs)
    if Path(os.path.realpath(sysfs)).is_relative_to("/sys"):
        raise ValueError(f"refusing to write a simulated topology into the real /sys ({sysfs})")
    _check(numa_nodes, pci_devices)
    _write_nodes(sysfs / NODE_DIR, numa_nodes)
    online = online_cpus if online_cpus is not None else format_cpulist(c for n in numa_nodes for c in n.cpus)
    _write(sysfs / CPU_ONLINE, online)
    _write_cpus(sysfs / "devices/system/cpu", numa_nodes)
    cpus = {n.id: tuple(n.cpus) for n in numa_nodes}
    cpus[-1] = tuple(sorted(c for n in numa_nodes for c in n.cpus))
    _write_pci(sysfs, pci_devices, cpus)


def _check(nodes: Sequence[NumaNode], devices: Sequence[PciDevice]) -> None:
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
        raise ValueError(f"NUMA node IDs must be unique and not negative, got {ids}")
    addresses = [d.address for d in devices]
    for address in addresses:
        if normalize_pci_address(address) != address:
            raise ValueError(f"{address!r} is not a PCI address as the kernel writes it (like 0000:3b:00.0)")
    if len(set(addresses)) != len(addresses):
        raise ValueError("PCI addresses must be unique")


def _write(path: Path, text: str) -> None:
    """Replace one file at once, so a reader polling the tree never sees half of it.

    A file that already holds ``text`` is left alone: creating files is the
    slow part, and a simulator restart rewrites the same topology.
    """
    content = text + "\n"
    try:
        if path.read_text(encoding="ascii") == content:
            return
    except (OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content, encoding="ascii")
    os.replace(tmp, path)


def _write_bytes(path: Path, content: bytes) -> None:
    """``_write`` for a binary file."""
    try:
        if path.read_bytes() == content:
            return
    except OSError:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)


def _remove_stale(directory: Path, pattern: re.Pattern[str], keep: Iterable[str]) -> None:
    wanted = set(keep)
    for entry in directory.iterdir():
        if pattern.fullmatch(entry.name) and entry.name not in wanted:
            _remove(entry)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _write_nodes(node_dir: Path, nodes: Sequence[NumaNode]) -> None:
    ids = sorted(n.id for n in nodes)
    if not nodes:  # a kernel without CONFIG_NUMA has no node directory at all
        if node_dir.exists():
            _remove(node_dir)
        return
    node_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale(node_dir, _NODE_NAME, (f"node{i}" for i in ids))
    # drivers/base/node.c: node/online and node/possible list the node IDs.
    _write(node_dir / "online", format_cpulist(ids))
    _write(node_dir / "possible", format_cpulist(ids))
    for node in nodes:
        path = node_dir / f"node{node.id}"
        _write(path / "cpulist", format_cpulist(node.cpus))
        _write(path / "cpumap", cpumask(node.cpus))
        _write(path / "meminfo", _meminfo(node))
        _write_hugepages(path / "hugepages", node.hugepages)


def _meminfo(node: NumaNode) -> str:
    """The first lines of drivers/base/node.c's node meminfo; readers look only at MemTotal."""
    kb = node.memory_bytes // 1024
    rows = [("MemTotal", kb), ("MemFree", kb), ("MemUsed", 0)]
    return "\n".join(f"Node {node.id} {name + ':':<15} {value:>8} kB" for name, value in rows)


def _write_hugepages(directory: Path, pools: Sequence[Hugepages]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale(directory, _HUGEPAGES_NAME, (f"hugepages-{p.size_kb}kB" for p in pools))
    for pool in pools:
        path = directory / f"hugepages-{pool.size_kb}kB"
        _write(path / "nr_hugepages", str(pool.total))
        _write(path / "free_hugepages", str(pool.free))
        _write(path / "surplus_hugepages", "0")


def _write_cpus(cpu_dir: Path, nodes: Sequence[NumaNode]) -> None:
    """Each CPU's ``topology/``: one socket per NUMA node, one thread per core (what hwloc and ``fit`` read)."""
    for node in nodes:
        for core, cpu in enumerate(sorted(node.cpus)):
            topology = cpu_dir / f"cpu{cpu}" / "topology"
            _write(topology / "physical_package_id", str(node.id))
            _write(topology / "core_id", str(core))
            _write(topology / "thread_siblings", cpumask([cpu]))
            _write(topology / "thread_siblings_list", str(cpu))
            _write(topology / "core_siblings", cpumask(node.cpus))
            _write(topology / "core_siblings_list", format_cpulist(node.cpus))


def function_dir(sysfs: Path, device: PciDevice) -> Path:
    """Where the kernel puts ``device``: under its host bridge and the bridges above it (scenario ``pcie:``),
    or right on the root bus ``pci<domain>:<bus>`` (a flat ``pci_devices:`` entry)."""
    if isinstance(device, SimPci):
        return sysfs.joinpath("devices", f"pci{device.host_bridge}", *device.bridges, device.address)
    return sysfs / "devices" / f"pci{device.address.rsplit(':', 1)[0]}" / device.address


def _write_pci(sysfs: Path, devices: Sequence[PciDevice], cpus: dict[int, tuple[int, ...]]) -> None:
    """Each device in its place under ``devices/`` (``function_dir``), linked from ``bus/pci/devices``.

    The links are relative, as the kernel's are, so the tree still reads right
    when it is moved or mounted elsewhere (``/host/sys``). Each function gets its
    configuration header (``config``) and ``local_cpus``, which hwloc reads.
    """
    addresses = {d.address for d in devices}
    links = sysfs / PCI_DIR
    links.mkdir(parents=True, exist_ok=True)
    inside = sysfs.resolve()
    for entry in links.iterdir():
        if entry.name not in addresses:
            target = entry.resolve()
            if entry.is_symlink() and target.is_relative_to(inside):
                _remove(target)
            _remove(entry)
    for device in devices:
        path = function_dir(sysfs, device)
        path.mkdir(parents=True, exist_ok=True)
        _write(path / "numa_node", str(device.numa_node))
        local = cpus.get(device.numa_node, cpus[-1])
        _write(path / "local_cpus", cpumask(local))
        _write(path / "local_cpulist", format_cpulist(local))
        _write_bytes(path / "config", config_header(device))
        if isinstance(device, SimPci) and device.rdma:
            (path / "infiniband").mkdir(exist_ok=True)
        for name, value in (("vendor", device.vendor_id), ("device", device.device_id), ("class", device.class_id)):
            if value:
                _write(path / name, value)
            else:
                (path / name).unlink(missing_ok=True)
        _relink(path / "driver", sysfs / "bus/pci/drivers" / device.driver if device.driver else None)
        _relink(links / device.address, path)


def _relink(link: Path, target: Path | None) -> None:
    """Point ``link`` at ``target`` with a relative symlink; remove it when ``target`` is None."""
    if target is None:
        link.unlink(missing_ok=True)
        return
    target.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(target, link.parent)
    try:
        current: str | None = os.readlink(link)
    except OSError:
        current = None
    if current == relative:  # already right: a rewrite of the same topology touches nothing
        return
    link.unlink(missing_ok=True)
    link.symlink_to(relative)
