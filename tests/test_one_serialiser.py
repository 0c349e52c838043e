"""One serialiser for model objects: event lines, JSON documents and snapshot files all go through devctl.model.serial.

The TUI keeps a ``devctl watch -o json`` child (NodeFeed's docstring says why): the child writes
its lines with devctl.model.serial and the TUI reads them back with it, so nothing the child says is lost
on the way (a DRA driver's message, a notice's resource and socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from test_serial import full_snapshot

from devctl.core.events import (
    ADDED,
    DISCONNECTED,
    HEALTH,
    RECONNECTED,
    REMOVED,
    SNAPSHOT,
    TOPOLOGY,
    Notice,
    WatchEvent,
)
from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
from devctl.model import NodeSnapshot, serial
from devctl.model.serial import PlainError, from_json_line
from devctl.node.paths import resolve_paths
from devctl.render.events import json_line
from devctl.tui.feeds import event_from_json, notice_from_line, watch_in_child

# Times as the contract writes them: to the millisecond, in UTC (another offset is the same instant).
T = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
T_ELSEWHERE = T.astimezone(timezone(timedelta(hours=5, minutes=30)))

EVENTS = [
    WatchEvent(T, "nvidia.com/gpu", "/dp/nvidia.sock", SNAPSHOT, devices=8, healthy=7),
    WatchEvent(T, None, "/dp/unnamed.sock", SNAPSHOT, devices=0, healthy=0),  # resource unknown: null
    WatchEvent(T, "x.example/a", "/s", ADDED, "a-1", to="Healthy", devices=1, healthy=1),
    WatchEvent(T, "x.example/a", "/s", REMOVED, "a-1", from_="Unhealthy", devices=0, healthy=0),
    WatchEvent(T, "x.example/a", "/s", HEALTH, "a-1", "Healthy", "Unhealthy", 2, 1),
    WatchEvent(
        T_ELSEWHERE, "gpu.example.com", "/r/dra.sock", HEALTH, "pool/gpu-1", "Healthy", "Unhealthy", 2, 1, "ECC"
    ),
    WatchEvent(T, "x.example/a", "/s", TOPOLOGY, "a-1", "0,1", "none", 2, 2),
    WatchEvent(T, "x.example/a", "/s", DISCONNECTED, devices=2, healthy=2),
    WatchEvent(T, "x.example/a", None, RECONNECTED, devices=2, healthy=2),
    WatchEvent(T, "odd\x1b[2J\u202e", "/s\n", HEALTH, "dév\x85", "Healthy", "Bad\u2028", 1, 0, "line\nbreak ☃"),
]

NOTICES = [
    Notice(T, "no device plugin sockets in /dp yet; waiting for one"),
    Notice(T, "ListAndWatch: connection refused", "x.example/a", "/s"),
    Notice(
        T_ELSEWHERE, "gpu.example.com: NodeWatchResources stream ended \x1b]0;x\x07", "gpu.example.com", "/r/d.sock"
    ),
]


@pytest.mark.parametrize("item", EVENTS + NOTICES, ids=lambda i: f"{type(i).__name__}-{getattr(i, 'event', '')}")
def test_every_event_and_notice_goes_to_one_json_line_and_back_equal(item: WatchEvent | Notice) -> None:
    line = serial.json_line(item)
    # One line, ASCII only: a control, a bidi override or a line separator is escaped by JSON itself.
    assert "\n" not in line and line.isascii() and "\x1b" not in line
    assert from_json_line(type(item), line) == item
    assert from_json_line(type(item), line.encode()) == item  # as the TUI reads its child's pipe


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.event)
def test_the_tui_reads_back_every_key_the_watch_child_writes(event: WatchEvent) -> None:
    # The DRA driver's message was dropped here: the log showed no ' · ECC'.
    assert event_from_json(json_line(event).encode() + b"\n") == event


def test_event_lines_keep_the_contracts_bytes() -> None:
    # cli.md's keys, in its order, only those that apply; "from" for from_; the time in UTC to the millisecond.
    assert json_line(EVENTS[5]) == (
        '{"time": "2026-01-02T03:04:05.678Z", "resource": "gpu.example.com", "socket": "/r/dra.sock", '
        '"event": "health", "device": "pool/gpu-1", "from": "Healthy", "to": "Unhealthy", "devices": 2, '
        '"healthy": 1, "message": "ECC"}'
    )
    assert json_line(EVENTS[1]) == (
        '{"time": "2026-01-02T03:04:05.678Z", "resource": null, "socket": "/dp/unnamed.sock", '
        '"event": "snapshot", "devices": 0, "healthy": 0}'
    )


def test_a_full_snapshot_goes_to_a_json_line_and_back_equal() -> None:
    snap = full_snapshot()
    line = serial.json_line(snap)
    assert "\n" not in line
    assert from_json_line(NodeSnapshot, line) == snap
    # The same plain form as the snapshot file's (collect.write_snapshot) and the JSON documents'.
    assert json.loads(line) == serial.to_plain(snap)


def test_a_line_that_is_not_an_event_is_refused_with_where() -> None:
    good = json.loads(json_line(EVENTS[4]))
    for damage, where in (({"devices": "2"}, "devices"), ({"from": 1}, "from"), ({"time": "03:04"}, "time")):
        with pytest.raises(PlainError) as caught:
            from_json_line(WatchEvent, json.dumps({**good, **damage}))
        assert caught.value.path == where
    naive = {**good, "time": "2026-01-02T03:04:05.678"}  # no offset: which instant is unknown
    assert event_from_json(json.dumps(naive).encode()) is None
    assert event_from_json(b"\xff\xfe not utf-8\n") is None
    assert event_from_json(b"[1, 2]\n") is None


def test_a_child_stderr_line_that_is_not_json_is_still_a_notice() -> None:
    # A `devctl: ...` line (the child's fatal error) keeps its words, unescaped once for the log to escape again.
    notice = notice_from_line(b"devctl: x.example/zz: no such resource \\x1b\n")
    assert (notice.message, notice.resource, notice.socket) == ("x.example/zz: no such resource \x1b", None, None)
    assert notice_from_line(serial.json_line(NOTICES[1]).encode() + b"\n") == NOTICES[1]


# --- the TUI's child, end to end -------------------------------------------------------------------

DRIVER = "gpu.example.com"
SPEC = DraSpec(driver=DRIVER, pool="node-a", devices=(DraDevice("gpu-0", (0,)), DraDevice("gpu-1", (1,))))


@pytest.fixture
async def driver(short_root: Path) -> AsyncIterator[DraDriver]:
    async with DraDriver(SPEC, str(short_root / "var" / "lib" / "kubelet"), root=str(short_root)) as d:
        yield d


async def test_the_tui_child_brings_a_drivers_message_and_its_notices_whole(
    driver: DraDriver, short_root: Path
) -> None:
    # GIVEN the TUI's `devctl watch` child following a node with one DRA driver
    items = watch_in_child(resolve_paths(root=str(short_root), env={}), 5.0)

    async def next_item(kind: type, event: str | None = None) -> object:
        async for item in items:
            if isinstance(item, kind) and (event is None or getattr(item, "event", None) == event):
                return item
        raise AssertionError("the child ended")

    try:
        snapshot = await asyncio.wait_for(next_item(WatchEvent, SNAPSHOT), 20)
        assert isinstance(snapshot, WatchEvent) and snapshot.resource == DRIVER
        # WHEN a device goes bad with the driver's reason
        driver.set_health("gpu-1", "Unhealthy", "ECC errors")
        health = await asyncio.wait_for(next_item(WatchEvent, HEALTH), 20)
        # THEN the event the TUI gets carries the reason (it was dropped on the way back)
        assert isinstance(health, WatchEvent)
        assert (health.device, health.to, health.message) == ("node-a/gpu-1", "Unhealthy", "ECC errors")
        # AND WHEN the driver goes away, the child's notice keeps its resource and socket (they were lost)
        await driver.stop()
        notice = await asyncio.wait_for(next_item(Notice), 20)
        assert isinstance(notice, Notice)
        assert (notice.resource, notice.socket) == (DRIVER, driver.socket_path), notice
        assert notice.message and "\n" not in notice.message
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(items.aclose(), 20)


# --- one place that turns model objects into JSON -------------------------------------------------------

DEVCTL = Path(__file__).resolve().parent.parent / "devctl"

# Every other json.dump/dumps/JSONEncoder in devctl, with why it is not a model object's serialiser.
ALLOWED = {
    "model/serial.py": "the serialiser itself (lines, and a bad value quoted in an error)",
    "render/structured.py": "the document writer: json's C encoder over serial.fields_of / serial.to_plain",
    "core/snapshot_file.py": "the snapshot file: json.dump of serial.to_plain's form, indented",
    "node/journal_format.py": "the journal's records: compact json of serial.to_plain's form (time in the header)",
    "node/control.py": "the control socket's requests: plain dicts, no model objects",
    "lab/lineserver.py": "the control socket's replies: plain dicts, no model objects",
    "node/checkpoint.py": "the kubelet's checkpoint format (Go's spelling) and keys quoted in errors",
    "node/procs.py": "the fd-scan worker's request: plain lists",
    "fast/fdscan.py": "the fd-scan worker's reply: plain lists, standard library only",
    "lab/sim/dra_state.py": "the kubelet's dra_manager_state as Go's encoding/json writes it",
    "lab/sim/dramanager.py": "the simulated kubelet's health cache file",
    "lab/sim/workload.py": "the kubelet's cpu/memory manager state files",
    "lab/sim/kubelet_config.py": "the kubelet's config.yaml as the simulated node writes it (JSON scalars are YAML)",
    "lab/sim/dranode.py": "a simulated driver's record file",
    "lab/sim/temproot.py": "the temporary root's owner record",
    "fleet/views.py": "the --job regex as a PromQL string literal (JSON's escaping is PromQL's)",
}
JSON_WRITE = re.compile(r"\bjson\.(dumps?|JSONEncoder)\b|\bJSONEncoder\(")


def test_no_other_module_turns_model_objects_into_json() -> None:
    writers = set()
    for path in DEVCTL.rglob("*.py"):
        rel = path.relative_to(DEVCTL).as_posix()
        if rel.startswith("api/"):
            continue
        if JSON_WRITE.search(path.read_text(encoding="utf-8")):
            writers.add(rel)
    # A new one is either serial's work (use it) or a format of its own (add it here, saying why).
    assert writers <= set(ALLOWED), sorted(writers - set(ALLOWED))
    assert "render/events.py" not in writers and "tui/feeds.py" not in writers
