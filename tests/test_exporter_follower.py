"""The exporter follows the node with the watch's one follower and its one discovery (issue 30, item 1).

What that gives the exporter that its own follower did not: device plugins
registered through ``plugins_registry/`` are followed live as ``devctl
watch`` follows them, and every socket is reported under the name ``devctl
plugins`` lists it by. What it keeps: a socket that vanished is down, then
forgotten; the first list of each stream is timed. Real gRPC servers on real
unix sockets (``tests/registry.py``), the exporter as a real process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DEVCTL, devctl_env
from registry import plugin_info, registry_server

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from devctl.base.waits import cancel_and_wait
from devctl.exporter.live import LiveSocket, PluginStreams
from devctl.model import Device, NodePaths, PluginStatus
from devctl.node.paths import resolve_paths

STUB = "example.com/stub"
DEVICES = (Device("s0"), Device("s1"), Device("s2", health="Unhealthy"))
WAIT = 20.0


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    os.makedirs(p.plugins_dir)
    os.makedirs(p.plugins_registry)
    return p


def _scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as reply:
        return {f.name: f for f in text_string_to_metric_families(reply.read().decode())}


class _Exporter:
    def __init__(self, proc: asyncio.subprocess.Process, url: str):
        self.proc = proc
        self.url = url

    async def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        family = (await asyncio.to_thread(_scrape, self.url)).get(name)
        return [(s.labels, s.value) for s in family.samples] if family else []

    async def wait_for(self, what: str, check: Callable[[], Any]) -> None:
        deadline = time.monotonic() + WAIT
        while not await check():
            assert self.proc.returncode is None, "the exporter exited"
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {WAIT:g}s: {what}")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def exporter(root: str) -> AsyncIterator[_Exporter]:
    """The exporter as a process with an hour's interval: what it shows between refreshes is the live streams'."""
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL, "--root", root, "--timeout", "2", "exporter", "--listen", "127.0.0.1:0", "--interval", "3600",
        stderr=subprocess.PIPE,
        env=devctl_env(),
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), WAIT)).decode()
        match = re.search(r"serving (http://\S+)/metrics", line)
        assert match, f"no address in {line!r}"
        yield _Exporter(proc, match.group(1))
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def test_a_plugin_registered_in_the_registry_has_live_health_series(paths: NodePaths) -> None:
    """GIVEN a device plugin registered only in plugins_registry/ (its socket outside the plugins dir)
    WHEN the exporter runs THEN its devices' health series are there, as `devctl watch` follows it (was: none)."""
    endpoint = "/var/lib/kubelet/plugins/stub/dp.sock"
    registration = f"{paths.plugins_registry}/stub-reg.sock"
    async with (
        registry_server(f"{paths.root}{endpoint}", plugin_info(STUB, ""), DEVICES),
        registry_server(registration, plugin_info(STUB, endpoint)),
        exporter(paths.root) as ex,
    ):

        async def health() -> dict[str, float]:
            return {ls["device"]: v for ls, v in await ex.samples("devctl_device_health") if ls["resource"] == STUB}

        await ex.wait_for("the stub's live health", lambda: _equal(health, {"s0": 1.0, "s1": 1.0, "s2": 0.0}))
        up = [(ls["socket"], v) for ls, v in await ex.samples("devctl_plugin_up") if ls["resource"] == STUB]
        assert up == [(registration, 1.0)]  # one series, under the registration's name as `devctl plugins` lists it


async def test_a_symlinked_socket_is_one_plugin_under_its_listed_name(paths: NodePaths) -> None:
    """GIVEN a plugins-dir symlink to a socket elsewhere WHEN exported THEN one plugin_up series, its listed name
    (was: a second series under the target's path, with no resource)."""
    target = "/run/stub/dp.sock"  # as the node sees it: under the root here
    listed = f"{paths.plugins_dir}/stub.sock"
    async with registry_server(f"{paths.root}{target}", plugin_info(STUB, ""), DEVICES):
        os.symlink(target, listed)
        async with exporter(paths.root) as ex:

            async def sockets() -> list[str]:
                return sorted(ls["socket"] for ls, _ in await ex.samples("devctl_plugin_up"))

            async def streamed() -> bool:  # the live stream's first list came (no kubelet here names its resource)
                timed = await ex.samples("devctl_plugin_rpc_duration_seconds")
                return any(ls.get("rpc") == "ListAndWatch" for ls, _ in timed)

            await ex.wait_for("the live stream", streamed)
            await asyncio.sleep(1.0)  # several looks of the discovery later
            assert await sockets() == [listed]


