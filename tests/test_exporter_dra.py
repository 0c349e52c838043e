"""How the exporter lays a DRA driver's live health stream over the refresh's read of it (``devctl.exporter.dra``).

The end-to-end cases (a flip, a driver that stops) are in test_exporter.py on a
simulated node; these pin the rule between the two sources: a change counts
only when it arrived after the refresh read the driver.
"""

from __future__ import annotations

from datetime import datetime, timezone

from devctl.core.events import ADDED, DISCONNECTED, HEALTH, REMOVED, SNAPSHOT, WatchEvent
from devctl.exporter.dra import DriverLive, apply, live_probes
from devctl.model import DraDeviceHealth, DraEndpoint, PluginProbe, PluginStatus, RegistryInfo

DRIVER = "gpu.example.com"
LISTED = (DraDeviceHealth("a", "gpu-0", "Healthy", 100, 30), DraDeviceHealth("a", "gpu-1", "Healthy", 100, 30))


def _probe(read_at: float) -> PluginProbe:
    return PluginProbe(
        socket="/reg/gpu.example.com-reg.sock",
        status=PluginStatus.SERVING,
        registry=RegistryInfo("DRAPlugin", DRIVER, "/plugins/gpu.example.com/dra.sock"),
        dra=DraEndpoint(
            "/plugins/gpu.example.com/dra.sock",
            PluginStatus.SERVING,
            health_stream=True,
            health=LISTED,
            read_at=read_at,
        ),
    )


def _events(*events: tuple[str, float, str | None, str | None]) -> DriverLive:
    live = None
    for kind, at, device, to in events:
        event = WatchEvent(datetime.fromtimestamp(at, timezone.utc), DRIVER, "/x", kind, device=device, to=to)
        live = apply(live, event)
    assert live is not None
    return live


def test_changes_after_the_refresh_read_are_laid_over_it_and_older_ones_are_not() -> None:
    live = _events(
        (SNAPSHOT, 90, None, None),
        (HEALTH, 95, "a/gpu-0", "Unhealthy"),  # before the refresh read the driver: the read already says what holds
        (HEALTH, 96, "a/gpu-0", "Healthy"),
        (HEALTH, 110, "a/gpu-1", "Unhealthy"),
        (ADDED, 111, "a/gpu-2", "Healthy"),
    )
    (p,) = live_probes((_probe(100),), {DRIVER: live})
    assert p.dra is not None and p.dra.health is not None
    assert [(h.device, h.health) for h in p.dra.health] == [
        ("gpu-0", "Healthy"),
        ("gpu-1", "Unhealthy"),
        ("gpu-2", "Healthy"),
    ]
    (p,) = live_probes((_probe(100),), {DRIVER: _events((SNAPSHOT, 90, None, None), (REMOVED, 120, "a/gpu-0", None))})
    assert p.dra is not None and [h.device for h in p.dra.health or ()] == ["gpu-1"]


def test_nothing_newer_than_the_refresh_leaves_its_probes_as_they_are() -> None:
    probes = (_probe(100),)
    assert (
        live_probes(probes, {DRIVER: _events((SNAPSHOT, 90, None, None), (HEALTH, 95, "a/gpu-0", "Unhealthy"))})
        is probes
    )
    assert live_probes(probes, {}) is probes


def test_a_stream_that_broke_after_the_refresh_vouches_for_nothing() -> None:
    live = _events((SNAPSHOT, 90, None, None), (DISCONNECTED, 120, None, None))
    (p,) = live_probes((_probe(100),), {DRIVER: live})
    assert p.dra is not None and p.dra.health is None and p.dra.status == PluginStatus.UNREACHABLE
    # A refresh that read the driver after the break (it was back by then) is newer than the break.
    probes = (_probe(130),)
    assert live_probes(probes, {DRIVER: live}) is probes
