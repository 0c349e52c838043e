"""The pure parts of ``devctl watch``: diffing device lists, backoff, and the lines it prints."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest

from devctl.core.watch import ADDED, HEALTH, REMOVED, TOPOLOGY, Backoff, Change, WatchEvent, counts, diff
from devctl.model import Device
from devctl.model.udev import KernelEvent
from devctl.render.events import EventTable, clock_time, event_object, iso_time, json_line

CONTRACT_KEYS = {"time", "resource", "socket", "event", "device", "from", "to", "devices", "healthy"}
T = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)


def gpus(*specs: tuple[str, str, tuple[int, ...]]) -> tuple[Device, ...]:
    return tuple(Device(id=i, health=h, numa_nodes=n) for i, h, n in specs)


def test_identical_lists_have_no_changes() -> None:
    devices = gpus(("GPU-0", "Healthy", (0,)), ("GPU-1", "Unhealthy", ()))
    assert diff(devices, devices) == []
    # Order is not a change: the kubelet keys devices by ID.
    assert diff(devices, tuple(reversed(devices))) == []


def test_health_flip_names_from_and_to() -> None:
    old = gpus(("GPU-0", "Healthy", (0,)), ("GPU-1", "Healthy", (0,)))
    new = gpus(("GPU-0", "Healthy", (0,)), ("GPU-1", "Unhealthy", (0,)))
    assert diff(old, new) == [Change(HEALTH, "GPU-1", "Healthy", "Unhealthy")]


def test_added_and_removed_carry_the_health_of_the_device() -> None:
    old = gpus(("GPU-0", "Healthy", ()), ("GPU-1", "Healthy", ()))
    new = gpus(("GPU-1", "Healthy", ()), ("GPU-2", "Unhealthy", ()))
    assert diff(old, new) == [Change(REMOVED, "GPU-0", from_="Healthy"), Change(ADDED, "GPU-2", to="Unhealthy")]


def test_removals_come_first_then_changes_in_the_new_lists_order() -> None:
    old = gpus(("a", "Healthy", ()), ("b", "Healthy", ()), ("c", "Healthy", ()))
    new = gpus(("d", "Healthy", ()), ("c", "Unhealthy", ()), ("b", "Healthy", ()))
    assert [(c.event, c.device) for c in diff(old, new)] == [(REMOVED, "a"), (ADDED, "d"), (HEALTH, "c")]


def test_topology_change_is_written_as_numa_lists() -> None:
    old = gpus(("GPU-0", "Healthy", (0,)), ("GPU-1", "Healthy", ()))
    new = gpus(("GPU-0", "Healthy", (0, 1)), ("GPU-1", "Healthy", (1,)))
    assert diff(old, new) == [Change(TOPOLOGY, "GPU-0", "0", "0,1"), Change(TOPOLOGY, "GPU-1", "none", "1")]


def test_health_and_topology_of_one_device_are_two_changes() -> None:
    old = gpus(("GPU-0", "Healthy", (0,)))
    new = gpus(("GPU-0", "Unhealthy", (1,)))
    assert [c.event for c in diff(old, new)] == [HEALTH, TOPOLOGY]


def test_from_nothing_everything_is_added_and_to_nothing_removed() -> None:
    devices = gpus(("a", "Healthy", ()), ("b", "Unhealthy", ()))
    assert [(c.event, c.device) for c in diff((), devices)] == [(ADDED, "a"), (ADDED, "b")]
    assert [(c.event, c.device) for c in diff(devices, ())] == [(REMOVED, "a"), (REMOVED, "b")]


def test_any_health_string_but_healthy_counts_as_unhealthy() -> None:
    devices = gpus(("a", "Healthy", ()), ("b", "Unhealthy", ()), ("c", "healthy", ()), ("d", "", ()))
    assert counts(devices) == (4, 1)


def test_diff_of_ten_thousand_devices_is_exact() -> None:
    old = tuple(Device(id=f"dev-{i}") for i in range(10_000))
    changed = (Device(id=d.id, health="Unhealthy") if d.id == "dev-4321" else d for d in old[1:])
    new = (*changed, Device(id="dev-new"))
    assert diff(old, new) == [
        Change(REMOVED, "dev-0", from_="Healthy"),
        Change(HEALTH, "dev-4321", "Healthy", "Unhealthy"),
        Change(ADDED, "dev-new", to="Healthy"),
    ]


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    b = Backoff(first=0.1, cap=2.0, jitter=0.0)
    assert [round(b.next(), 3) for _ in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    b.reset()
    assert b.next() == pytest.approx(0.1)


def test_backoff_jitter_stays_within_its_band_and_under_the_cap() -> None:
    b = Backoff(first=1.0, cap=2.0, jitter=0.2)
    first = b.next()
    assert 0.8 <= first <= 1.2
    assert all(b.next() <= 2.0 for _ in range(20))


# --- rendering ---------------------------------------------------------------------


def test_times_are_utc_with_milliseconds() -> None:
    assert iso_time(T) == "2026-01-02T03:04:05.678Z"
    assert clock_time(T) == "03:04:05.678"


def test_json_of_an_event_has_exactly_the_contract_keys() -> None:
    e = WatchEvent(T, "nvidia.com/gpu", "/dp/nvidia.sock", HEALTH, "GPU-1", "Healthy", "Unhealthy", 8, 7)
    obj = json.loads(json_line(e))
    assert obj == {
        "time": "2026-01-02T03:04:05.678Z",
        "resource": "nvidia.com/gpu",
        "socket": "/dp/nvidia.sock",
        "event": "health",
        "device": "GPU-1",
        "from": "Healthy",
        "to": "Unhealthy",
        "devices": 8,
        "healthy": 7,
    }
    # cli.md: a snapshot has no `device` (nor from/to): the keys are absent, not null.
    snapshot = event_object(WatchEvent(T, "nvidia.com/gpu", "/dp/nvidia.sock", "snapshot", devices=8, healthy=7))
    assert set(snapshot) == CONTRACT_KEYS - {"device", "from", "to"}
    added = event_object(WatchEvent(T, "x.example/a", "/s", ADDED, "a-1", to="Healthy", devices=1, healthy=1))
    assert set(added) == CONTRACT_KEYS - {"from"}
    unnamed = event_object(WatchEvent(T, None, "/s", "snapshot", devices=0, healthy=0))
    assert unnamed["resource"] is None  # applies, but no source names it


def test_a_json_line_is_one_line() -> None:
    e = WatchEvent(T, "x.example/a", "/s", ADDED, "dev\nwith newline", to="Healthy", devices=1, healthy=1)
    assert "\n" not in json_line(e)


def test_kernel_events_extend_the_contract_keys() -> None:
    k = KernelEvent(T, "remove", "pci", "0000:3b:00.0", "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", "nvidia")
    obj = event_object(k)
    assert set(obj) == {"time", "event", "device", "subsystem", "devpath", "driver"}
    assert (obj["event"], obj["device"], obj["subsystem"], obj["driver"]) == (
        "udev-remove",
        "0000:3b:00.0",
        "pci",
        "nvidia",
    )


def test_table_line_shows_time_event_change_and_the_device() -> None:
    e = WatchEvent(T, "nvidia.com/gpu", "/dp/nvidia.sock", HEALTH, "GPU-1", "Healthy", "Unhealthy", 8, 7)
    table = EventTable()
    header = table.header()
    line = table.line(e)
    assert line.split() == ["03:04:05.678", "health", "Healthy→Unhealthy", "nvidia.com/gpu/GPU-1"]
    assert header.split() == ["TIME", "EVENT", "CHANGE", "OBJECT"]
    # Columns line up with the header.
    assert line.index("Healthy→") == header.index("CHANGE")
    assert line.index("nvidia.com/gpu") == header.index("OBJECT")


def test_a_snapshot_shows_its_counts_as_its_change() -> None:
    e = WatchEvent(T, "nvidia.com/gpu", "/dp/nvidia.sock", "snapshot", devices=8, healthy=7)
    assert EventTable().line(e).split()[2:] == ["7/8", "healthy", "nvidia.com/gpu"]


def test_table_names_an_unknown_resource_by_its_socket() -> None:
    e = WatchEvent(T, None, "/var/lib/kubelet/device-plugins/vendor.sock", "snapshot", devices=2, healthy=2)
    assert "(vendor.sock)" in EventTable().line(e)


def test_table_line_of_a_kernel_event() -> None:
    k = KernelEvent(T, "unbind", "pci", "0000:3b:00.0", "/devices/x/0000:3b:00.0", "nvidia")
    row = EventTable().line(k).split()
    assert row == ["03:04:05.678", "udev-unbind", "driver", "nvidia", "pci/0000:3b:00.0"]


def test_a_device_listed_twice_counts_once_its_last_entry_winning() -> None:
    old = gpus(("a", "Healthy", ()), ("a", "Unhealthy", ()))
    new = gpus(("a", "Unhealthy", ()), ("a", "Unhealthy", ()))
    assert diff(old, new) == []
    assert diff(old, gpus(("a", "Unhealthy", ()), ("a", "Healthy", ()))) == [
        Change(HEALTH, "a", "Unhealthy", "Healthy")
    ]


def test_the_same_changes_whatever_the_order_of_the_lists() -> None:
    rng = random.Random(7)
    old = tuple(
        Device(id=f"d{i}", health=rng.choice(["Healthy", "Unhealthy"]), numa_nodes=(i % 2,)) for i in range(500)
    )
    new = list(old)
    for i in rng.sample(range(500), 40):
        d = new[i]
        new[i] = Device(d.id, "Unhealthy" if d.healthy else "Healthy", d.numa_nodes if i % 3 else (0, 1))
    in_order = diff(old, tuple(new))
    rng.shuffle(new)
    shuffled = diff(old, tuple(new))
    assert len(in_order) == len(shuffled) > 40
    assert sorted(in_order, key=repr) == sorted(shuffled, key=repr)
