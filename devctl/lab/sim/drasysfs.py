"""Hardware behind the simulated devices: PCI functions and ``/sys/dev/char/<major>:<minor>`` links.

On a real host a CDI device node leads to hardware: ``stat(hostPath)`` gives
major:minor, ``/sys/dev/char/<major>:<minor>`` links into the device's PCI
function (``…/devices/pci0000:3b/0000:3b:00.0/…``), whose ``numa_node`` says
where it sits. The simulator writes the same for each DRA device of the
scenario (its character device numbers are the in-process driver's: the
driver's major, the device's index as minor), so a DRA claim's CDI names
resolve to a PCI address and a NUMA node as on a real host.

Device-plugin devices whose Allocate template gives device nodes or CDI names
get the same: each such resource a major of that range (derived from its
name as a DRA driver's, moved to the next free one if a DRA driver or an
earlier resource holds it), each device its index in the resource's device
list as minor. A device whose ID is a PCI function of the scenario (an SR-IOV
VF) links to that function; any other gets a new one on the simulated buses. A resource whose devices are
all the scenario's NVIDIA GPUs gets none: ``nvidia.gpus`` links them (195:N) to the scenario's own functions.

Each NUMA node has buses (each its own host bridge, ``pci0000:d0``) that hold its devices alone, as on a real
host, where a host bridge belongs to one socket: node 0 from ``0000:d0``, node 1 from ``0000:e0``, node 2 from
``0000:f0``, node 3 from ``0001:d0`` and so on. A device with no NUMA node gets no function and no link: where
it sits is unknown, and a bridge mixing nodes (or one left unplaced among them) is what no host has.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

from devctl.lab.plugin.dra import default_major
from devctl.lab.plugin.spec import PluginSpec
from devctl.lab.sim.nvidia import base, gpus
from devctl.lab.sim.scenario_dra import DraScenario
from devctl.lab.sim.sysfs import function_dir
from devctl.model import PciDevice

CHAR_DIR = "dev/char"
FIRST_BUS = 0xD0  # simulated functions sit on buses the scenario's own devices rarely use
BUSES_PER_NODE = 0x10  # node n's buses: FIRST_BUS + 0x10 * (n % 3) on, in domain n // 3
# A simulated accelerator (3D controller class); a made-up vendor ID that pci.ids (2023-04-11) leaves unassigned.
VENDOR, DEVICE, CLASS = "0x1dea", "0x0d7a", "0x030200"
LOCAL_MAJORS = range(234, 255)  # Linux's character majors for local use (Documentation/admin-guide/devices.txt)


def _addresses(node: int, taken: Collection[str]) -> Iterator[str]:
    """Free function addresses on NUMA node ``node``'s buses (see the module's docstring)."""
    domain, first = node // 3, FIRST_BUS + BUSES_PER_NODE * (node % 3)
    for bus in range(first, first + BUSES_PER_NODE):
        for slot in range(32):
            address = f"{domain:04x}:{bus:02x}:{slot:02x}.0"
            if address not in taken:
                yield address


class _Buses:
    """Hands out function addresses per NUMA node, skipping the scenario's own."""

    def __init__(self, taken: Collection[str]) -> None:
        self._taken = taken
        self._free: dict[int, Iterator[str]] = {}

    def function(self, numa_nodes: Sequence[int], driver: str) -> PciDevice | None:
        """A new function on the device's first NUMA node; None without one, or when that node's buses are full."""
        if not numa_nodes or numa_nodes[0] < 0:
            return None
        node = numa_nodes[0]
        free = self._free.setdefault(node, _addresses(node, self._taken))
        address = next(free, None)
        return None if address is None else PciDevice(address, node, VENDOR, DEVICE, CLASS, driver)


def char_devices(
    dra: DraScenario, resources: Sequence[PluginSpec], scenario_pci: Sequence[PciDevice]
) -> dict[tuple[int, int], PciDevice]:
    """The PCI function behind each simulated character device, keyed by its (major, minor).

    DRA devices first, then device-plugin devices (see the module's docstring);
    functions the scenario lists are reused, the others get free addresses on
    their NUMA node's buses; a device without a NUMA node gets none.
    """
    listed = {d.address: d for d in scenario_pci}
    buses = _Buses(listed)
    out: dict[tuple[int, int], PciDevice] = {}
    for spec in dra.drivers:
        driver = spec.driver.split(".", 1)[0]
        for minor, device in enumerate(spec.devices):
            if function := buses.function(device.numa_nodes, driver):
                out[(spec.major, minor)] = function
    majors = {spec.major for spec in dra.drivers}
    on_gpus = _on_gpus(resources, scenario_pci)
    for resource in resources:
        if not (resource.allocate.devices or resource.allocate.cdi_devices) or resource.resource in on_gpus:
            continue  # its devices are the scenario's own NVIDIA functions (lab/sim/nvidia.py)
        major = _free_major(default_major(resource.resource), majors)
        if major is None:
            break  # every local major is taken: the rest get no links
        majors.add(major)
        driver = resource.resource.rsplit("/", 1)[-1]
        for minor, plugin_device in enumerate(resource.devices):
            pci = listed.get(plugin_device.id) or buses.function(plugin_device.numa_nodes, driver)
            if pci is not None:
                out[(major, minor)] = pci
    return out


def _on_gpus(resources: Sequence[PluginSpec], scenario_pci: Sequence[PciDevice]) -> set[str]:
    """The resources every device of which is one of the scenario's NVIDIA GPUs (``nvidia.gpus``)."""
    taken: dict[str, set[str]] = {}
    for g in gpus(resources, scenario_pci):
        taken.setdefault(g.resource, set()).add(g.id)
    return {
        r.resource for r in resources if r.devices and all(base(d.id) in taken.get(r.resource, ()) for d in r.devices)
    }


def _free_major(wanted: int, taken: Collection[int]) -> int | None:
    """``wanted``, or the next major of LOCAL_MAJORS (wrapping round) that is not ``taken``."""
    start = LOCAL_MAJORS.index(wanted)
    for i in range(len(LOCAL_MAJORS)):
        major = LOCAL_MAJORS[(start + i) % len(LOCAL_MAJORS)]
        if major not in taken:
            return major
    return None


def write_char_links(sysfs: Path, devices: dict[tuple[int, int], PciDevice]) -> None:
    """``<sysfs>/dev/char/<major>:<minor>`` → the PCI function, relative as the kernel's links are."""
    directory = Path(sysfs) / CHAR_DIR
    directory.mkdir(parents=True, exist_ok=True)
    for (major, minor), pci in devices.items():
        target = function_dir(Path(sysfs), pci)  # under its bridges when the scenario's PCIe tree places it
        link = directory / f"{major}:{minor}"
        relative = os.path.relpath(target, directory)
        if link.is_symlink() and os.readlink(link) == relative:
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(relative)
