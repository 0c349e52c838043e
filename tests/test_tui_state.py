"""The TUI's data side without a terminal: live events over a snapshot, log lines, changes between polls."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from devctl.core.watch import Notice, WatchEvent
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerResources,
    Device,
    NodePaths,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
    SourceError,
)
from devctl.tui.feeds import FeedControlError, PluginControls, event_from_json, next_device_id
from devctl.tui.state import apply_events, build_view, event_line, view_changes

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
PATHS = NodePaths("/", "/var/lib/kubelet", "/dp", "/var/lib/kubelet/pod-resources/kubelet.sock", "/sys", "/var/log")
SOCKET = "/dp/gpu.sock"
GPU = "example.com/gpu"


def ev(event: str, device: str | None = None, from_: str | None = None, to: str | None = None) -> WatchEvent:
    return WatchEvent(T0, GPU, SOCKET, event, device, from_, to, 3, 2)


def snapshot(*devices: Device, pods: tuple[PodResources, ...] = ()) -> NodeSnapshot:
    healthy = tuple(ContainerDevices(GPU, (d.id,), d.numa_nodes) for d in devices if d.healthy)
    probe = PluginProbe(SOCKET, PluginStatus.SERVING, GPU, PluginOptions(), tuple(devices))
    return NodeSnapshot(
        "t", PATHS, True, pods=pods, allocatable=AllocatableResources(healthy), plugins=(probe,), errors=()
    )


def holding(container: str, *ids: str) -> PodResources:
    return PodResources("ml", "train", (ContainerResources(container, (ContainerDevices(GPU, ids),)),))


BASE = snapshot(Device("g0", numa_nodes=(0,)), Device("g1", numa_nodes=(1,)), Device("g2", "Unhealthy", (1,)))


def test_live_changes_are_laid_over_the_snapshot() -> None:
    patched, connected = apply_events(
        BASE,
        [
            ev("health", "g0", "Healthy", "Unhealthy"),
            ev("added", "g3", to="Healthy"),
            ev("removed", "g2", from_="Unhealthy"),
            ev("topology", "g1", "1", "0,1"),
        ],
    )
    assert patched.plugins[0].devices == (
        Device("g0", "Unhealthy", (0,)),
        Device("g1", "Healthy", (0, 1)),
        Device("g3", "Healthy", ()),
    )
    assert connected == {}
    assert BASE.plugins[0].devices[0].health == "Healthy"  # the snapshot itself is untouched


def test_replaying_the_same_events_changes_nothing_more() -> None:
    # Events that arrived while a poll ran are laid over the new snapshot again: they must be idempotent.
    events = [ev("health", "g0", "Healthy", "Unhealthy"), ev("added", "g3", to="Healthy"), ev("removed", "g2")]
    once, _ = apply_events(BASE, events)
    twice, _ = apply_events(once, events)
    assert once == twice


def test_a_disconnected_stream_makes_the_plugin_unreachable_until_it_reconnects() -> None:
    down, connected = apply_events(BASE, [ev("disconnected")])
    assert connected == {SOCKET: False}
    assert down.plugins[0].status == PluginStatus.UNREACHABLE
    up, connected = apply_events(BASE, [ev("disconnected"), ev("reconnected")])
    assert connected == {SOCKET: True}
    assert up.plugins[0].status == PluginStatus.SERVING


def test_the_view_takes_its_counts_from_analyze_and_words_the_status_as_the_cli() -> None:
    view = build_view(BASE, [ev("health", "g0", "Healthy", "Unhealthy")], T0)
    (row,) = view.resources
    # The plugin's live list says g0 and g2 are unhealthy now.
    assert (row.capacity, row.allocatable, row.unhealthy) == (3, 1, 2)
    assert [d.health for d in view.devices[GPU]] == ["Unhealthy", "Healthy", "Unhealthy"]
    assert view.status_of(row) == "serving"
    down = build_view(BASE, [ev("disconnected")], T0, view)
    # The stream is down: the status is the word `devctl ls` uses (the socket is there, it does not answer).
    assert down.status_of(down.resources[0]) == "unreachable"
    assert down.disconnected == frozenset({GPU})
    # The kubelet's view takes over while the plugin is away: only what GetAllocatableResources lists is healthy.
    assert down.resources[0].allocatable == 2


@pytest.mark.parametrize(
    ("event", "tone", "detail"),
    [
        (ev("health", "g0", "Healthy", "Unhealthy"), "bad", "Healthy → Unhealthy"),
        (ev("health", "g0", "Unhealthy", "Healthy"), "ok", "Unhealthy → Healthy"),
        (ev("added", "g3", to="Healthy"), "hot", "Healthy · 3 devices, 2 healthy"),
        (ev("disconnected"), "bad", "stream ended; retrying"),
        (ev("reconnected"), "ok", "3 devices, 2 healthy"),
        (ev("snapshot"), "", "3 devices, 2 healthy"),
    ],
)
def test_event_lines_highlight_health_changes(event: WatchEvent, tone: str, detail: str) -> None:
    line = event_line(event, {})
    assert line is not None
    assert (line.event, line.resource, line.tone, line.detail) == (event.event, GPU, tone, detail)


def test_an_event_without_resource_is_named_from_its_socket() -> None:
    line = event_line(replace(ev("snapshot"), resource=None), {SOCKET: GPU})
    assert line is not None and line.resource == GPU
    notice = event_line(Notice(T0, "waiting for x", socket=SOCKET), {SOCKET: GPU})
    assert notice is not None and (notice.event, notice.resource, notice.tone) == ("notice", GPU, "dim")


def test_changes_between_polls_name_what_was_allocated_and_released() -> None:
    old = build_view(replace(BASE, pods=(holding("a", "g0"),)), [], T0)
    new_snapshot = replace(
        BASE,
        pods=(holding("b", "g1"), PodResources("web", "new")),
        errors=(SourceError("checkpoint", "corrupt"),),
    )
    new = build_view(new_snapshot, [], T0 + timedelta(seconds=1), old)
    lines = [(line.event, line.resource, line.device, line.detail) for line in view_changes(old, new)]
    assert lines == [
        ("pod-added", "", "", "web/new"),
        ("released", GPU, "g0", "from ml/train/a"),
        ("allocated", GPU, "g1", "to ml/train/b"),
        ("error", "", "", "checkpoint: corrupt"),
    ]
    back = build_view(replace(BASE, pods=(holding("b", "g1"),)), [], T0, new)
    assert ("recovered", "checkpoint") in [(line.event, line.detail) for line in view_changes(new, back)]
    assert ("pod-gone", "web/new") in [(line.event, line.detail) for line in view_changes(new, back)]


def test_container_detail_joins_pod_resources_with_the_checkpoint() -> None:
    view = build_view(replace(BASE, pods=(holding("a", "g0", "g1"),)), [], T0)
    detail = view.container("ml/train/a")
    assert detail is not None
    assert detail.container.devices == (ContainerDevices(GPU, ("g0", "g1"), ()),)
    assert detail.entries == ()  # no checkpoint read
    assert view.container("ml/train/gone") is None


@pytest.mark.parametrize(
    ("existing", "like", "new"),
    [
        (["GPU-0", "GPU-7"], "GPU-7", "GPU-8"),
        (["0000:3b:02.0", "0000:3b:02.3"], "0000:3b:02.3", "0000:3b:02.4"),
        (["nic-07", "nic-08"], "nic-07", "nic-09"),
        ([], None, "gpu-0"),
        (["weird"], "weird", "gpu-0"),
    ],
)
def test_a_new_device_is_named_like_its_neighbours(existing: list[str], like: str | None, new: str) -> None:
    assert next_device_id(GPU, existing, like) == new


def test_plugin_controls_flip_add_and_remove() -> None:
    # The real in-process plugin, not started: these calls change its device list in memory,
    # which a started one pushes to every ListAndWatch stream (covered in test_tui_app).
    plugin = DevicePluginServer(PluginSpec(GPU, (Device("GPU-0", numa_nodes=(1,)),)), "/nonexistent")
    controls = PluginControls({GPU: plugin})
    assert controls.toggle_health(GPU, "GPU-0") == "Unhealthy"
    assert controls.toggle_health(GPU, "GPU-0") == "Healthy"
    assert controls.add_device(GPU, like="GPU-0") == "GPU-1"
    assert plugin.devices[-1] == Device("GPU-1", "Healthy", (1,))
    controls.remove_device(GPU, "GPU-0")
    assert [d.id for d in plugin.devices] == ["GPU-1"]
    with pytest.raises(FeedControlError, match="no device GPU-9"):
        controls.toggle_health(GPU, "GPU-9")
    with pytest.raises(FeedControlError, match="not served from this process"):
        controls.add_device("other.com/x")


def test_a_devctl_watch_json_line_becomes_an_event() -> None:
    line = (
        b'{"time": "2026-01-02T03:04:05.678Z", "resource": "example.com/gpu", "socket": "/dp/gpu.sock", '
        b'"event": "health", "device": "g0", "from": "Healthy", "to": "Unhealthy", "devices": 3, "healthy": 2}\n'
    )
    event = event_from_json(line)
    assert event == WatchEvent(
        datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc),
        GPU,
        SOCKET,
        "health",
        "g0",
        "Healthy",
        "Unhealthy",
        3,
        2,
    )
    assert event_from_json(b"not json\n") is None
    assert event_from_json(b'{"event": "health"}\n') is None  # no time


def test_counts_that_depend_on_a_failed_source_read_unknown_in_the_resources_view() -> None:
    from devctl.tui.widgets.devices import device_rows
    from devctl.tui.widgets.resources import resource_rows
    from devctl.tui.widgets.statusbar import status_text

    # pod-resources failed: who holds what is unknown, not "0 held, 2 free".
    view = build_view(replace(BASE, pods=None), [], T0)
    (row,) = resource_rows(view)
    assert row.cells[2:7] == ("3", "2", "?", "?", "1")
    assert {r.cells[3] for r in device_rows(view, GPU)} == {"?"}  # state
    assert {r.cells[4] for r in device_rows(view, GPU)} == {"?"}  # held by
    assert "1 unhealthy" in status_text(view, "node")
    from devctl.tui.widgets.numa import numa_text

    assert "? held, ? free" in numa_text(view).plain
    # The plugin is gone: only the kubelet's lists name the devices, a lower bound.
    gone = build_view(replace(BASE, plugins=()), [], T0)
    (row,) = resource_rows(gone)
    assert row.cells[1:7] == ("no-plugin", "≥2", "2", "0", "2", "?")


def test_the_physical_join_is_made_once_per_poll_and_again_when_what_it_reads_changes(monkeypatch) -> None:
    """A health flip (a live event) changes no lead to a PCI function: the rebuilds of one poll reuse the join
    (10,000 devices: 150 ms of each rebuild, bench/bench_tui.py); a new poll's pods or new devices make it anew."""
    import devctl.tui.state as state

    made = []
    real = state.physical_join

    def counting(snapshot: NodeSnapshot):
        made.append(snapshot)
        return real(snapshot)

    monkeypatch.setattr(state, "physical_join", counting)
    first = build_view(BASE, [], T0)
    assert len(made) == 1  # g0..g2 lead nowhere by CDI or ID: the physical view is asked
    flipped = build_view(BASE, [ev("health", "g0", "Healthy", "Unhealthy")], T0, first)
    assert len(made) == 1 and flipped.devices == {GPU: flipped.devices[GPU]}
    assert [d.pci for d in flipped.devices[GPU]] == [d.pci for d in first.devices[GPU]]
    build_view(replace(BASE, pods=(holding("a", "g0"),)), [], T0, flipped)  # the next poll: other pods
    assert len(made) == 2
    added = build_view(BASE, [ev("added", "g3")], T0, first)  # a device more: the join is made again
    assert len(made) == 3 and any(d.id == "g3" for d in added.devices[GPU])
