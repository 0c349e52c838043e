"""Review fixes (history, items 3 and 5): the TUI's Events view reads the journal again on `r`, and a kernel
line's RESOURCE cell is never the driver that wrote it.

Pilot key presses against the default simulated node; the journal is written through the core
(``core.history.open_journal``) under the node's root, where ``devctl record`` writes it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from test_tui_support import demo_app, sim, until, until_view  # noqa: F401  (sim: a fixture)

from devctl.core.history import default_journal, open_journal
from devctl.lab.sim.node import SimNode
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.tui import answers
from devctl.tui.widgets.table import RowTable

SHARED = "nvidia.com/gpu.shared"
PCI8 = "0000:cc:00.0"
BOTS = (Holder("chat", "bot-0", "bot"), Holder("chat", "bot-1", "bot"))


def xid(at: datetime, number: int) -> NodeEvent:
    return NodeEvent(at, EventSource.KERNEL, "xid", SHARED, "GPU-8::0", PCI8, BOTS, f"Xid {number}", driver="nvidia")


def append(node: SimNode, *events: NodeEvent) -> None:
    path = Path(default_journal(node.paths))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_journal(str(path)) as writer:
        for e in events:
            writer.append(e)


def test_new_events_are_only_those_the_view_did_not_hold() -> None:
    now = datetime.now(timezone.utc)
    old, new = xid(now - timedelta(minutes=2), 79), xid(now, 48)
    shown = answers.History((old,))
    assert answers.new_events(None, shown) == [old]
    assert answers.new_events(shown, answers.History((old, new))) == [new]
    assert answers.new_events(shown, shown) == []


def test_a_kernel_lines_resource_cell_is_not_the_driver_that_wrote_it() -> None:
    now = datetime.now(timezone.utc)
    unjoined = NodeEvent(now, EventSource.KERNEL, "fallen-off-bus", None, None, "0000:d0:03.0", (),
                         "GPU has fallen off the bus", driver="nvidia")  # fmt: skip
    assert answers.history_line(unjoined).resource == ""
    dra = NodeEvent(now, EventSource.KERNEL, "xid", None, "sim-node/gpu-3", "0000:d0:03.0", (), "Xid 79",
                    driver="gpu.example.com")  # fmt: skip
    assert answers.history_line(dra).resource == "gpu.example.com"
    assert answers.history_line(xid(now, 79)).resource == SHARED


async def test_r_reads_the_journal_again_and_adds_what_came_since(sim: SimNode) -> None:  # noqa: F811
    now = datetime.now(timezone.utc)
    append(sim, xid(now - timedelta(minutes=3), 79))
    app = demo_app(sim)
    async with app.run_test(size=(120, 30)) as pilot:
        await until_view(pilot)
        await pilot.press("5")
        log = app.screen.query_one("#events-table", RowTable)

        def xids() -> list[str]:
            return [str(r.cells[4]) for r in log.rows if r.cells[1] == "xid" and r.cells[3] == PCI8]

        await until(pilot, lambda: len(xids()) == 1, "the journal's Xid 79")
        # WHEN an Xid is recorded while the TUI runs, and `r` is pressed
        append(sim, xid(datetime.now(timezone.utc), 48))
        await pilot.press("r")
        # THEN it appears, and what was shown is not shown twice
        await until(pilot, lambda: any("Xid 48" in x for x in xids()), "the new Xid 48", 15)
        await pilot.pause(0.3)
        assert len(xids()) == 2 and sum("Xid 79" in x for x in xids()) == 1, xids()
