"""What a kernel line says of a device (devctl.analyze.kernel): kind, PCI address, Xid and its meaning.

The lines are our own, written in the shapes the NVIDIA driver, the PCIe AER driver and other
drivers print (dev_printk's ``<driver> <address>: message``).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from devctl.analyze.kernel import XID_MEANINGS, describe, recognise, xid_meaning
from devctl.model.kernel import DeviceMention, KernelRecord

RECOGNISED = [
    # NVIDIA Xid: the line names domain:bus:device, the GPU's function 0 is meant
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.", "xid", "0000:3b:00.0", 79),
    (
        "NVRM: Xid (PCI:0000:B1:00): 48, pid=77, name=train, An uncorrectable double bit error",
        "xid",
        "0000:b1:00.0",
        48,
    ),
    ("NVRM: Xid (0000:01:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1)", "xid", "0000:01:00.0", 13),
    ("NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x1", "xid", "0000:18:00.0", 154),
    ("NVRM: Xid (PCI:0000:18:00): 999, something new", "xid", "0000:18:00.0", 999),
    # fallen off the bus without an Xid number
    ("NVRM: GPU at 0000:65:00.0 has fallen off the bus.", "fallen-off-bus", "0000:65:00.0", None),
    ("NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.", "fallen-off-bus", "0000:2b:00.0", None),
    ("NVRM: GPU at PCI:0000:3b:00 has fallen off the bus.", "fallen-off-bus", "0000:3b:00.0", None),
    # AER: the device the error concerns, not the port that reports it
    ("pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0", "aer", "0000:3b:00.0", None),
    ("pcieport 0000:00:03.0: AER: Corrected error message received from 0000:3b:00.0", "aer", "0000:3b:00.0", None),
    (
        "pcieport 0000:5d:02.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:5e:00.1",
        "aer",
        "0000:5e:00.1",
        None,
    ),
    ("pcieport 0001:00:03.0: AER: Corrected error received: id=3b01", "aer", "0001:3b:00.1", None),  # old kernels
    (
        "0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
        "aer",
        "0000:3b:00.0",
        None,
    ),
    (
        "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)",
        "aer",
        "0000:3b:00.0",
        None,
    ),
    # any driver line naming a PCI address
    ("mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: ACCESS_REG(0x805) op_mod(0x1) failed", "pci", "0000:5e:00.0", None),
    ("mlx5_core 0000:5e:00.1 ens1f1np1: Link down", "pci", "0000:5e:00.1", None),
    ("amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!", "pci", "0000:c1:00.0", None),
    ("nvidia 0000:3b:00.0: enabling device (0000 -> 0003)", "pci", "0000:3b:00.0", None),
    ("NVRM: GPU at PCI:0000:3b:00: GPU-8c9f6a1e-2b3d-4e5f-8a7b-1c2d3e4f5a6b", "pci", "0000:3b:00.0", None),
    ("pcieport 0000:00:01.0: AER: enabled with IRQ 122", "pci", "0000:00:01.0", None),  # the port, and no error
]


@pytest.mark.parametrize(("text", "kind", "pci", "xid"), RECOGNISED)
def test_line_is_recognised(text: str, kind: str, pci: str, xid: int | None) -> None:
    mention = recognise(text)
    assert mention is not None
    assert (mention.kind, mention.pci, mention.xid) == (kind, pci, xid)


NOT_RECOGNISED = [
    "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13)",
    "pci_bus 0000:00: root bus resource [bus 00-7e]",  # a bus, not a device
    "ACPI: PCI Root Bridge [PC00] (domain 0000 [bus 00-7e])",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024",
    "NVRM: Xid (PCI:0000:3b:00): not a number",
    "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
    "nvme nvme0: 32/0/0 default/read/poll queues",
    'audit: type=1400 audit(1717000000.123:45): apparmor="STATUS" at 10:20:30.5',
    "acpi PNP0A08:00: _OSC: OS now controls [PCIeHotplug SHPCHotplug PME AER PCIeCapability LTR]",
    "",
]


@pytest.mark.parametrize("text", NOT_RECOGNISED)
def test_line_is_not_recognised(text: str) -> None:
    assert recognise(text) is None


def test_xid_meanings_are_ours_and_unknown_is_no_guess() -> None:
    for xid in (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 154):
        assert XID_MEANINGS[xid], xid
    assert xid_meaning(79) == "GPU has fallen off the bus"
    assert xid_meaning(999) is None
    assert recognise("NVRM: Xid (PCI:0000:18:00): 999, something new") == DeviceMention(
        kind="xid", pci="0000:18:00.0", xid=999, meaning=None, driver="nvidia"
    )


def test_what_a_person_reads() -> None:
    """cli.md's ``what``: ``Xid 79: GPU has fallen off the bus``; an unknown number is only ``Xid N``."""
    assert recognise("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.").what == (  # type: ignore[union-attr]
        "Xid 79: GPU has fallen off the bus"
    )
    assert recognise("NVRM: Xid (PCI:0000:3b:00): 999, x").what == "Xid 999"  # type: ignore[union-attr]
    aer = recognise("pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0")
    assert aer is not None and aer.what == "PCIe AER: uncorrected (fatal) error" and aer.driver == "pcieport"
    bus = recognise("0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)")
    assert bus is not None and bus.what == "PCIe bus error: corrected, physical layer"


def test_gpu_uuid_is_kept() -> None:
    mention = recognise("NVRM: GPU at PCI:0000:3b:00: GPU-8c9f6a1e-2b3d-4e5f-8a7b-1c2d3e4f5a6b")
    assert mention is not None and mention.gpu_uuid == "GPU-8c9f6a1e-2b3d-4e5f-8a7b-1c2d3e4f5a6b"


def record(text: str, fields: tuple[tuple[str, str], ...] = ()) -> KernelRecord:
    return KernelRecord(
        seq=1, usec=1, time=datetime(2026, 3, 1, tzinfo=timezone.utc), level=3, facility=0, text=text, fields=fields
    )


def test_device_field_names_the_device_the_text_does_not() -> None:
    described = describe(record("link is down", (("SUBSYSTEM", "pci"), ("DEVICE", "+pci:0000:5e:00.0"))))
    assert described.device is not None and (described.device.kind, described.device.pci) == ("pci", "0000:5e:00.0")
    # A DEVICE that is no PCI device (a block device, a net interface's index) names nothing
    assert describe(record("I/O error", (("DEVICE", "b8:0"),))).device is None


def test_text_address_wins_over_device_field() -> None:
    described = describe(
        record("pcieport 0000:00:03.0: AER: Corrected error received: 0000:3b:00.0", (("DEVICE", "+pci:0000:00:03.0"),))
    )
    assert described.device is not None and described.device.pci == "0000:3b:00.0"


def test_unrecognised_record_is_returned_unchanged() -> None:
    plain = record("systemd[1]: Started foo.service.")
    assert describe(plain) is plain


def test_a_long_driver_message_is_cut_in_meaning() -> None:
    mention = recognise("mlx5_core 0000:5e:00.0: " + "z" * 5000)
    assert mention is not None and mention.meaning is not None and len(mention.meaning) == 200
