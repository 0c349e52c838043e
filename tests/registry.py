"""A plugin-watcher registration socket, as a device plugin puts one in ``plugins_registry/``: a real server.

It answers ``GetInfo`` with the PluginInfo it is given; with ``devices`` it also
serves DevicePlugin on the same socket (what an empty endpoint means). The
devices are sent as one ListAndWatch list, and the stream then stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.model import Device


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, info: reg.PluginInfo):
        self.info = info

    async def GetInfo(self, request, context):  # type: ignore[no-untyped-def]
        return self.info

    async def NotifyRegistrationStatus(self, request, context):  # type: ignore[no-untyped-def]
        return reg.RegistrationStatusResponse()


class _Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, devices: Sequence[Device]):
        self.devices = devices

    async def GetDevicePluginOptions(self, request, context):  # type: ignore[no-untyped-def]
        return dp.DevicePluginOptions()

    async def ListAndWatch(self, request, context):  # type: ignore[no-untyped-def]
        yield dp.ListAndWatchResponse(devices=[dp.Device(ID=d.id, health=d.health) for d in self.devices])
        await asyncio.Event().wait()  # a live plugin keeps its stream open


def plugin_info(name: str, endpoint: str, type_: str = "DevicePlugin") -> reg.PluginInfo:
    return reg.PluginInfo(type=type_, name=name, endpoint=endpoint, supported_versions=["v1beta1"])


@contextlib.asynccontextmanager
async def registry_server(
    path: str | Path, info: reg.PluginInfo, devices: Sequence[Device] | None = None
) -> AsyncIterator[str]:
    """Serve ``info`` on ``path`` (its directories made), and DevicePlugin there too when ``devices`` is given."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    server = grpc.aio.server()
    reg_grpc.add_RegistrationServicer_to_server(_Registration(info), server)
    if devices is not None:
        dp_grpc.add_DevicePluginServicer_to_server(_Plugin(devices), server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield str(path)
    finally:
        await server.stop(None)
