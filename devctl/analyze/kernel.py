"""What a kernel log line says of a device: pure functions over ``KernelRecord`` values.

Recognised, first match wins:

- ``xid``: NVIDIA's ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`` (older drivers write no ``PCI:``).
  The line names domain:bus:device without a function: the GPU's function 0 is meant.
- ``fallen-off-bus``: ``GPU has fallen off the bus`` on a line without an Xid number
  (``NVRM: GPU at 0000:3b:00.0 has fallen off the bus.``).
- ``aer``: PCIe Advanced Error Reporting. ``pcieport 0000:00:03.0: AER: ... error received: 0000:3b:00.0``
  and ``... error message received from 0000:3b:00.0`` concern the device after ``received``/``from``,
  not the port that reports it; ``received: id=3b00`` (kernels before 4.x) is that device's bus and devfn,
  in the port's domain. ``0000:3b:00.0: PCIe Bus Error: severity=...`` and ``<driver> <addr>: AER: ...``
  concern the device the line starts with.
- ``pci``: ``NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`` (the UUID kept), any driver line
  ``<driver> <address>[ <name>]: ...`` (``mlx5_core 0000:5e:00.0: ...``), and any record whose dictionary
  says ``DEVICE=+pci:<address>`` when its text names none.

The meanings of Xids are our own short words for NVIDIA's published catalogue; a number not in the
table reads ``Xid N`` with no meaning rather than a guess.
"""

from __future__ import annotations

import re
from dataclasses import replace

from devctl.model.kernel import AER, FALLEN_OFF_BUS, PCI, XID, DeviceMention, KernelRecord
from devctl.model.pci import normalize_pci_address

XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing (a channel timed out)",
    13: "graphics engine exception (usually the application: an illegal instruction or address)",
    31: "GPU memory page fault (usually the application touched an address it does not own)",
    32: "invalid or corrupted push buffer stream (a bad command stream, sometimes PCIe trouble)",
    38: "driver firmware error",
    43: "GPU stopped processing (a channel was reset; usually the application)",
    45: "preemptive cleanup after earlier errors (the process's channels were torn down)",
    46: "GPU stopped processing",
    48: "double-bit ECC error (uncorrectable memory error)",
    61: "internal micro-controller breakpoint or warning",
    62: "internal micro-controller halted",
    63: "ECC page retirement or row remapping recorded (takes effect after a GPU reset)",
    64: "ECC page retirement or row remapping could not be recorded",
    68: "video decoder (NVDEC) exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (only the applications using that memory are hit)",
    95: "uncontained ECC error (every application on the GPU is hit; reset the GPU)",
    119: "GSP RPC timeout (the GPU's system processor did not answer)",
    120: "GSP error (the GPU's system processor reported an error)",
    154: "GPU recovery action changed (a reset or a reboot is needed)",
}

_HEX = "[0-9a-fA-F]"
_BDF = rf"{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}\.[0-7]"  # domain:bus:device.function, the domain required
_BD = rf"{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}"  # domain:bus:device, as NVRM writes it (no function)
_XID = re.compile(rf"NVRM: Xid \((?:PCI:)?({_BD})(?:\.([0-7]))?\): (\d+)\b")
_GPU_AT = re.compile(rf"NVRM: GPU at (?:PCI:)?({_BD})(?:\.([0-7]))?:? (GPU-[0-9a-fA-F-]+)")
_FALLEN = re.compile(r"fallen off the bus", re.IGNORECASE)
_DRIVER_LINE = re.compile(rf"^([A-Za-z0-9_.-]+) ({_BDF})(?=[: ])(?: [^:]*)?: ?(.*)$")
_NVRM_GPU = re.compile(rf"^NVRM: GPU (?:at )?(?:PCI:)?({_BDF})\b")
_BARE = re.compile(rf"^({_BDF}): (.*)$")  # "0000:3b:00.0: PCIe Bus Error: ..." (dev_printk without a driver)
_ANY_BDF = re.compile(rf"(?<![0-9a-fA-F:])({_BDF})(?![0-9a-fA-F])")
_AER_SOURCE = re.compile(rf"AER: .*?(?:received|from):? (?:({_BDF})|id=({_HEX}{{4}}))\b")
_SEVERITY = re.compile(r"(Uncorrected \((?:Non-)?Fatal\)|Uncorrected|Corrected)(?: error)?", re.IGNORECASE)
_BUS_ERROR = re.compile(r"PCIe Bus Error: severity=([^,]+)(?:, type=([^,]+))?")
_DEVICE_FIELD = re.compile(rf"^\+pci:({_BDF})$")
_MAX_MEANING = 200


def xid_meaning(xid: int) -> str | None:
    """Our words for Xid ``xid``, ``None`` for a number we have none for."""
    return XID_MEANINGS.get(xid)


def recognise(text: str, device_field: str | None = None) -> DeviceMention | None:
    """What the line ``text`` says of a device, ``None`` when it names none.

    ``device_field`` is the record's ``DEVICE`` dictionary value (``+pci:0000:3b:00.0``): the device
    when the text names no PCI address.
    """
    mention = _xid(text) or _aer(text) or _fallen(text) or _gpu_at(text) or _driver_line(text)
    if mention is not None:
        return mention
    if device_field is not None:
        match = _DEVICE_FIELD.match(device_field)
        if match is not None:
            return DeviceMention(kind=PCI, pci=normalize_pci_address(match.group(1)), meaning=_short(text))
    return None


