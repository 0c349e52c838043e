"""A minimal DRA kubelet plugin (driver) in this process: registration, prepare/unprepare, CDI specs, health.

It is laid out as a real driver built on kubernetes/dynamic-resource-allocation's
``kubeletplugin`` helper: a registration socket in
``<kubelet-dir>/plugins_registry/<driver>-reg.sock`` answering GetInfo (type
``DRAPlugin``, the driver name, its endpoint as the kubelet sees it, the
service labels it speaks) and logging NotifyRegistrationStatus; the DRA
service (v1 and/or v1beta1) and the health stream (v1alpha1 and v1) on
``<kubelet-dir>/plugins/<driver>/dra.sock``.

A claim's devices come from the scheduler's allocation, which a node never
sees in a DRA gRPC call: ``allocation`` answers it (the simulator's record,
or ``--claims FILE``), and a claim it does not know is refused with an error
saying so. Prepare is idempotent (a prepared claim returns the same devices)
and writes one transient CDI spec per claim; unprepare removes it and
succeeds for a claim it never prepared. Health changes (this process, or
``devctl plugin set-health`` through the control socket) reach every open
health stream at once, each message the full device list.

All methods run on the event loop that called ``start``; none is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc

from devctl.api.dra.v1 import api_pb2 as dra_v1
from devctl.api.dra.v1 import api_pb2_grpc as dra_v1_grpc
from devctl.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from devctl.api.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from devctl.api.drahealth.v1 import api_pb2 as health_v1
from devctl.api.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from devctl.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from devctl.api.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.base.waits import cancel_and_wait, within
from devctl.lab import made, serving
from devctl.lab.plugin import cdi
from devctl.lab.plugin.dra_control import DraControlServer, health_value
from devctl.lab.plugin.dra_spec import (
    ALLOCATIONS_FILE,
    DEFAULT_HEALTH_TIMEOUT,
    DRA_LABELS,
    HEALTH_LABEL,
    MAX_MESSAGE,
    PLUGIN_TYPE,
    RPC_LOG_SIZE,
    UNKNOWN,
    Allocation,
    DraDevice,
    DraDeviceError,
    DraSpec,
    default_major,
    device_path,
    node_path,
    recorded_allocation,
)
from devctl.lab.plugin.server import STOP_GRACE, RpcRecord, ServeError
from devctl.model import HEALTHY, UNHEALTHY


@dataclass
class _Prepared:
    devices: tuple[str, ...]
    spec_path: str


class DraDriver(serving.StartStop):
    """Serve one DRA driver (a DraSpec) under ``kubelet_dir``; ``root`` is the node root (CDI dir, endpoint)."""

    def __init__(
        self,
        spec: DraSpec,
        kubelet_dir: str,
        *,
        root: str = "/",
        allocation: Allocation | None = None,
        register: bool = True,
        control_dir: str | None = None,
        log: logging.Logger | None = None,
    ):
        self.spec = spec
        self.root = root
        self.kubelet_dir = kubelet_dir
        self.driver_dir = os.path.join(kubelet_dir, "plugins", spec.driver)
        self.socket_path = os.path.join(self.driver_dir, "dra.sock")
        self.registration_path = os.path.join(kubelet_dir, "plugins_registry", f"{spec.driver}-reg.sock")
        self.register_enabled = register
        self.allocation = allocation
        self.control_dir = control_dir
        self.log = log or logging.getLogger("devctl.lab.plugin.dra")
        self.rpc_log: deque[RpcRecord] = deque(maxlen=RPC_LOG_SIZE)
        self.registered: bool | None = None  # None until the kubelet said either way
        self.registration_error = ""
        now = int(time.time())
        self._devices: dict[str, DraDevice] = {
            d.name: replace(d, minor=i, updated=d.updated or now) for i, d in enumerate(spec.devices)
        }
        self._prepared: dict[str, _Prepared] = {}
        self._streams: set[asyncio.Queue[tuple[DraDevice, ...] | None]] = set()
        # The last health list sent, per API version, and its message: shared by every stream until it changes.
        self._sent: dict[str, tuple[tuple[DraDevice, ...], Any]] = {}
        self._servers: list[serving.UnixGrpcServer] = []
        self._made_dir = False
        self._control: DraControlServer | None = None
        self._status = asyncio.Condition()
        self._heartbeat: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Serve the DRA service first, then the registration socket the kubelet's watcher finds."""
        self._make_driver_dir()
        for path in (self.socket_path, self.registration_path):
            made.clear_for_bind(path)  # before anything is served: only a stale socket may go
        await self._serve(self.socket_path, self._add_dra_services)
        if self.register_enabled:
            await self._serve(self.registration_path, self._add_registration, dir_mode=0o750)
        if self.control_dir is not None:
            self._control = DraControlServer(self, self.control_dir)
            await self._control.start()
        if self.spec.health:
            self._heartbeat = asyncio.create_task(self._check_health(), name=f"health {self.spec.driver}")
        self.log.debug(  # the CLI says "serving" once itself
            "serving DRA driver %s on %s (%d devices, %s)",
            self.spec.driver,
            self.socket_path,
            len(self._devices),
            ", ".join(self.spec.supported_versions),
        )

    def _make_driver_dir(self) -> None:
        self._made_dir = not os.path.isdir(self.driver_dir)
        os.makedirs(self.driver_dir, 0o750, exist_ok=True)

    async def stop(self) -> None:
        """End health streams, stop serving, remove the sockets and CDI files this driver made. Safe twice."""
        if self._heartbeat is not None:
            await cancel_and_wait(self._heartbeat)
            self._heartbeat = None
        if self._control is not None:
            await self._control.stop()
            self._control = None
        for queue in self._streams:
            queue.put_nowait(None)
        # The registration socket goes first: the kubelet's watcher sees the driver leave.
        for server in reversed(self._servers):
            await server.stop()
        self._servers.clear()
        for uid in list(self._prepared):
            cdi.remove_claim_spec(self.root, self.spec.driver, uid)
        self._prepared.clear()
        if self._made_dir:
            with contextlib.suppress(OSError):
                os.rmdir(self.driver_dir)
            self._made_dir = False

    async def _serve(self, path: str, add: Callable[[grpc.aio.Server], None], dir_mode: int | None = None) -> None:
        server = serving.UnixGrpcServer(path, add, grace=STOP_GRACE, dir_mode=dir_mode)
        # before it starts: a Ctrl-C during the start still leaves the socket for stop() to remove (a sim stopped
        # then left <kubelet-dir>/plugins/<driver>/dra.sock behind, and the root with it)
        self._servers.append(server)
        try:
            await server.start()
        except (made.PathTaken, serving.BindError) as e:
            raise ServeError(str(e)) from None

    def _add_dra_services(self, server: grpc.aio.Server) -> None:
        if "v1" in self.spec.versions:
            dra_v1_grpc.add_DRAPluginServicer_to_server(_dra_servicer(self, dra_v1, dra_v1_grpc, "v1"), server)
        if "v1beta1" in self.spec.versions:
            dra_v1beta1_grpc.add_DRAPluginServicer_to_server(
                _dra_servicer(self, dra_v1beta1, dra_v1beta1_grpc, "v1beta1"), server
            )
        if self.spec.health:
            health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(
                _health_servicer(self, health_v1alpha1, health_v1alpha1_grpc), server
            )
            health_v1_grpc.add_DRAResourceHealthServicer_to_server(
                _health_servicer(self, health_v1, health_v1_grpc), server
            )

    def _add_registration(self, server: grpc.aio.Server) -> None:
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), server)

    @property
    def endpoint(self) -> str:
        """The DRA socket as the kubelet sees it on the node."""
        return node_path(self.root, self.socket_path)

    async def wait_registered(self, timeout: float = 5.0) -> bool:
        """Wait until the kubelet said whether it registered the driver; its answer (TimeoutError after ``timeout``)."""

        async def said() -> bool:
            async with self._status:
                await self._status.wait_for(lambda: self.registered is not None)
                return bool(self.registered)

        return await within(said(), timeout)

    # --- devices and health ---------------------------------------------------------

    @property
    def devices(self) -> tuple[DraDevice, ...]:
        return tuple(self._devices.values())

    @property
    def prepared(self) -> dict[str, tuple[str, ...]]:
        """Prepared claims: UID -> device names."""
        return {uid: p.devices for uid, p in self._prepared.items()}

    def device_key(self, text: str) -> str:
        """A device named as ``POOL/DEVICE`` or ``DEVICE`` in this driver's pool; DraDeviceError otherwise."""
        pool, sep, name = text.rpartition("/")
        if sep and pool != self.spec.pool:
            raise DraDeviceError(f"{self.spec.driver} serves pool {self.spec.pool}, not {pool!r}")
        return name

    def set_health(self, device: str, health: str, message: str = "") -> None:
        name = self.device_key(device)
        current = self._get(name)
        self._devices[name] = replace(current, health=health, message=message[:MAX_MESSAGE], updated=int(time.time()))
        self._record("set-health", (name,), health)
        self._publish()

    def add(self, device: DraDevice) -> None:
        name = self.device_key(device.name)
        if name in self._devices:
            raise DraDeviceError(f"{self.spec.driver} already has device {name!r}")
        minor = max((d.minor for d in self._devices.values()), default=-1) + 1
        self._devices[name] = replace(device, name=name, minor=minor, updated=int(time.time()))
        self._record("add", (name,))
        self._publish()

    def remove(self, device: str) -> None:
        name = self.device_key(device)
        self._get(name)
        del self._devices[name]
        self._record("remove", (name,))
        self._publish()

    def _get(self, name: str) -> DraDevice:
        try:
            return self._devices[name]
        except KeyError:
            raise DraDeviceError(f"{self.spec.driver} has no device {self.spec.pool}/{name}") from None

    async def _check_health(self) -> None:
        """Check the devices three times per timeout and send the list, so that the kubelet never reads them stale.

        A real driver polls its hardware; here a check confirms each device's
        health as it stands and stamps it with the time of the check.
        """
        while True:
            await asyncio.sleep(max(self.spec.health_timeout / 3, 0.1))
            now = int(time.time())
            self._devices = {n: replace(d, updated=now) for n, d in self._devices.items()}
            self._publish()

    def _health_message(self, pb: Any, devices: tuple[DraDevice, ...]) -> Any:
        """The NodeWatchResources message of ``devices`` in ``pb``'s version: made once per list, not per stream."""
        sent = self._sent.get(pb.__name__)
        if sent is None or sent[0] != devices:
            sent = self._sent[pb.__name__] = (
                devices,
                pb.NodeWatchResourcesResponse(devices=[_device_health(pb, self, d) for d in devices]),
            )
        return sent[1]

    def _publish(self) -> None:
        devices = self.devices
        for queue in self._streams:
            queue.put_nowait(devices)

    def _record(self, rpc: str, devices: tuple[str, ...] = (), detail: str = "") -> None:
        self.rpc_log.append(RpcRecord(time.time(), rpc, devices, detail))
        names = f" {','.join(devices)}" if devices else ""
        # A child logger: `devctl sim` keeps its log to one line per event and lowers this one (-v shows it).
        self.log.getChild("rpc").info("%s %s%s%s", rpc, self.spec.driver, names, f" {detail}" if detail else "")

    # --- prepare and unprepare --------------------------------------------------------

    def prepare(self, namespace: str, name: str, uid: str) -> tuple[tuple[str, ...], str]:
        """Prepare one claim: its device names and an error ("" when prepared)."""
        known = self._prepared.get(uid)
        if known is not None:
            if not os.path.exists(known.spec_path):  # lost (e.g. a reboot emptied /var/run): write it again
                self._write_spec(uid, known.devices)
            return known.devices, ""
        wanted = self.allocation(namespace, name, uid) if self.allocation else None
        if wanted is None:
            return (), f"claim {namespace}/{name} ({uid}): no known allocation for it on driver {self.spec.driver}"
        try:
            names = tuple(self.device_key(d) for d in wanted)
            for n in names:
                self._get(n)
        except DraDeviceError as e:
            return (), f"claim {namespace}/{name} ({uid}): {e}"
        path = self._write_spec(uid, names)
        self._prepared[uid] = _Prepared(names, path)
        return names, ""

    def unprepare(self, uid: str) -> None:
        self._prepared.pop(uid, None)
        cdi.remove_claim_spec(self.root, self.spec.driver, uid)

    def _write_spec(self, uid: str, names: Sequence[str]) -> str:
        devices = []
        for n in names:
            d = self._devices[n]
            env = (f"DEVCTL_DRA_DEVICE_{cdi.env_key(n)}={self.spec.pool}/{n}",)
            devices.append(
                cdi.CdiDevice(
                    cdi.claim_device_name(uid, n), device_path(self.spec.driver, n), self.spec.major, d.minor, env
                )
            )
        return cdi.write_claim_spec(self.root, self.spec.driver, uid, devices)


