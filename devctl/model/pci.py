"""PCI addresses as the kernel spells them: a pure function, for sysfs (node) and the views (analyze) alike."""

from __future__ import annotations

import re

_PCI_ADDRESS = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


def normalize_pci_address(text: str) -> str | None:
    """The kernel's spelling of a PCI address, or None if ``text`` is not one.

    Device plugins and tools write the same slot differently: nvidia-smi says
    ``00000000:3B:00.0``, lspci ``3b:00.0``, sysfs ``0000:3b:00.0``.
    """
    match = _PCI_ADDRESS.fullmatch(text.strip())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus.lower()}:{slot.lower()}.{function}"
