"""Hardware behind the simulated DRA devices: PCI functions and ``/sys/dev/char/<major>:<minor>`` links.

On a real host a CDI device node leads to hardware: ``stat(hostPath)`` gives
major:minor, ``/sys/dev/char/<major>:<minor>`` links into the device's PCI
function (``…/devices/pci0000:3b/0000:3b:00.0/…``), whose ``numa_node`` says
where it sits. The simulator writes the same for each DRA device of the
scenario (its character device numbers are the in-process driver's: the
driver's major, the device's index as minor), so a DRA claim's CDI names
resolve to a PCI address and a NUMA node as on a real host.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path

from devctl.model import PciDevice
from devctl.sim.scenario_dra import DraScenario

CHAR_DIR = "dev/char"
FIRST_BUS = 0xD0  # simulated DRA functions sit on buses the scenario's own devices rarely use
# A simulated accelerator (3D controller class); the vendor is PCI-SIG's reserved test ID.
VENDOR, DEVICE, CLASS = "0x0001", "0x0d7a", "0x030200"


def _addresses(taken: Collection[str]) -> Iterator[str]:
    for bus in range(FIRST_BUS, 0x100):
        for slot in range(32):
            address = f"0000:{bus:02x}:{slot:02x}.0"
            if address not in taken:
                yield address


def dra_pci_devices(dra: DraScenario, taken: Collection[str]) -> dict[tuple[int, int], PciDevice]:
    """A PCI function for each DRA device, keyed by its (major, minor); addresses not in ``taken``."""
    free = _addresses(taken)
    out: dict[tuple[int, int], PciDevice] = {}
    for spec in dra.drivers:
        driver = spec.driver.split(".", 1)[0]
        for minor, device in enumerate(spec.devices):
            numa = device.numa_nodes[0] if device.numa_nodes else -1
            out[(spec.major, minor)] = PciDevice(next(free), numa, VENDOR, DEVICE, CLASS, driver)
    return out


def write_char_links(sysfs: Path, devices: dict[tuple[int, int], PciDevice]) -> None:
    """``<sysfs>/dev/char/<major>:<minor>`` → the PCI function, relative as the kernel's links are."""
    directory = Path(sysfs) / CHAR_DIR
    directory.mkdir(parents=True, exist_ok=True)
    for (major, minor), pci in devices.items():
        domain_bus = pci.address.rsplit(":", 1)[0]
        target = Path(sysfs) / "devices" / f"pci{domain_bus}" / pci.address
        link = directory / f"{major}:{minor}"
        relative = os.path.relpath(target, directory)
        if link.is_symlink() and os.readlink(link) == relative:
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(relative)