# --- the gRPC services ------------------------------------------------------------


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, driver: DraDriver):
        self.driver = driver

    async def GetInfo(self, request: reg.InfoRequest, context: grpc.aio.ServicerContext) -> reg.PluginInfo:
        d = self.driver
        d._record("GetInfo")
        return reg.PluginInfo(
            type=PLUGIN_TYPE, name=d.spec.driver, endpoint=d.endpoint, supported_versions=d.spec.supported_versions
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.aio.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        d = self.driver
        async with d._status:
            d.registered = request.plugin_registered
            d.registration_error = request.error
            d._status.notify_all()
        if request.plugin_registered:
            d._record("NotifyRegistrationStatus", detail="registered")
        else:
            d._record("NotifyRegistrationStatus", detail="refused")
            d.log.warning("the kubelet refused DRA driver %s: %s", d.spec.driver, request.error or "no reason given")
        return reg.RegistrationStatusResponse()


def _dra_servicer(driver: DraDriver, pb: Any, pb_grpc: Any, version: str) -> Any:
    """NodePrepareResources and NodeUnprepareResources for one API version (the messages differ only by package)."""

    class Servicer(pb_grpc.DRAPluginServicer):
        async def NodePrepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = pb.NodePrepareResourcesResponse()
            for claim in request.claims:
                names, error = driver.prepare(claim.namespace, claim.name, claim.uid)
                out = response.claims[claim.uid]
                detail = f"{version} {claim.namespace}/{claim.name} {claim.uid}"
                if error:
                    out.error = error
                    driver._record("NodePrepareResources", (), f"{detail} error: {error}")
                    continue
                for n in names:
                    out.devices.append(
                        pb.Device(
                            pool_name=driver.spec.pool,
                            device_name=n,
                            cdi_device_ids=[cdi.qualified_name(driver.spec.driver, claim.uid, n)],
                        )
                    )
                driver._record("NodePrepareResources", names, detail)
            return response

        async def NodeUnprepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
            response = pb.NodeUnprepareResourcesResponse()
            for claim in request.claims:
                driver.unprepare(claim.uid)
                response.claims[claim.uid].SetInParent()
                driver._record("NodeUnprepareResources", (), f"{version} {claim.namespace}/{claim.name} {claim.uid}")
            return response

    return Servicer()


_HEALTH_ENUM = {HEALTHY: "HEALTHY", UNHEALTHY: "UNHEALTHY", UNKNOWN: "UNKNOWN"}


def _health_servicer(driver: DraDriver, pb: Any, pb_grpc: Any) -> Any:
    class Servicer(pb_grpc.DRAResourceHealthServicer):
        async def NodeWatchResources(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            queue: asyncio.Queue[tuple[DraDevice, ...] | None] = asyncio.Queue()
            queue.put_nowait(driver.devices)
            driver._streams.add(queue)
            driver._record("NodeWatchResources", detail=f"open ({len(driver._streams)} streams)")
            try:
                while (devices := await queue.get()) is not None:
                    while not queue.empty():  # behind: only the newest full list matters
                        newer = queue.get_nowait()
                        if newer is None:
                            return
                        devices = newer
                    yield driver._health_message(pb, devices)
            finally:
                driver._streams.discard(queue)

    return Servicer()


def _device_health(pb: Any, driver: DraDriver, d: DraDevice) -> Any:
    return pb.DeviceHealth(
        device=pb.DeviceIdentifier(pool_name=driver.spec.pool, device_name=d.name),
        health=pb.HealthStatus.Value(_HEALTH_ENUM.get(d.health, "UNKNOWN")),
        last_updated_time=d.updated,
        health_check_timeout_seconds=driver.spec.health_timeout,
        message=d.message,
    )


# --- live control from another shell ---------------------------------------------


__all__ = [
    "ALLOCATIONS_FILE",
    "DEFAULT_HEALTH_TIMEOUT",
    "DRA_LABELS",
    "HEALTH_LABEL",
    "MAX_MESSAGE",
    "PLUGIN_TYPE",
    "RPC_LOG_SIZE",
    "UNKNOWN",
    "Allocation",
    "DraDevice",
    "DraDeviceError",
    "DraDriver",
    "DraSpec",
    "default_major",
    "device_path",
    "health_value",
    "node_path",
    "recorded_allocation",
]