def describe(record: KernelRecord) -> KernelRecord:
    """``record`` with ``device`` filled in (the same record when it names no device)."""
    mention = recognise(record.text, record.field("DEVICE"))
    if mention is not None and mention.pci is None:
        field = record.field("DEVICE")
        match = _DEVICE_FIELD.match(field) if field is not None else None
        if match is not None:
            mention = replace(mention, pci=normalize_pci_address(match.group(1)))
    return record if mention is None else replace(record, device=mention)


def _function0(address: str, function: str | None) -> str | None:
    return normalize_pci_address(f"{address}.{function or '0'}")


def _xid(text: str) -> DeviceMention | None:
    match = _XID.search(text)
    if match is None:
        return None
    address, function, number = match.groups()
    xid = int(number)
    return DeviceMention(
        kind=XID, pci=_function0(address, function), xid=xid, meaning=xid_meaning(xid), driver="nvidia"
    )


def _gpu_at(text: str) -> DeviceMention | None:
    match = _GPU_AT.search(text)
    if match is None:
        return None
    address, function, uuid = match.groups()
    meaning = _short(text.split("NVRM: ", 1)[-1])  # what the line says ("GPU at PCI:0000:3b:00: GPU-...")
    return DeviceMention(kind=PCI, pci=_function0(address, function), driver="nvidia", gpu_uuid=uuid, meaning=meaning)


def _fallen(text: str) -> DeviceMention | None:
    if _FALLEN.search(text) is None:
        return None
    match = _ANY_BDF.search(text)
    if match is None:  # "NVRM: GPU at PCI:0000:3b:00 ..." names no function
        # "0000:d0:03:" (a colon after it) is the address too; "0000:d0:03:1" is not
        short = re.search(rf"(?<![0-9a-fA-F])({_BD})(?![0-9a-fA-F.]|:[0-9a-fA-F])", text)
        pci = _function0(short.group(1), None) if short is not None else None
    else:
        pci = normalize_pci_address(match.group(1))
    driver = "nvidia" if text.startswith("NVRM:") else _driver_of(text)
    return DeviceMention(kind=FALLEN_OFF_BUS, pci=pci, meaning="GPU has fallen off the bus", driver=driver)


def _aer(text: str) -> DeviceMention | None:
    meaning = _aer_meaning(text)
    if meaning is None:
        return None
    source = _AER_SOURCE.search(text)
    own = _own_address(text)
    pci: str | None = None
    if source is not None and source.group(1):
        pci = normalize_pci_address(source.group(1))
    elif source is not None and own is not None:  # id=BBDF: bus, device and function in the port's domain
        bdf = int(source.group(2), 16)
        pci = normalize_pci_address(f"{own.split(':')[0]}:{bdf >> 8:02x}:{(bdf >> 3) & 0x1F:02x}.{bdf & 7}")
    elif own is not None:
        pci = normalize_pci_address(own)
    if pci is None:
        return None
    return DeviceMention(kind=AER, pci=pci, meaning=meaning, driver=_driver_of(text))


def _own_address(text: str) -> str | None:
    """The address a line starts with (``<driver> <address>:`` or ``<address>:``)."""
    match = _DRIVER_LINE.match(text)
    if match is not None:
        return match.group(2)
    bare = _BARE.match(text)
    return bare.group(1) if bare is not None else None


def _aer_meaning(text: str) -> str | None:
    """``PCIe AER: corrected error``, ``PCIe bus error: corrected, physical layer``; ``None``: not an error line."""
    bus = _BUS_ERROR.search(text)
    if bus is not None:
        severity, kind = bus.group(1).strip(), bus.group(2)
        return f"PCIe bus error: {severity.lower()}" + (f", {kind.strip().lower()}" if kind else "")
    if "AER:" not in text:
        return None
    after = text.split("AER:", 1)[1]
    severity = _SEVERITY.search(after)
    if severity is None or "error" not in after.lower():  # "AER: enabled with IRQ 122" is no error
        return None
    return f"PCIe AER: {severity.group(1).lower()} error"


def _driver_line(text: str) -> DeviceMention | None:
    match = _DRIVER_LINE.match(text)
    if match is not None:
        driver, address, message = match.groups()
        return DeviceMention(kind=PCI, pci=normalize_pci_address(address), driver=driver, meaning=_short(message))
    nvrm = _NVRM_GPU.match(text)
    if nvrm is not None:
        return DeviceMention(kind=PCI, pci=normalize_pci_address(nvrm.group(1)), driver="nvidia", meaning=_short(text))
    bare = _BARE.match(text)
    if bare is not None:
        return DeviceMention(kind=PCI, pci=normalize_pci_address(bare.group(1)), meaning=_short(bare.group(2)))
    return None


def _driver_of(text: str) -> str | None:
    match = _DRIVER_LINE.match(text)
    return match.group(1) if match is not None else None


def _short(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    return text if len(text) <= _MAX_MEANING else text[: _MAX_MEANING - 1] + "…"