async def _equal(get: Callable[[], Any], want: object) -> bool:
    return bool(await get() == want)


async def test_a_vanished_socket_is_down_then_forgotten_and_each_stream_timed(paths: NodePaths) -> None:
    """What the exporter kept from its own follower: the first list timed once per stream, a socket whose file
    went reported down (no devices) with when it went, and forgotten (None) after forget_after."""
    socket = f"{paths.plugins_dir}/lone.sock"
    said: list[tuple[str, LiveSocket | None]] = []
    rpcs: list[str] = []
    streams = PluginStreams(
        paths.plugins_dir,
        2.0,
        lambda s, live: said.append((s, live)),
        lambda rpc, seconds: rpcs.append(rpc),
        poll=0.1,
        forget_after=1.0,
        root=paths.root,
        paths=paths,
    )

    async def until(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT
        while not check():
            assert time.monotonic() < deadline, said
            await asyncio.sleep(0.05)

    task = asyncio.ensure_future(streams.run())
    try:
        async with registry_server(socket, plugin_info("x", ""), DEVICES):
            await until(lambda: any(live is not None and live.up for _, live in said))
            first = next(live for _, live in said if live is not None and live.up)
            assert (first.socket, first.devices) == (socket, DEVICES)
            assert rpcs == ["ListAndWatch"]
        await until(lambda: any(live is not None and live.gone_since is not None for _, live in said))
        gone = next(live for _, live in said if live is not None and live.gone_since is not None)
        assert (gone.up, gone.devices, gone.status) == (False, (), PluginStatus.UNREACHABLE)
        assert gone.error == f"{socket}: the socket file is gone"
        await until(lambda: said[-1] == (socket, None))
    finally:
        await cancel_and_wait(task)


async def test_a_failed_session_is_not_held_while_the_follower_waits(paths: NodePaths) -> None:
    """GIVEN a socket that listens and never accepts WHEN its stream's first list does not come THEN, while the
    follower waits to try again, nothing of that session is alive (its client was held by the kept exception's
    traceback, a cycle per attempt: 300 such sockets took the exporter past the DaemonSet's 128 Mi in 10 s,
    issue 28 item 11)."""
    import gc
    import socket as sockets

    from devctl.core.watch import Backoff
    from devctl.core.watch.follow import Follower, StreamEnd
    from devctl.node.deviceplugin import DevicePluginClient

    path = f"{paths.plugins_dir}/never.sock"
    listening = sockets.socket(sockets.AF_UNIX)
    listening.bind(path)
    listening.listen(8)
    ended = asyncio.Event()
    ends: list[StreamEnd] = []

    class Heard:
        def listed(self, socket: str, devices: tuple[Device, ...], took: float | None) -> None:
            raise AssertionError("no list from a socket that never accepts")

        def ended(self, socket: str, end: StreamEnd) -> None:
            ends.append(end)
            ended.set()

    class Dropped:
        def put_nowait(self, item: object, /) -> None:
            pass

    async def unnamed(socket: str, devices: object) -> None:
        return None

    follower = Follower(
        Dropped(),
        unnamed,
        resource=None,
        socket=path,
        scouts=None,
        wait=True,
        once=False,
        timeout=0.5,
        backoff=Backoff(first=60.0, cap=60.0),  # it waits, long after its one attempt
        listener=Heard(),
    )
    gc.collect()
    gc.disable()  # only what is referenced stays alive: what a process whose collector runs late keeps
    task = asyncio.ensure_future(follower.run())
    try:
        await asyncio.wait_for(ended.wait(), WAIT)
        await asyncio.sleep(0.2)  # the session's close done; the follower waits
        assert ends[0].status == PluginStatus.TIMEOUT, ends
        alive = [o for o in gc.get_objects() if isinstance(o, DevicePluginClient) and o.socket_path == path]
        assert alive == []
    finally:
        gc.enable()
        await cancel_and_wait(task)
        listening.close()
