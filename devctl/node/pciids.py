"""Vendor and device names from the PCI IDs database, for hosts (and simulated trees) udev does not name.

udev's hwdb names the devices of the real ``/sys`` from the same database; a
simulated sysfs, a container without ``/run/udev`` or a host without pyudev
still has the numbers, and ``pci.ids`` turns them into the names ``lspci``
prints. The file is several megabytes: only the wanted vendors and devices are
kept, and the scan stops at the class section that ends the device list.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

# Where distributions install it: Debian and Ubuntu (pciutils) the first, Fedora and RHEL (hwdata) the second.
PCI_IDS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids")

# (vendor, device) as four lower-case hex digits each -> (vendor name, device name)
Names = dict[tuple[str, str], tuple[str | None, str | None]]


def hex_id(value: str) -> str:
    """``0x10DE`` / ``10de`` -> ``10de``: how the database writes an ID."""
    value = value.strip().lower()
    return value[2:] if value.startswith("0x") else value


def database(paths: Iterable[str] = PCI_IDS) -> str | None:
    """The first PCI IDs file present, or None."""
    return next((p for p in paths if os.path.isfile(p)), None)


def pci_names(wanted: Iterable[tuple[str, str]], path: str | None) -> Names:
    """The names of the ``wanted`` (vendor, device) pairs found in the database at ``path``; {} without one.

    A vendor the database knows names its devices even where the device is
    not listed (the device name is then None), as lspci prints them.
    """
    want = {(hex_id(v), hex_id(d)) for v, d in wanted}
    if not want or path is None:
        return {}
    vendors = {v for v, _ in want}
    found: Names = {}
    vendor = ""
    vendor_name: str | None = None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line or line[0] == "#" or line == "\n":
                    continue
                if line[0] != "\t":
                    if line.startswith("C "):
                        break  # the device classes follow the last vendor
                    vendor, _, name = line.rstrip("\n").partition("  ")
                    vendor_name = name.strip() if vendor in vendors else None
                    if vendor_name is not None:
                        for v, d in want:
                            if v == vendor:
                                found.setdefault((v, d), (vendor_name, None))
                elif vendor_name is not None and line[1] != "\t":
                    device, _, name = line.strip().partition("  ")
                    if (vendor, device) in want:
                        found[(vendor, device)] = (vendor_name, name.strip())
    except OSError:  # a nicety, as udev's names: the IDs are shown without names
        return {}
    return found
