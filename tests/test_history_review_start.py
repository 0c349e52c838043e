"""Review fixes (history, item 1): "plugin started" comes from the plugin's own events, never the recorder's.

A recorder restarting writes a ``snapshot`` per plugin (its first look at a plugin already running): that is
not the plugin's start, and a flip to unhealthy the journal holds from before it still says since when.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from devctl.analyze.history import story
from devctl.model.history import EventSource, NodeEvent

SHARED = "nvidia.com/gpu.shared"
T0 = datetime(2026, 12, 3, 14, 36, 38, tzinfo=timezone.utc)


def watch(at: datetime, kind: str, device: str | None = None, what: str = "") -> NodeEvent:
    return NodeEvent(at, EventSource.PLUGIN, kind, SHARED, device, what=what or kind)


PLUGIN_START = watch(T0 - timedelta(seconds=96), "reconnected", what="reconnected, 4 devices, 4 healthy")
FLIP = watch(T0, "health", "GPU-8::0", "Healthy -> Unhealthy")
RECORDER_RESTART = watch(T0 + timedelta(seconds=4), "snapshot", what="snapshot, 4 devices, 3 healthy")


def test_a_recorder_restart_after_the_flip_is_not_the_plugins_start() -> None:
    told = story([PLUGIN_START, FLIP, RECORDER_RESTART], SHARED, "GPU-8::0", T0 + timedelta(minutes=2), unhealthy=True)
    assert not told.since_start
    assert told.unhealthy_since == T0
    assert told.line == "unhealthy since 14:36:38"
    assert told.started == PLUGIN_START.time  # the plugin's own start, not the recorder's 14:36:42


def test_a_recorder_snapshot_alone_says_nothing_of_since_when() -> None:
    told = story([RECORDER_RESTART], SHARED, "GPU-8::0", T0 + timedelta(minutes=2), unhealthy=True)
    assert not told.since_start and told.unhealthy_since is None and told.started is None


def test_unhealthy_since_its_plugin_came_back_on_its_socket() -> None:
    told = story([PLUGIN_START, RECORDER_RESTART], SHARED, "GPU-8::0", T0 + timedelta(minutes=2), unhealthy=True)
    assert told.since_start and told.unhealthy_since == PLUGIN_START.time


def test_added_unhealthy_and_never_evaluated_again_is_since_its_listing() -> None:
    added = watch(T0 - timedelta(seconds=90), "added", "GPU-8::1", "added (Unhealthy)")
    told = story([added, RECORDER_RESTART], SHARED, "GPU-8::1", T0 + timedelta(minutes=2), unhealthy=True)
    assert told.since_start and told.unhealthy_since == added.time
