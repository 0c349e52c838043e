"""The simulated node's PCIe tree (the scenario's ``pcie:``) and the files a reader of it looks at.

A scenario's ``pcie:`` lists host bridges, each on a NUMA node, with PCIe switches under them and devices
behind the switches (or right on a root port). ``parse_pcie`` makes every function of it, bridges included,
a ``SimPci``: a ``PciDevice`` that knows its place (its host bridge and the bridges above it) and, for a
bridge, the buses behind it. ``sysfs.write_topology`` writes them where the kernel does
(``devices/pci0000:14/0000:14:01.0/0000:15:00.0/...``), each with the 64 bytes of its configuration header
(``config``: ids, class, header type, and a bridge's primary, secondary and subordinate bus) and its
``local_cpus``/``local_cpulist``, so that devctl (which reads the nesting) and hwloc's ``lstopo --input``
(which reads the bus numbers and localities) see the same tree.

How a switch is laid out, from the buses of its devices alone: a root port on the host bridge's bus
(``<host>:<nn>.0``, one per switch or lone device, numbered from 01), the switch's upstream port alone on the
bus two below the lowest device bus, its downstream ports on the next bus, one per distinct device bus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devctl.base.errors import DevctlError
from devctl.model import PciDevice
from devctl.model.pci import normalize_pci_address

BRIDGE_CLASS = "0x060400"
BRIDGE_VENDOR, BRIDGE_DEVICE = "0x10b5", "0x8747"  # a PLX/Broadcom PCIe switch, as GPU servers carry
ROOT_VENDOR, ROOT_DEVICE = "0x8086", "0x347a"  # an Intel root port
_HOST_KEYS = ("host_bridge", "numa_node", "switches", "devices")
_DEVICE_KEYS = ("address", "numa_node", "vendor", "device", "class", "driver", "rdma")


class PcieError(DevctlError, ValueError):
    """A ``pcie:`` entry that cannot be laid out (the scenario loader says where)."""


@dataclass(frozen=True)
class SimPci(PciDevice):
    """A function of the scenario's PCIe tree: a ``PciDevice`` with its place in the tree."""

    host_bridge: str = ""  # 0000:14 (the directory pci0000:14)
    bridges: tuple[str, ...] = ()  # the bridges above it, from the host bridge down
    buses: tuple[int, int] | None = None  # a bridge's secondary and subordinate bus
    rdma: bool = False  # an ``infiniband/`` directory under it, as an RDMA driver (mlx5_ib, irdma) makes


def _bus(address: str) -> int:
    return int(address.split(":")[1], 16)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PcieError(f"{where}: expected a mapping")
    return value


