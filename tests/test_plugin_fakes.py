"""Small real servers that stand in for the kubelet in the plugin tests, and helpers to run devctl.

``FakeKubelet`` serves ``v1beta1.Registration/Register`` on ``kubelet.sock`` and,
like the kubelet, dials the plugin back for GetDevicePluginOptions *inside*
Register and then follows its ListAndWatch stream. ``FakePodResources`` answers
GetAllocatableResources. Both are real grpc.aio servers on real unix sockets;
nothing here mocks a stub. ``devctl`` and ``Serving`` run the real command in a
child process (through ``helpers``). (This file holds no tests of its own.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from helpers import DEVCTL, Result, devctl_env, run_devctl_async

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.podresources.v1 import api_pb2 as prv1
from devctl.api.podresources.v1 import api_pb2_grpc as prv1_grpc
from devctl.model import Device, PluginOptions
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.rpc import RpcFailure


@dataclass
class Registration:
    resource: str
    endpoint: str
    version: str
    options: PluginOptions | None  # what GetDevicePluginOptions said inside Register
    error: str | None = None


@dataclass
class FakeKubelet(dp_grpc.RegistrationServicer):
    plugins_dir: Path
    registrations: list[Registration] = field(default_factory=list)
    lists: dict[str, list[tuple[Device, ...]]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _server: grpc.aio.Server | None = None
    _watchers: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def socket(self) -> str:
        return str(self.plugins_dir / "kubelet.sock")

    async def start(self) -> None:
        self.plugins_dir.mkdir(parents=True, exist_ok=True)
        self._server = grpc.aio.server()
        dp_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix:{self.socket}")
        await self._server.start()

    async def stop(self) -> None:
        for task in self._watchers:
            task.cancel()
        self._watchers.clear()
        if self._server is not None:
            await self._server.stop(0)
            self._server = None

    async def restart(self) -> None:
        """As a kubelet restart: every socket in the dir deleted, then kubelet.sock created again."""
        await self.stop()
        for entry in os.scandir(self.plugins_dir):
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
        await self.start()

    async def Register(self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext) -> dp.Empty:
        reg = Registration(request.resource_name, request.endpoint, request.version, None)
        self.registrations.append(reg)
        if request.version != "v1beta1":
            reg.error = "unsupported version"
            await context.abort(grpc.StatusCode.UNKNOWN, f"Unsupported version {request.version}")
        endpoint = str(self.plugins_dir / request.endpoint)
        # pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go: dial the plugin, ask its options, then return.
        client = DevicePluginClient(endpoint, timeout=10)
        try:
            reg.options = await client.options()
        except RpcFailure as e:
            reg.error = e.message
            await client.close()
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {e.message}")
        self._watchers.append(asyncio.create_task(self._follow(client, request.resource_name)))
        self.changed.set()
        return dp.Empty()

    async def _follow(self, client: DevicePluginClient, resource: str) -> None:
        try:
            async for devices in client.list_and_watch():
                self.lists.setdefault(resource, []).append(devices)
                self.changed.set()
        except RpcFailure:
            pass
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def wait_for(self, predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
        """Wait until ``predicate()`` holds, re-checking on each registration or device list."""

        async def loop() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), timeout)


class FakePodResources(prv1_grpc.PodResourcesListerServicer):
    """GetAllocatableResources with a fixed device list: what the kubelet says is healthy."""

    def __init__(self, socket: str, devices: dict[str, list[str]]):
        self.socket = socket
        self.devices = devices
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        Path(self.socket).parent.mkdir(parents=True, exist_ok=True)
        self._server = grpc.aio.server()
        prv1_grpc.add_PodResourcesListerServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix:{self.socket}")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)

    async def GetAllocatableResources(self, request, context):  # type: ignore[no-untyped-def]
        return prv1.AllocatableResourcesResponse(
            devices=[
                prv1.ContainerDevices(resource_name=resource, device_ids=[i])
                for resource, ids in self.devices.items()
                for i in ids
            ]
        )


async def devctl(root: Path, *args: str, timeout: float = 20) -> Result:
    """``devctl --root ROOT ARGS...`` to completion: ``code, out, err = await devctl(...)``."""
    return await run_devctl_async("--root", str(root), *args, timeout=timeout)


class Serving:
    """A `devctl plugin serve` process, ready once its control socket exists."""

    def __init__(self, root: Path, *args: str):
        self.root = root
        self.args = args
        self.ctl_dir = root / "run/devctl/plugins"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, ready: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *DEVCTL, "--root", str(self.root), "plugin", "serve", *self.args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=devctl_env(),
        )  # fmt: skip

        async def wait() -> None:
            while not (self.ctl_dir / ready).exists():
                assert self.proc is not None and self.proc.returncode is None, "devctl plugin serve exited"
                await asyncio.sleep(0.05)

        await asyncio.wait_for(wait(), 15)

    async def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        _, err = await asyncio.wait_for(self.proc.communicate(), 10)
        assert self.proc.returncode is not None
        return self.proc.returncode, err.decode()
