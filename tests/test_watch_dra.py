"""``devctl watch DRIVER``: a DRA driver's health stream on the watch timeline, over real sockets."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env, run_devctl_async

from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec

DRIVER = "gpu.example.com"
SPEC = DraSpec(driver=DRIVER, pool="node-a", devices=(DraDevice("gpu-0", (0,)), DraDevice("gpu-1", (1,))))


def kubelet_dir(root: Path) -> str:
    return str(root / "var" / "lib" / "kubelet")


def driver_at(root: Path, spec: DraSpec = SPEC) -> DraDriver:
    return DraDriver(spec, kubelet_dir(root), root=str(root))


@pytest.fixture
async def driver(short_root: Path) -> AsyncIterator[DraDriver]:
    async with driver_at(short_root) as d:
        yield d


class Watch:
    """A running ``devctl watch DRIVER -o json``, read line by line while the test's loop serves the driver."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc

    async def event(self, within: float = 20) -> dict:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), within)
        assert line, "the watch ended"
        return json.loads(line)

    async def stop(self) -> str:
        self.proc.terminate()
        _, err = await asyncio.wait_for(self.proc.communicate(), 20)
        return err.decode()


async def watching(root: Path, *args: str) -> Watch:
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        "watch",
        DRIVER,
        "-o",
        "json",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=devctl_env(root),
    )
    return Watch(proc)


async def test_once_prints_the_drivers_snapshot(driver: DraDriver, short_root: Path) -> None:
    # WHEN a driver's name is watched once
    r = await run_devctl_async("watch", DRIVER, "--once", "-o", "json", root=short_root)
    # THEN one snapshot line counts its devices, keyed by the driver, from its endpoint
    assert r.exit_code == 0, r.stderr
    [line] = [json.loads(x) for x in r.stdout.splitlines()]
    assert line["event"] == "snapshot"
    assert (line["resource"], line["devices"], line["healthy"]) == (DRIVER, 2, 2)
    assert line["socket"] == driver.socket_path
    assert "device" not in line and "message" not in line


async def test_a_health_flip_is_a_health_event_within_a_second(driver: DraDriver, short_root: Path) -> None:
    w = await watching(short_root)
    try:
        assert (await w.event())["event"] == "snapshot"
        # WHEN the driver reports a device unhealthy, with a reason
        flipped = time.monotonic()
        driver.set_health("gpu-1", "Unhealthy", "ECC errors")
        event = await w.event()
        seen = time.monotonic() - flipped
    finally:
        await w.stop()
    # THEN a health event names the device as <pool>/<device>, from/to and the driver's message, within 1 s
    assert event["event"] == "health"
    assert (event["device"], event["from"], event["to"]) == ("node-a/gpu-1", "Healthy", "Unhealthy")
    assert event["message"] == "ECC errors"
    assert (event["devices"], event["healthy"]) == (2, 1)
    assert seen < 1.0


async def test_a_driver_restart_is_disconnected_then_reconnected(short_root: Path) -> None:
    d = driver_at(short_root)
    await d.start()
    try:
        w = await watching(short_root)
        try:
            assert (await w.event())["event"] == "snapshot"
            # WHEN the driver stops, and comes back with one device unhealthy
            await d.stop()
            disconnected = await w.event()
            d = driver_at(short_root)
            await d.start()
            d.set_health("gpu-0", "Unhealthy")
            reconnected = await w.event()
            changes = [await w.event()]
        finally:
            err = await w.stop()
    finally:
        await d.stop()
    # THEN the watch says so, and what changed while it was away
    assert (disconnected["event"], disconnected["devices"]) == ("disconnected", 2)
    assert reconnected["event"] == "reconnected"
    assert [(c["event"], c["device"], c["to"]) for c in changes] == [("health", "node-a/gpu-0", "Unhealthy")]
    assert "reconnecting" in err


