"""Review fixes (history, item 4): ``devctl events``' default table shows the holder and never cuts WHAT.

The events are our own, shaped as the default simulated node's (an Xid on the time-sliced GPU 0000:cc:00.0
held by chat/bot-0 and chat/bot-1, a replica's flip).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.render.grid import TableStyle
from devctl.render.history import events_table, holder_cell

T0 = datetime(2026, 12, 3, 14, 36, 38, tzinfo=timezone.utc)
BOTS = (Holder("chat", "bot-0", "bot"), Holder("chat", "bot-0", "sidecar"), Holder("chat", "bot-1", "bot"))
XID = NodeEvent(T0, EventSource.KERNEL, "xid", "nvidia.com/gpu.shared", "GPU-8::0", "0000:cc:00.0", BOTS,
                "Xid 79: GPU has fallen off the bus")  # fmt: skip
FLIP = NodeEvent(T0, EventSource.PLUGIN, "health", "nvidia.com/gpu.shared", "GPU-8::0", "0000:cc:00.0", BOTS[:1],
                 "Healthy -> Unhealthy")  # fmt: skip
SAYS = "GPU at PCI:0000:d0:03: GPU-3c1d9a2e-5b7f-4e08-9a61-2f4c8d0b7e13 and the driver says more "
LONG = NodeEvent(T0, EventSource.KERNEL, "fallen-off-bus", None, None, "0000:d0:03.0", (), SAYS * 2)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_holder_is_the_first_pod_and_how_many_more() -> None:
    assert holder_cell(XID) == "chat/bot-0 +1"  # two containers of bot-0 are one pod
    assert holder_cell(FLIP) == "chat/bot-0"
    assert holder_cell(LONG) == ""


def test_default_table_has_a_holder_column_and_whole_what_within_80_columns() -> None:
    out = events_table([XID, FLIP, LONG], TableStyle())
    lines = out.splitlines()
    # A row that leaves WHAT no room puts it under SOURCE, its header too (the second header line).
    assert lines[0].split() + lines[1].split() == ["TIME", "SOURCE", "KIND", "DEVICE/PCI", "HOLDER", "WHAT"]
    assert all(len(line) <= 80 for line in lines), out
    assert "chat/bot-0 +1" in out
    for event in (XID, FLIP, LONG):
        assert _flat(event.what) in _flat(out), out  # wrapped, never cut in its middle


def test_what_from_outside_is_escaped_before_it_is_wrapped() -> None:
    hostile = NodeEvent(T0, EventSource.KERNEL, "pci", what="NVRM: \x1b[2Jcleared\nforged row")
    out = events_table([hostile], TableStyle())
    assert "\x1b" not in out and "\nforged" not in out


def test_wide_keeps_every_holder_and_container() -> None:
    out = events_table([XID], TableStyle(wide=True))
    assert "HOLDERS" in out.splitlines()[0] and "chat/bot-0/bot,chat/bot-0/sidecar,chat/bot-1/bot" in out


def test_a_dra_device_is_shown_whole_with_its_address_and_holder_at_80_columns() -> None:
    """The default simulated node's DRA GPU that fell off the bus: `sim-node/gpu-3 (0000:e0:01.0)` with its
    holder and a long kind leaves WHAT no room, so WHAT goes below and the device is not cut in its middle
    (which left `sim-node/gp…000:e0:01.0)`, no device name); the pool goes first when even that is too wide."""
    held = (Holder("ml", "train-1", "trainer"),)
    fell = NodeEvent(T0, EventSource.KERNEL, "fallen-off-bus", None, "sim-node/gpu-3", "0000:e0:01.0", held,
                     "GPU has fallen off the bus")  # fmt: skip
    lines = events_table([fell, XID], TableStyle()).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert [line.split() for line in lines[:2]] == [["TIME", "SOURCE", "KIND", "DEVICE/PCI", "HOLDER"], ["WHAT"]]
    assert "gpu-3 (0000:e0:01.0)" in lines[2] and "ml/train-1" in lines[2] and "…" not in lines[2], lines
    assert lines[3].strip() == "GPU has fallen off the bus"
    roomy = NodeEvent(T0, EventSource.KERNEL, "xid", None, "a/gpu-3", "0000:e0:01.0", held, "Xid 79")
    assert "a/gpu-3 (0000:e0:01.0)" in events_table([roomy], TableStyle())  # the pool stays where it fits


def test_holders_that_could_not_be_established_read_unknown_not_free() -> None:
    """A live kernel line older than every pod holding its device now: who held it then is unknown ('?'), which
    the table must not show as a free device (an empty HOLDER)."""
    unknown = NodeEvent(T0, EventSource.KERNEL, "xid", "nvidia.com/gpu", "GPU-0", "0000:17:00.0", (), "Xid 79",
                        holders_known=False)  # fmt: skip
    free = replace(unknown, holders_known=None)
    assert holder_cell(unknown) == "?" and holder_cell(free) == ""
    assert events_table([unknown], TableStyle(wide=True)).splitlines()[1].split()[-1] == "?"


def test_the_pool_goes_first_also_when_the_holder_header_is_wider_than_its_cells() -> None:
    """A hung runtime: the holder reads '?', one character under HOLDER's six; the room left for the device is
    measured with the header, so `gpu-3 (0000:e0:01.0)` shows whole rather than cut to `sim-node/gpu-…`."""
    unknown = NodeEvent(T0, EventSource.KERNEL, "fallen-off-bus", None, "sim-node/gpu-3", "0000:e0:01.0", (),
                        "GPU has fallen off the bus", holders_known=False)  # fmt: skip
    lines = events_table([unknown], TableStyle()).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert "gpu-3 (0000:e0:01.0)" in lines[2] and "…" not in lines[2] and lines[2].rstrip().endswith("?"), lines
