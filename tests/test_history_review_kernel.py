"""Review fixes (history, item 3): the NVRM lines the default simulated node plants read as the line says.

Our own lines, in the shapes the NVIDIA driver prints (``NVRM: GPU at PCI:<d:b:d>: ...``).
"""

from __future__ import annotations

from devctl.analyze.kernel import recognise
from devctl.model.kernel import FALLEN_OFF_BUS, PCI


def test_fallen_off_bus_with_a_colon_after_the_address_names_that_address() -> None:
    m = recognise("NVRM: GPU at PCI:0000:d0:03: GPU has fallen off the bus.")
    assert m is not None
    assert (m.kind, m.pci, m.driver) == (FALLEN_OFF_BUS, "0000:d0:03.0", "nvidia")


def test_an_address_followed_by_more_hex_is_not_taken_short() -> None:
    m = recognise("NVRM: GPU 0000:d0:03:7 has fallen off the bus.")
    assert m is not None and m.pci is None  # not a domain:bus:device we can tell: unknown, not guessed


def test_gpu_at_line_says_what_it_says() -> None:
    m = recognise("NVRM: GPU at PCI:0000:d0:03: GPU-3c1d0000-1111-2222-3333-444455556666")
    assert m is not None and m.kind == PCI
    assert m.what == "GPU at PCI:0000:d0:03: GPU-3c1d0000-1111-2222-3333-444455556666"
    assert m.what != "pci"