async def test_a_driver_without_health_says_so_once(short_root: Path) -> None:
    spec = DraSpec(driver=DRIVER, pool="node-a", devices=SPEC.devices, health=False)
    async with driver_at(short_root, spec):
        # WHEN a driver that offers no DRAResourceHealth is watched for a while
        r = await run_devctl_async("watch", DRIVER, "-o", "json", "--duration", "1.5", root=short_root)
    # THEN nothing is printed as an event, and stderr says once why
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr.count("offers no health service") == 1, r.stderr


# --- a whole-node watch (no argument): device plugins and DRA drivers on one timeline ----------------------


async def whole_node(root: Path, *args: str) -> Watch:
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        "watch",
        "-o",
        "json",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=devctl_env(root),
    )
    return Watch(proc)


async def until(w: Watch, wanted, within: float = 20) -> dict:
    """The first event that ``wanted`` accepts, skipping the others."""
    deadline = time.monotonic() + within
    while True:
        event = await w.event(max(0.1, deadline - time.monotonic()))
        if wanted(event):
            return event


def test_once_on_the_whole_node_shows_the_drivers_beside_the_plugins(sim_node) -> None:
    from helpers import run_devctl

    # WHEN the whole simulated node is watched once, no target named
    r = run_devctl("watch", "--once", "-o", "json", root=sim_node.root)
    # THEN every device plugin and the DRA driver have a snapshot line
    assert r.exit_code == 0, r.stderr
    snapshots = {e["resource"]: (e["devices"], e["healthy"]) for e in map(json.loads, r.stdout.splitlines())}
    assert snapshots == {
        "nvidia.com/gpu": (8, 7),
        "nvidia.com/gpu.shared": (4, 4),
        "intel.com/sriov_netdevice": (8, 8),
        "hardware-vendor.example/foo": (2, 2),
        DRIVER: (4, 3),
    }


async def test_a_whole_node_watch_follows_a_driver_that_registers_later(short_root: Path) -> None:
    (short_root / "var" / "lib" / "kubelet" / "device-plugins").mkdir(parents=True)
    w = await whole_node(short_root)
    d = driver_at(short_root)
    try:
        # WHEN a DRA driver registers after the watch started, then one of its devices goes bad
        await asyncio.sleep(0.2)  # not required: the watch looks again; this only makes "later" likely
        await d.start()
        snapshot = await until(w, lambda e: e["event"] == "snapshot")
        d.set_health("gpu-0", "Unhealthy", "XID 48")
        health = await until(w, lambda e: e["event"] == "health")
        # AND it stops
        await d.stop()
        gone = await until(w, lambda e: e["event"] == "disconnected")
    finally:
        await d.stop()
        await w.stop()
    # THEN its health stream is on the node's timeline: snapshot, health with the message, disconnected
    assert (snapshot["resource"], snapshot["devices"]) == (DRIVER, 2)
    assert (health["resource"], health["device"], health["to"], health["message"]) == (
        DRIVER,
        "node-a/gpu-0",
        "Unhealthy",
        "XID 48",
    )
    assert gone["resource"] == DRIVER


async def test_a_hung_registration_socket_delays_no_other_drivers_snapshot(short_root: Path) -> None:
    from badservers import hung_server

    (short_root / "var" / "lib" / "kubelet" / "device-plugins").mkdir(parents=True)
    registry = short_root / "var" / "lib" / "kubelet" / "plugins_registry"
    registry.mkdir(parents=True)
    # GIVEN a registration socket that answers nothing beside a healthy driver, and a deadline of 10 s
    async with hung_server(str(registry / "stuck-reg.sock")), driver_at(short_root):
        w = await whole_node(short_root, "--timeout", "10")
        try:
            started = time.monotonic()
            # WHEN the whole node is watched
            snapshot = await until(w, lambda e: e["event"] == "snapshot" and e["resource"] == DRIVER)
            took = time.monotonic() - started
        finally:
            await w.stop()
    # THEN the healthy driver's snapshot comes at once, not after the stuck socket's deadline
    assert snapshot["devices"] == 2
    assert took < 5, took