def _list(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PcieError(f"{where}: expected a list")
    return value


def _unknown(entry: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in entry:
        if key not in known:
            raise PcieError(f"{where}: unknown field {key!r} (known: {', '.join(known)})")


def _leaf(value: Any, where: str, host: str, numa: int, bridges: tuple[str, ...]) -> SimPci:
    entry = _mapping(value, where)
    _unknown(entry, _DEVICE_KEYS, where)
    address = str(entry.get("address", "")).lower()
    if normalize_pci_address(address) != address:
        raise PcieError(f"{where}.address: {address!r} is not a PCI address like 0000:3b:00.0")
    if not address.startswith(host.split(":")[0] + ":"):
        raise PcieError(f"{where}.address: {address} is not in the host bridge's domain ({host})")
    driver = entry.get("driver")
    try:
        node = int(entry.get("numa_node", numa))
    except (TypeError, ValueError):
        raise PcieError(f"{where}.numa_node: not a number") from None
    return SimPci(
        address=address,
        numa_node=node,
        vendor_id=str(entry.get("vendor", "")),
        device_id=str(entry.get("device", "")),
        class_id=str(entry.get("class", "")),
        driver=str(driver) if driver is not None else None,
        host_bridge=host,
        bridges=bridges,
        rdma=bool(entry.get("rdma", False)),
    )


def _bridge(address: str, numa: int, host: str, above: tuple[str, ...], buses: tuple[int, int], root: bool) -> SimPci:
    vendor, device = (ROOT_VENDOR, ROOT_DEVICE) if root else (BRIDGE_VENDOR, BRIDGE_DEVICE)
    return SimPci(address, numa, vendor, device, BRIDGE_CLASS, "pcieport", host_bridge=host, bridges=above, buses=buses)


def _switch(
    devices: Sequence[Any], where: str, host: str, numa: int, port: int, host_bus: int, *, switch: bool
) -> list[SimPci]:
    """A root port at ``<host>:<port>.0`` and, when ``switch``, a switch under it; the devices behind them."""
    domain = host.split(":")[0]
    root = f"{domain}:{host_bus:02x}:{port:02x}.0"
    probe = [_leaf(d, f"{where}.devices[{i}]", host, numa, ()) for i, d in enumerate(devices)]
    if not probe:
        raise PcieError(f"{where}: no devices")
    buses = sorted({_bus(d.address) for d in probe})
    lowest, highest = buses[0], buses[-1]
    if not switch:
        if len(buses) != 1:
            raise PcieError(f"{where}: devices right on a root port sit on one bus, got {len(buses)}")
        return [
            _bridge(root, numa, host, (), (lowest, highest), True),
            *(_leaf(d, f"{where}.devices[{i}]", host, numa, (root,)) for i, d in enumerate(devices)),
        ]
    if lowest - 2 <= host_bus:
        raise PcieError(f"{where}: the devices' lowest bus {lowest:02x} leaves no bus for the switch's ports")
    up = f"{domain}:{lowest - 2:02x}:00.0"
    out = [
        _bridge(root, numa, host, (), (lowest - 2, highest), True),
        _bridge(up, numa, host, (root,), (lowest - 1, highest), False),
    ]
    for slot, bus in enumerate(buses):
        down = f"{domain}:{lowest - 1:02x}:{slot:02x}.0"
        out.append(_bridge(down, numa, host, (root, up), (bus, bus), False))
        out.extend(
            _leaf(d, f"{where}.devices[{i}]", host, numa, (root, up, down))
            for i, d in enumerate(devices)
            if _bus(probe[i].address) == bus
        )
    return out


def parse_pcie(value: Any) -> tuple[SimPci, ...]:
    """Every function of a scenario's ``pcie:`` list, bridges first; PcieError for what cannot be laid out."""
    out: list[SimPci] = []
    for h, item in enumerate(_list(value, "pcie")):
        where = f"pcie[{h}]"
        entry = _mapping(item, where)
        _unknown(entry, _HOST_KEYS, where)
        host = str(entry.get("host_bridge", "")).lower()
        parts = host.split(":")
        if len(parts) != 2 or len(parts[0]) != 4 or len(parts[1]) != 2 or normalize_pci_address(host + ":00.0") is None:
            raise PcieError(f"{where}.host_bridge: {host!r} is not a domain and root bus like 0000:14")
        try:
            numa = int(entry.get("numa_node", -1))
        except (TypeError, ValueError):
            raise PcieError(f"{where}.numa_node: not a number") from None
        port = 1
        for s, switch in enumerate(_list(entry.get("switches"), f"{where}.switches")):
            devices = _list(_mapping(switch, f"{where}.switches[{s}]").get("devices"), f"{where}.switches[{s}]")
            out += _switch(devices, f"{where}.switches[{s}]", host, numa, port, int(parts[1], 16), switch=True)
            port += 1
        for d, device in enumerate(_list(entry.get("devices"), f"{where}.devices")):
            out += _switch([device], f"{where}.devices[{d}]", host, numa, port, int(parts[1], 16), switch=False)
            port += 1
    addresses = [f.address for f in out]
    if twice := sorted({a for a in addresses if addresses.count(a) > 1}):
        raise PcieError(f"pcie: {', '.join(twice)} laid out twice (buses or addresses overlap)")
    return tuple(out)


def config_header(device: PciDevice) -> bytes:
    """The first 64 bytes of ``device``'s configuration space, as sysfs' ``config`` holds them (little-endian)."""
    header = bytearray(64)

    def number(text: str, default: int) -> int:
        try:
            return int(text, 16) if text else default
        except ValueError:
            return default

    header[0:2] = number(device.vendor_id, 0xFFFF).to_bytes(2, "little")
    header[2:4] = number(device.device_id, 0xFFFF).to_bytes(2, "little")
    header[9:12] = number(device.class_id, 0).to_bytes(3, "little")  # prog-if, subclass, class
    buses = device.buses if isinstance(device, SimPci) else None
    if buses is not None:
        header[0x0E] = 0x01  # a PCI-to-PCI bridge's header
        header[0x18] = _bus(device.address)  # primary, secondary, subordinate
        header[0x19], header[0x1A] = buses
    return bytes(header)


def cpumask(cpus: Sequence[int]) -> str:
    """The kernel's hex CPU mask (``bitmap_print_to_pagebuf``): 32-bit words, most significant first, comma-joined."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    words = max(1, (max(cpus, default=0) // 32) + 1)
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))
