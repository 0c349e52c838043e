"""The watch core against real plugins on real unix sockets: what a person sees happen, in order.

GIVEN a plugin serving devices (the in-process DevicePluginServer, or a
misbehaving server from badservers), WHEN its devices change, it dies, it
comes back, or it never answers, THEN the timeline says so — within a bounded
wait, so a bug fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest
from badservers import dying_stream_plugin, frozen_socket, hung_server, malformed_plugin

from devctl.core.watch import Notice, UnknownTarget, WatchEvent, WatchItem, watch
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec, counted_devices
from devctl.model import Device, NodePaths
from devctl.node.paths import resolve_paths

RESOURCE = "example.com/gpu"


def spec(resource: str = RESOURCE, count: int = 4, socket: str = "") -> PluginSpec:
    return PluginSpec(resource=resource, devices=counted_devices(resource, count, [0, 0, 1, 1]), socket=socket)


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    os.makedirs(p.plugins_dir)
    return p


def naming(mapping: Mapping[str, str]) -> Callable[[], asyncio.Future]:
    """A resolver that names the sockets that exist right now, as collect() would once the kubelet knows them."""

    def exists(path: str) -> bool:
        return os.path.exists(path)

    async def resolve() -> dict[str, str | None]:
        return {s: r for s, r in mapping.items() if exists(s)}

    return resolve


class Timeline:
    """Reads a watch with a bounded wait per item; keeps the notices it passes.

    A pump task drains the generator into a queue: a timed-out wait must not
    cancel the generator itself, which would end the watch.
    """

    def __init__(self, items: AsyncIterator[WatchItem]):
        self.queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self.notices: list[str] = []
        self.pump = asyncio.ensure_future(self._pump(items))

    async def _pump(self, items: AsyncIterator[WatchItem]) -> None:
        async for item in items:
            if isinstance(item, Notice):
                self.notices.append(item.message)
            else:
                self.queue.put_nowait(item)

    async def said(self, text: str, timeout: float = 3.0) -> str:
        """The first notice containing ``text``, waiting for it a bounded time."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not (found := [n for n in self.notices if text in n]):
            assert asyncio.get_running_loop().time() < deadline, f"no notice {text!r} in {self.notices}"
            await asyncio.sleep(0.02)
        return found[0]

    async def next(self, timeout: float = 3.0) -> WatchEvent:
        while True:
            if self.queue.empty():
                get = asyncio.ensure_future(self.queue.get())
                await asyncio.wait({get, self.pump}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    get.cancel()
                    if self.pump.done():
                        self.pump.result()  # the watch raised: show why
                        raise AssertionError("the watch ended")
                    raise asyncio.TimeoutError(f"no event within {timeout}s")
                item = get.result()
            else:
                item = self.queue.get_nowait()
            assert isinstance(item, WatchEvent)
            return item

    async def take(self, n: int, timeout: float = 3.0) -> list[WatchEvent]:
        return [await self.next(timeout) for _ in range(n)]

    async def until(self, event: str, timeout: float = 5.0) -> WatchEvent:
        async def find() -> WatchEvent:
            while (e := await self.next(timeout)).event != event:
                pass
            return e

        return await asyncio.wait_for(find(), timeout)


@contextlib.asynccontextmanager
async def timeline(paths: NodePaths, **kw) -> AsyncIterator[Timeline]:
    kw.setdefault("timeout", 1.0)
    async with contextlib.aclosing(watch(paths, **kw)) as items:
        t = Timeline(items)
        try:
            yield t
        finally:
            t.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t.pump


async def test_snapshot_then_a_health_flip_within_one_second(paths: NodePaths) -> None:
    async with (
        DevicePluginServer(spec(), paths.plugins_dir, register=False) as plugin,
        timeline(paths, sockets=[plugin.socket_path]) as t,
    ):
        snap = await t.next()
        assert (snap.event, snap.socket, snap.device, snap.devices, snap.healthy) == (
            "snapshot",
            plugin.socket_path,
            None,
            4,
            4,
        )
        plugin.set_health("gpu-2", "Unhealthy")
        flip = await t.next(timeout=1.0)
        assert (flip.event, flip.device, flip.from_, flip.to, flip.devices, flip.healthy) == (
            "health",
            "gpu-2",
            "Healthy",
            "Unhealthy",
            4,
            3,
        )
        assert flip.time >= snap.time


async def test_devices_added_and_removed(paths: NodePaths) -> None:
    async with (
        DevicePluginServer(spec(), paths.plugins_dir, register=False) as plugin,
        timeline(paths, sockets=[plugin.socket_path], resolve=naming({plugin.socket_path: RESOURCE})) as t,
    ):
        assert (await t.next()).resource == RESOURCE
        # One change at a time: the plugin sends a stream only the newest list it has not taken yet.
        plugin.add(Device("gpu-9", numa_nodes=(1,)))
        added = await t.next()
        plugin.remove("gpu-0")
        removed = await t.next()
        assert (added.event, added.device, added.to, added.devices) == ("added", "gpu-9", "Healthy", 5)
        assert (removed.event, removed.device, removed.devices, removed.resource) == (
            "removed",
            "gpu-0",
            4,
            RESOURCE,
        )


async def test_plugin_killed_and_started_again_reconnects_with_the_diff(paths: NodePaths) -> None:
    plugin = DevicePluginServer(spec(), paths.plugins_dir, register=False)
    await plugin.start()
    try:
        async with timeline(paths, sockets=[plugin.socket_path]) as t:
            await t.until("snapshot")
            await plugin.stop()
            down = await t.next()
            assert (down.event, down.devices, down.healthy) == ("disconnected", 4, 4)
            # While it was down, the plugin lost gpu-3, gained gpu-4, and gpu-1 went bad.
            devices = [d for d in spec().devices if d.id != "gpu-3"] + [Device("gpu-4")]
            plugin = DevicePluginServer(
                PluginSpec(resource=RESOURCE, devices=tuple(devices)), paths.plugins_dir, register=False
            )
            await plugin.start()
            plugin.set_health("gpu-1", "Unhealthy")
            back = await t.next(timeout=4.0)  # backoff is capped at ~2 s
            assert (back.event, back.socket) == ("reconnected", plugin.socket_path)
            # gpu-1's flip is in the diff, or comes right after it: three events either way.
            changes = await t.take(3)
            assert {(e.event, e.device) for e in changes} == {
                ("removed", "gpu-3"),
                ("added", "gpu-4"),
                ("health", "gpu-1"),
            }
            assert (changes[-1].devices, changes[-1].healthy) == (4, 3)
            await t.said("reconnecting")
    finally:
        await plugin.stop()


async def test_socket_deleted_and_created_again_like_a_kubelet_restart(paths: NodePaths) -> None:
    async with (
        DevicePluginServer(spec(), paths.plugins_dir, register=False) as plugin,
        timeline(paths, sockets=[plugin.socket_path]) as t,
    ):
        await t.until("snapshot")
        # A restarting kubelet deletes every socket in the plugins dir; the plugin serves a new one.
        os.unlink(plugin.socket_path)
        assert (await t.next()).event == "disconnected"
        back = await t.next(timeout=4.0)
        assert (back.event, back.devices) == ("reconnected", 4)
        plugin.set_health("gpu-0", "Unhealthy")
        assert (await t.next(timeout=1.0)).device == "gpu-0"


async def test_a_dying_stream_is_followed_across_restarts(paths: NodePaths) -> None:
    socket = os.path.join(paths.plugins_dir, "dying.sock")
    async with dying_stream_plugin(socket, after=2), timeline(paths, sockets=[socket]) as t:
        events = await t.take(5)
        assert [(e.event, e.device) for e in events] == [
            ("snapshot", None),
            ("added", "dev-1"),
            ("disconnected", None),
            # A new stream starts again with one device: the diff against the last list known.
            ("reconnected", None),
            ("removed", "dev-1"),
        ]
        assert events[2].devices == 2 and events[3].devices == 1


async def test_a_malformed_plugin_does_not_disturb_the_watch_of_another(paths: NodePaths) -> None:
    bad = os.path.join(paths.plugins_dir, "bad.sock")
    async with (
        malformed_plugin(bad),
        DevicePluginServer(spec(), paths.plugins_dir, register=False) as good,
        timeline(paths, sockets=[bad, good.socket_path]) as t,
    ):
        snap = await t.next()
        assert (snap.event, snap.socket) == ("snapshot", good.socket_path)
        good.set_health("gpu-3", "Unhealthy")
        flip = await t.next(timeout=1.0)
        assert (flip.event, flip.device, flip.socket) == ("health", "gpu-3", good.socket_path)
        assert (await t.said(bad)).startswith(bad)


async def test_a_frozen_plugin_does_not_hold_up_another(paths: NodePaths) -> None:
    frozen = os.path.join(paths.plugins_dir, "frozen.sock")
    async with (
        frozen_socket(frozen),
        DevicePluginServer(spec(), paths.plugins_dir, register=False) as good,
        timeline(paths, sockets=[frozen, good.socket_path], timeout=0.5) as t,
    ):
        assert (await t.next()).socket == good.socket_path
        good.remove("gpu-1")
        assert (await t.next()).event == "removed"
        # once the frozen socket's deadline has passed (and been said), the good one is still followed
        assert (await t.said("no device list within 0.5s")).startswith(frozen)
        good.remove("gpu-2")
        assert (await t.next()).device == "gpu-2"


async def test_an_unknown_socket_or_resource_without_wait_is_an_error(paths: NodePaths) -> None:
    with pytest.raises(UnknownTarget, match="no such socket"):
        async with timeline(paths, sockets=[os.path.join(paths.plugins_dir, "nope.sock")]) as t:
            await t.next()
    with pytest.raises(UnknownTarget, match=r"no plugin serves example\.com/nope"):
        async with timeline(paths, resources=["example.com/nope"], resolve=naming({})) as t:
            await t.next()


async def test_wait_for_a_socket_then_its_snapshot(paths: NodePaths) -> None:
    socket = os.path.join(paths.plugins_dir, spec().socket)
    async with timeline(paths, sockets=[socket], wait=True) as t:
        with pytest.raises(asyncio.TimeoutError):
            await t.next(timeout=0.3)
        await t.said("waiting for")
        assert t.notices == [f"waiting for {socket}"]  # said once, not at every retry
        async with DevicePluginServer(spec(), paths.plugins_dir, register=False):
            snap = await t.next(timeout=3.0)
            assert (snap.event, snap.devices) == ("snapshot", 4)


async def test_wait_for_a_resource_then_its_snapshot(paths: NodePaths) -> None:
    socket = os.path.join(paths.plugins_dir, spec().socket)
    async with timeline(paths, resources=[RESOURCE], wait=True, resolve=naming({socket: RESOURCE})) as t:
        with pytest.raises(asyncio.TimeoutError):
            await t.next(timeout=0.3)
        await t.said("waiting for")
        assert t.notices == [f"waiting for {RESOURCE} to be served"]
        async with DevicePluginServer(spec(), paths.plugins_dir, register=False):
            snap = await t.next(timeout=3.0)
            assert (snap.event, snap.resource, snap.socket) == ("snapshot", RESOURCE, socket)


async def test_a_resource_that_moves_to_another_socket_is_followed(paths: NodePaths) -> None:
    first = spec(socket="gpu-a.sock")
    second = spec(socket="gpu-b.sock")
    sockets = {os.path.join(paths.plugins_dir, s.socket): RESOURCE for s in (first, second)}
    async with timeline(paths, resources=[RESOURCE], resolve=naming(sockets), wait=True) as t:
        async with DevicePluginServer(first, paths.plugins_dir, register=False):
            assert (await t.next()).socket.endswith("gpu-a.sock")
        assert (await t.next()).event == "disconnected"
        async with DevicePluginServer(second, paths.plugins_dir, register=False):
            back = await t.next(timeout=4.0)
            assert (back.event, back.socket.endswith("gpu-b.sock")) == ("reconnected", True)


async def test_once_gives_one_snapshot_per_target_and_ends(paths: NodePaths) -> None:
    a, b = spec("example.com/a", 2), spec("example.com/b", 3)
    async with (
        DevicePluginServer(a, paths.plugins_dir, register=False) as pa,
        DevicePluginServer(b, paths.plugins_dir, register=False) as pb,
    ):
        items = watch(paths, sockets=[pa.socket_path, pb.socket_path], once=True, timeout=1.0)
        got = await asyncio.wait_for(_all(items), 5.0)
    events = [i for i in got if isinstance(i, WatchEvent)]
    assert sorted((e.event, e.devices) for e in events) == [("snapshot", 2), ("snapshot", 3)]


async def test_once_ends_even_when_a_target_fails(paths: NodePaths) -> None:
    bad = os.path.join(paths.plugins_dir, "bad.sock")
    async with malformed_plugin(bad), DevicePluginServer(spec(), paths.plugins_dir, register=False) as good:
        got = await asyncio.wait_for(_all(watch(paths, sockets=[bad, good.socket_path], once=True, timeout=1.0)), 5.0)
    assert [i.event for i in got if isinstance(i, WatchEvent)] == ["snapshot"]
    assert any(isinstance(i, Notice) and i.message.startswith(bad) for i in got)


async def test_the_whole_node_is_watched_including_plugins_that_start_later(paths: NodePaths) -> None:
    # No kubelet here, so the default resolver (devctl.core.collect) cannot name the resources.
    async with (
        DevicePluginServer(spec("example.com/a", 2), paths.plugins_dir, register=False) as a,
        timeline(paths) as t,
    ):
        first = await t.next()
        assert (first.event, first.socket, first.resource) == ("snapshot", a.socket_path, None)
        async with DevicePluginServer(spec("example.com/b", 3), paths.plugins_dir, register=False) as b:
            later = await t.next()
            assert (later.event, later.socket, later.devices) == ("snapshot", b.socket_path, 3)


async def test_a_resource_streams_at_once_while_another_socket_hangs(paths: NodePaths) -> None:
    # GIVEN a plugin serving the resource and, beside it, a socket that accepts and never answers
    hung = os.path.join(paths.plugins_dir, "hung.sock")
    async with hung_server(hung), DevicePluginServer(spec(), paths.plugins_dir, register=False) as plugin:
        names = naming({plugin.socket_path: RESOURCE, hung: "example.com/other"})
        started = asyncio.get_running_loop().time()
        # WHEN the resource is watched with a deadline far longer than the test may wait
        async with timeline(paths, resources=[RESOURCE], resolve=names, timeout=5.0) as t:
            # THEN its snapshot comes long before the hung socket's deadline ...
            snap = await t.next(timeout=2.0)
            assert (snap.event, snap.socket, snap.devices) == ("snapshot", plugin.socket_path, 4)
            assert asyncio.get_running_loop().time() - started < 2.0
            # ... and the snapshot is the stream's own first list: the next change is the next event
            plugin.set_health("gpu-2", "Unhealthy")
            flip = await t.next(timeout=2.0)
            assert (flip.event, flip.device) == ("health", "gpu-2")


class _Gated:
    """A plugin whose ListAndWatch says nothing until ``gate`` is set: a plugin stuck at start-up."""

    def __init__(self, gate: asyncio.Event):
        from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

        class Servicer(dp_grpc.DevicePluginServicer):
            async def ListAndWatch(self, request, context):
                from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp

                await gate.wait()
                yield dp.ListAndWatchResponse(devices=[dp.Device(ID="late-0", health="Healthy")])
                await asyncio.Event().wait()

        self.servicer = Servicer()
        self.add = dp_grpc.add_DevicePluginServicer_to_server


async def test_a_socket_that_answers_after_its_deadline_joins_the_watch(paths: NodePaths) -> None:
    import grpc

    # GIVEN a socket that hangs past the watch's deadline, then answers (on the stream already open)
    late = os.path.join(paths.plugins_dir, "late.sock")
    gate = asyncio.Event()
    gated = _Gated(gate)
    server = grpc.aio.server()
    gated.add(gated.servicer, server)
    server.add_insecure_port(f"unix:{late}")
    await server.start()
    try:
        async with timeline(paths, resources=[RESOURCE], wait=True, resolve=naming({late: RESOURCE}), timeout=0.3) as t:
            with pytest.raises(asyncio.TimeoutError):
                await t.next(timeout=0.6)
            # WHEN it answers at last
            gate.set()
            # THEN it joins the watch then
            snap = await t.next(timeout=3.0)
            assert (snap.event, snap.socket, snap.devices) == ("snapshot", late, 1)
    finally:
        await server.stop(None)


async def _all(items: AsyncIterator[WatchItem]) -> list[WatchItem]:
    return [i async for i in items]
