"""The PCIe tree from sysfs: each function's host bridge and the bridges above it, read from the directory nesting.

``<sysfs>/bus/pci/devices/<address>`` is a symlink to ``<sysfs>/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/...``:
the kernel (drivers/pci/probe.c) makes each function a child of the bridge whose secondary bus it sits on, and
each root bus a child of its ``pciDDDD:BB`` host bridge, so the path IS the function's place in the tree. Nothing
else is read but the function's own ``class``, ``vendor``, ``device`` and ``numa_node``. A ``class`` or
``numa_node`` that cannot be read (a FIFO, a link to a device) is unknown (``""``, None: never ``-1``), with
one problem line; the function is still listed.

Bounded, for a sick or hostile tree (the tree may be a saved one under ``--root``): at most ``MAX_FUNCTIONS``
functions and ``MAX_DEPTH`` bridges above one; a link that loops, dangles (a device removed mid-read), or resolves
outside ``<sysfs>/devices`` is one problem line (a ``SourceError``) and the rest is still read. Plain file I/O:
call it in a thread from async code.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import replace

from devctl.model import ErrorKind, SourceError
from devctl.model.pci import normalize_pci_address
from devctl.model.pcie import PciFunction, PciTree, pci_class_of
from devctl.node.files import FileReadError, read_file
from devctl.node.pciids import database, hex_id, pci_names

PCI_DIR = "bus/pci/devices"
MAX_FUNCTIONS = 4096
MAX_DEPTH = 32
_ATTRIBUTE_LIMIT = 4096
_HOST_BRIDGE = re.compile(r"pci[0-9a-f]{4,8}:[0-9a-f]{2}")
_SOURCE = "pci-tree"


def read_pci_tree(
    sysfs: str, *, names: bool = True, pci_ids: str | None = None
) -> tuple[PciTree, tuple[SourceError, ...]]:
    """Every PCI function under ``sysfs`` with its place in the tree, and one ``SourceError`` per problem.

    ``names``: vendor and model names from the PCI IDs database at ``pci_ids`` (the system's when None).
    Never raises for what the tree holds: an unreadable ``bus/pci/devices`` is an empty tree and one error.
    """
    real_sysfs = os.path.realpath(sysfs)
    pci_dir = os.path.join(sysfs, PCI_DIR)
    errors: list[SourceError] = []
    entries = _list(pci_dir, errors)
    functions: list[PciFunction] = []
    for name in entries:
        function = _read_function(real_sysfs, pci_dir, name, errors)
        if function is not None:
            functions.append(function)
    functions.sort(key=lambda f: f.address)
    tree = PciTree(functions=tuple(functions))
    if names:
        tree = _named(tree, pci_ids if pci_ids is not None else database())
    return tree, tuple(errors)


def _list(pci_dir: str, errors: list[SourceError]) -> list[str]:
    """The first ``MAX_FUNCTIONS`` names of ``pci_dir``, sorted; one error when it cannot be listed or holds more."""
    names: list[str] = []
    try:
        with os.scandir(pci_dir) as it:
            for entry in it:
                if len(names) == MAX_FUNCTIONS:
                    errors.append(
                        SourceError(
                            _SOURCE,
                            f"{pci_dir}: more than {MAX_FUNCTIONS} PCI functions; the first {MAX_FUNCTIONS} read",
                            ErrorKind.TOO_LARGE,
                        )
                    )
                    break
                names.append(entry.name)
    except OSError as err:
        errors.append(SourceError(_SOURCE, f"cannot list {pci_dir}: {err.strerror or err}", ErrorKind.of_oserror(err)))
    return sorted(names)


def _problem(errors: list[SourceError], name: str, message: str, kind: ErrorKind) -> None:
    errors.append(SourceError(_SOURCE, f"PCI function {name}: {message}", kind, subject=name))


def _read_function(real_sysfs: str, pci_dir: str, name: str, errors: list[SourceError]) -> PciFunction | None:
    address = normalize_pci_address(name)
    if address is None or address != name:
        _problem(errors, name, "not a PCI address, left out", ErrorKind.MALFORMED)
        return None
    try:
        real = os.path.realpath(os.path.join(pci_dir, name), strict=True)
    except OSError as err:
        if err.errno == errno.ELOOP:
            _problem(errors, name, "its link loops, left out", ErrorKind.MALFORMED)
        elif isinstance(err, FileNotFoundError):
            _problem(errors, name, "vanished while read (its link leads nowhere), left out", ErrorKind.MISSING)
        else:
            _problem(errors, name, f"cannot resolve its link: {err.strerror or err}", ErrorKind.of_oserror(err))
        return None
    place = _place(real_sysfs, real, address)
    if isinstance(place, str):
        kind = ErrorKind.TOO_LARGE if place.startswith("more than") else ErrorKind.MALFORMED
        _problem(errors, name, place + ", left out", kind)
        return None
    host_bridge, bridges = place
    attributes = _attributes(real)
    if attributes is None:
        _problem(errors, name, "vanished while read, left out", ErrorKind.MISSING)
        return None
    class_id, vendor_id, device_id, numa = attributes
    if not class_id:  # still shown: a function of unknown class may be a GPU
        _problem(errors, name, "its class cannot be read: class unknown", ErrorKind.MALFORMED)
    if numa is None and os.path.lexists(os.path.join(real, "numa_node")):
        _problem(errors, name, "its numa_node cannot be read: NUMA node unknown", ErrorKind.MALFORMED)
    return PciFunction(
        address=address,
        pci_class=pci_class_of(class_id),
        class_id=class_id,
        vendor_id=vendor_id,
        device_id=device_id,
        host_bridge=host_bridge,
        bridges=bridges,
        numa_node=numa,
    )


def _place(real_sysfs: str, real: str, address: str) -> tuple[str, tuple[str, ...]] | str:
    """(host bridge, bridges nearest first) of the function at resolved path ``real``, or why it has none."""
    devices = os.path.join(real_sysfs, "devices") + os.sep
    if not real.startswith(devices):
        return "its link leads outside the sysfs tree"
    parts = real[len(devices) :].split(os.sep)
    if len(parts) < 2 or not _HOST_BRIDGE.fullmatch(parts[0]):
        return "its link does not lead under a PCI host bridge"
    chain = parts[1:]
    if len(chain) - 1 > MAX_DEPTH:
        return f"more than {MAX_DEPTH} bridges above it"
    if chain[-1] != address:
        return f"its link leads to another function ({chain[-1]})"
    if any(normalize_pci_address(part) != part for part in chain[:-1]):
        return "its link leads through a directory that is not a PCI bridge"
    return parts[0], tuple(reversed(chain[:-1]))


def _attributes(real: str) -> tuple[str, str, str, int | None] | None:
    """(class, vendor, device, numa_node) of the function directory ``real``; None when it has gone."""
    values = [_attribute(real, attr) for attr in ("class", "vendor", "device", "numa_node")]
    if values[0] is None and not os.path.isdir(real):
        return None
    text = values[3]
    try:
        numa = int(text) if text is not None else None
    except ValueError:
        numa = None
    return values[0] or "", (values[1] or "").lower(), (values[2] or "").lower(), numa


def _attribute(directory: str, attribute: str) -> str | None:
    try:
        return read_file(os.path.join(directory, attribute), _ATTRIBUTE_LIMIT, inside=directory).decode("ascii").strip()
    except (FileReadError, ValueError):
        return None


def _named(tree: PciTree, pci_ids: str | None) -> PciTree:
    """``tree`` with vendor and model names from the PCI IDs database at ``pci_ids``; unchanged without one."""
    wanted = [(f.vendor_id, f.device_id) for f in tree.functions if f.vendor_id and f.device_id]
    found = pci_names(wanted, pci_ids)
    if not found:
        return tree
    named = []
    for f in tree.functions:
        vendor, model = found.get((hex_id(f.vendor_id), hex_id(f.device_id)), (None, None))
        named.append(replace(f, vendor=vendor, model=model) if vendor or model else f)
    return PciTree(functions=tuple(named))
