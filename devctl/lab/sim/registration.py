"""The simulated kubelet's Registration server on ``<plugins_dir>/kubelet.sock``.

It does what pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go does in
Register: check the API version and the resource name, dial the plugin's
socket and ask for its options (client.go, ``dial`` with a 10 s timeout, then
the manager's PluginConnected), and only then answer; the device manager then
follows the plugin's ListAndWatch. Errors reach the plugin as status UNKNOWN
(plain Go errors on the upstream server) with the kubelet's wording.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Protocol

import grpc

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.base.errors import DevctlError
from devctl.lab import serving
from devctl.lab.plugin.spec import resource_name_error
from devctl.model import PluginOptions
from devctl.node.deviceplugin import API_VERSION, DevicePluginClient
from devctl.node.rpc import RpcFailure, check_socket

log = logging.getLogger("devctl.lab.sim.kubelet")

SUPPORTED_VERSIONS = (API_VERSION,)
# client.go dials with grpc.WithBlock under this timeout; an absent plugin makes Register wait it out.
DIAL_TIMEOUT = 10.0
DIAL_RETRY = 0.05
STOP_GRACE = 0.5


class PluginHandler(Protocol):
    """Who takes a plugin once Register accepted it: the device manager."""

    def plugin_connected(
        self, resource: str, socket_path: str, client: DevicePluginClient, options: PluginOptions
    ) -> None:
        """Own ``client`` from now on: follow its ListAndWatch, close it when done."""
        ...


def unsupported_version(version: str) -> str:
    # server.go: errUnsupportedVersion formatted with %q of the version and of []string.
    quoted = ", ".join(f'"{v}"' for v in SUPPORTED_VERSIONS)
    return f'requested API version "{version}" is not supported by kubelet. Supported version is [{quoted}]'


def invalid_resource_name(name: str, why: str) -> str:
    # server.go: errInvalidResourceName; the reason after it is devctl's, to save a lookup.
    return f'the ResourceName "{name}" is invalid ({why})'


def endpoint_path(plugins_dir: str, endpoint: str) -> str:
    """``filepath.Join(socketDir, r.Endpoint)``: Go's Join keeps an absolute endpoint under the dir."""
    return os.path.normpath(os.path.join(plugins_dir, endpoint.lstrip("/")))


class RegistrationServer(serving.StartStop):
    """``/v1beta1.Registration/Register`` on a unix socket; accepted plugins go to ``handler``."""

    def __init__(self, socket_path: str, handler: PluginHandler, *, dial_timeout: float = DIAL_TIMEOUT):
        self.socket_path = socket_path
        self.plugins_dir = os.path.dirname(socket_path)
        self.handler = handler
        self.dial_timeout = dial_timeout
        self._serving = serving.UnixGrpcServer(socket_path, self._add, grace=STOP_GRACE, dir_mode=0o777)

    def _add(self, server: grpc.aio.Server) -> None:
        dp_grpc.add_RegistrationServicer_to_server(_Registration(self), server)

    async def start(self) -> None:
        await self._serving.start()
        log.info("kubelet: registration server listening on %s", self.socket_path)

    async def stop(self) -> None:
        """Stop listening (Register calls in flight are cancelled) and remove the socket."""
        await self._serving.stop()

    async def connect(self, resource: str, socket_path: str) -> None:
        """Dial the plugin and get its options, as Register does before it answers; raises RegisterError."""
        deadline = time.monotonic() + self.dial_timeout
        # grpc.WithBlock: wait for the socket to accept, up to the deadline. Checking at the socket
        # level first keeps gRPC's reconnect backoff from delaying a plugin that is just starting.
        while True:
            try:
                await check_socket(socket_path, max(0.01, deadline - time.monotonic()))
                break
            except RpcFailure:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RegisterError("failed to dial device plugin: context deadline exceeded") from None
                await asyncio.sleep(min(DIAL_RETRY, left))
        client = DevicePluginClient(socket_path, timeout=max(0.01, deadline - time.monotonic()))
        try:
            options = await client.options()
        except RpcFailure as e:
            await client.close()
            raise RegisterError(f"failed to get device plugin options: {e.message}") from None
        except BaseException:
            await client.close()
            raise
        self.handler.plugin_connected(resource, socket_path, client, options)


class RegisterError(DevctlError):
    """Why Register refused a plugin; sent to it as status UNKNOWN."""


class _Registration(dp_grpc.RegistrationServicer):
    def __init__(self, server: RegistrationServer):
        self.server = server

    async def Register(self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext) -> dp.Empty:
        resource = request.resource_name
        # debug: the "registered" line that follows is the event; a refused request logs its own warning.
        log.debug("kubelet: registration request from %s (endpoint %s)", resource, request.endpoint)
        if request.version not in SUPPORTED_VERSIONS:
            await self._refuse(context, resource, unsupported_version(request.version))
        if (why := resource_name_error(resource)) is not None:
            await self._refuse(context, resource, invalid_resource_name(resource, why))
        # RegisterRequest.options is ignored, as upstream does: the options come from the plugin itself.
        try:
            await self.server.connect(resource, endpoint_path(self.server.plugins_dir, request.endpoint))
        except RegisterError as e:
            await self._refuse(context, resource, str(e))
        log.info("kubelet: registered %s at %s", resource, request.endpoint)
        return dp.Empty()

    @staticmethod
    async def _refuse(context: grpc.aio.ServicerContext, resource: str, message: str) -> None:
        log.warning("kubelet: refused registration of %s: %s", resource or "(no name)", message)
        await context.abort(grpc.StatusCode.UNKNOWN, message)
