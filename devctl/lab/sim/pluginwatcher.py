"""The simulated kubelet's plugin watcher on ``<kubelet-dir>/plugins_registry/``.

As pkg/kubelet/pluginmanager does: the directory is walked recursively; every
unix socket whose name does not start with ``.`` is a registration socket
(those already there at start too); each new one is asked ``GetInfo`` (1 s
deadline), handed by its ``type`` to a handler (``DRAPlugin`` to the DRA
manager, ``DevicePlugin`` to the device manager), and told the outcome with
``NotifyRegistrationStatus``. A type with no handler (``CSIPlugin`` on this
node) is refused the same way. A socket that goes away deregisters its plugin.
Polling replaces fsnotify: portable, and cheap for a directory of a few sockets.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import grpc

from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.base.waits import cancel_and_wait
from devctl.lab.plugin.spec import resource_name_error
from devctl.lab.sim.registration import RegisterError, RegistrationServer, invalid_resource_name
from devctl.model import RegistryInfo
from devctl.node.deviceplugin import API_VERSION
from devctl.node.rpc import plugin_channel

log = logging.getLogger("devctl.lab.sim.kubelet")

GET_INFO_TIMEOUT = 1.0  # pluginmanager operationexecutor: dial and GetInfo within a second
NOTIFY_TIMEOUT = 1.0
SCAN_INTERVAL = 0.1


class RegistryHandler(Protocol):
    """Takes the plugins of one ``type``: checks and registers them, and forgets them when their socket goes."""

    async def register(self, info: RegistryInfo, registration_socket: str) -> str | None:
        """Register the plugin; None when accepted, else the reason it is refused (sent to the plugin)."""
        ...

    def deregister(self, info: RegistryInfo, registration_socket: str) -> None: ...


@dataclass
class _Seen:
    ident: tuple[int, int]
    info: RegistryInfo | None = None  # set once registered with a handler


def _socket_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if stat.S_ISSOCK(st.st_mode) else None


def resolve_endpoint(root: str, endpoint: str, registration_socket: str) -> str:
    """A plugin's endpoint as a path here: empty is the registration socket, absolute is under the node root."""
    if not endpoint:
        return registration_socket
    if os.path.isabs(endpoint):
        return os.path.normpath(os.path.join(root, endpoint.lstrip("/")))
    return os.path.normpath(os.path.join(os.path.dirname(registration_socket), endpoint))


def registration_sockets(directory: str) -> dict[str, tuple[int, int]]:
    """Every unix socket under ``directory`` (recursive, no symlinks followed, dot-names skipped)."""
    found: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            ident = _socket_id(path)
            if ident is not None:
                found[path] = ident
    return found


class PluginWatcher:
    """Watch ``registry_dir`` and hand each plugin to the handler of its type."""

    def __init__(self, registry_dir: str, handlers: Mapping[str, RegistryHandler], *, interval: float = SCAN_INTERVAL):
        self.registry_dir = registry_dir
        self.handlers = dict(handlers)
        self.interval = interval
        self._seen: dict[str, _Seen] = {}
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        os.makedirs(self.registry_dir, exist_ok=True)
        self._task = asyncio.create_task(self._loop(), name=f"plugin watcher {self.registry_dir}")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._pending) if t is not None]
        await cancel_and_wait(*tasks)
        self._task = None
        self._pending.clear()

    @property
    def registered(self) -> dict[str, RegistryInfo]:
        """Registration socket -> what it said, for every plugin a handler accepted."""
        return {path: s.info for path, s in self._seen.items() if s.info is not None}

    async def _loop(self) -> None:
        while True:
            self._scan(await asyncio.to_thread(registration_sockets, self.registry_dir))
            await asyncio.sleep(self.interval)

    def _scan(self, found: Mapping[str, tuple[int, int]]) -> None:
        for path in [p for p in self._seen if p not in found or found[p] != self._seen[p].ident]:
            self._gone(path)
        for path, ident in found.items():
            if path not in self._seen:
                self._seen[path] = _Seen(ident)
                task = asyncio.create_task(self._register(path, self._seen[path]), name=f"register {path}")
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)

    def _gone(self, path: str) -> None:
        seen = self._seen.pop(path)
        if seen.info is not None:
            log.info("kubelet: %s %s left (%s removed)", seen.info.type, seen.info.name, path)
            self.handlers[seen.info.type].deregister(seen.info, path)

    async def _register(self, path: str, seen: _Seen) -> None:
        try:
            async with plugin_channel(path) as ch:
                stub = reg_grpc.RegistrationStub(ch)
                try:
                    pb = await stub.GetInfo(reg.InfoRequest(), timeout=GET_INFO_TIMEOUT)
                except grpc.aio.AioRpcError as e:
                    log.warning("kubelet: %s: GetInfo failed: %s", path, e.details() or e.code().name)
                    return
                if not isinstance(pb, reg.PluginInfo):  # grpc.aio gives None for a reply it cannot decode
                    log.warning("kubelet: %s: GetInfo failed: the answer is not a PluginInfo", path)
                    return
                info = RegistryInfo(pb.type, pb.name, pb.endpoint, tuple(pb.supported_versions))
                handler = self.handlers.get(info.type)
                error: str | None
                if handler is None:
                    error = f"no handler registered for plugin type: {info.type} at socket {path}"
                else:
                    error = await handler.register(info, path)
                if error is None and self._seen.get(path) is seen:
                    seen.info = info
                elif error is not None:
                    log.warning("kubelet: refused %s %s: %s", info.type or "(no type)", info.name, error)
                try:
                    await stub.NotifyRegistrationStatus(
                        reg.RegistrationStatus(plugin_registered=error is None, error=error or ""),
                        timeout=NOTIFY_TIMEOUT,
                    )
                except grpc.aio.AioRpcError as e:
                    log.warning("kubelet: %s: NotifyRegistrationStatus failed: %s", path, e.details() or e.code().name)
        except Exception as e:  # a plugin's garbage must not stop the watcher
            log.warning("kubelet: %s: registration failed: %s", path, e)


class DevicePluginRegistryHandler:
    """``DevicePlugin`` registrations through ``plugins_registry``: handed to the device manager as Register does.

    The kubelet's device manager takes plugins from the watcher too
    (pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go): the name is the
    resource, the endpoint the plugin's socket, and it is dialled for its
    options before the plugin is told it is registered.
    """

    def __init__(self, registration: RegistrationServer, root: str):
        self.registration = registration
        self.root = root

    async def register(self, info: RegistryInfo, registration_socket: str) -> str | None:
        if API_VERSION not in info.supported_versions:
            return f"device plugin {info.name} offers {list(info.supported_versions)}, not {API_VERSION}"
        if (why := resource_name_error(info.name)) is not None:
            return invalid_resource_name(info.name, why)
        try:
            await self.registration.connect(info.name, resolve_endpoint(self.root, info.endpoint, registration_socket))
        except RegisterError as e:
            return str(e)
        return None

    def deregister(self, info: RegistryInfo, registration_socket: str) -> None:
        """Nothing to do: the device manager notices the plugin's ListAndWatch end."""
