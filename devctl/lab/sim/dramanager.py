"""The simulated kubelet's DRA manager: registered drivers, prepared claims, ``dra_manager_state``, health.

It follows pkg/kubelet/cm/dra (manager.go, plugin/registration.go, healthinfo):

- A ``DRAPlugin`` from the plugin watcher is accepted with the first label of
  *its own* ``supported_versions`` that this kubelet speaks (``v1.DRAPlugin``,
  ``v1beta1.DRAPlugin``); a driver that offers none is refused.
- For each claim of a pod, the claim's entry (with its pod) is written to
  ``dra_manager_state`` **before** the driver is asked to prepare it, then
  ``NodePrepareResources`` is called with a 45 s deadline, one call per driver
  for the pod's claims; the devices and CDI IDs it returns are kept, written
  to the checkpoint, and reported in pod-resources ``dynamic_resources``. A
  failed prepare leaves the entry with null devices, as the kubelet does.
- A claim leaves the checkpoint only when unprepare succeeds for its last pod;
  with its driver gone it stays, and the pod cannot finish terminating.
- Each driver offering ``DRAResourceHealth`` is followed on a stream; its
  devices' health is cached per ``<pool>/<device>``, read as ``Unknown`` once
  older than the device's timeout, cleared when the stream ends (reopened
  every 5 s), and persisted to ``dra_health_state``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
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
from devctl.base.waits import cancel_and_wait, within
from devctl.lab.sim.dra_state import write_dra_checkpoint
from devctl.lab.sim.pluginwatcher import resolve_endpoint
from devctl.lab.sim.scenario import PodSpec
from devctl.lab.sim.scenario_dra import ClaimSpec, DraScenario
from devctl.model import HEALTHY, UNHEALTHY, ClaimDevice, DynamicResource, RegistryInfo
from devctl.node.checkpoint import write_atomically
from devctl.node.dra_checkpoint import RawClaim, RawDevice, read_dra_raw
from devctl.node.gojson import CheckpointError
from devctl.node.rpc import plugin_channel

log = logging.getLogger("devctl.lab.sim.kubelet")

UNKNOWN = "Unknown"
PREPARE_TIMEOUT = 45.0  # pkg/kubelet/cm/dra/manager.go: the per-call deadline
HEALTH_REOPEN = 5.0  # healthinfo: the stream is opened again after this long
DEFAULT_HEALTH_TIMEOUT = 30.0  # a device's timeout when the driver sends 0 or less
# This kubelet's DRA service labels, newest first, and the gRPC modules behind each.
DRA_SERVICES: dict[str, tuple[Any, Any]] = {
    "v1.DRAPlugin": (dra_v1, dra_v1_grpc),
    "v1beta1.DRAPlugin": (dra_v1beta1, dra_v1beta1_grpc),
}
HEALTH_SERVICES: dict[str, tuple[Any, Any]] = {
    "v1.DRAResourceHealth": (health_v1, health_v1_grpc),
    "v1alpha1.DRAResourceHealth": (health_v1alpha1, health_v1alpha1_grpc),
}
_HEALTH_NAMES = {0: UNKNOWN, 1: HEALTHY, 2: UNHEALTHY}


@dataclass
class DriverConn:
    """A registered DRA driver: where it serves and the API version chosen for it."""

    name: str
    endpoint: str  # resolved under the node root
    service: str  # e.g. v1.DRAPlugin
    health_service: str | None
    registration_socket: str
    channel: grpc.aio.Channel
    health_task: asyncio.Task[None] | None = None


@dataclass
class ClaimInfo:
    """One claim in the manager's cache, as the checkpoint holds it, with the containers using it."""

    uid: str
    name: str
    namespace: str
    driver: str
    pod_uids: set[str] = field(default_factory=set)
    devices: tuple[RawDevice, ...] | None = None  # None: not prepared (or prepare failed)
    users: set[tuple[str, str]] = field(default_factory=set)  # (pod uid, container)
    error: str = ""


@dataclass(frozen=True)
class HealthEntry:
    pool: str
    device: str
    health: str
    last_updated: float  # Unix seconds
    timeout: float  # seconds
    message: str = ""


def choose_service(offered: Sequence[str]) -> str | None:
    """The first label of the plugin's own list that this kubelet speaks (1.34+), or None."""
    return next((label for label in offered if label in DRA_SERVICES), None)


class DraManager:
    """The DRA side of one run of the simulated kubelet; a restart builds a new one from the checkpoint."""

    def __init__(
        self,
        kubelet_dir: str,
        root: str,
        dra: DraScenario,
        *,
        reopen_interval: float = HEALTH_REOPEN,
        prepare_timeout: float = PREPARE_TIMEOUT,
    ):
        self.root = root
        self.scenario = dra
        self.checkpoint_path = os.path.join(kubelet_dir, "dra_manager_state")
        self.health_path = os.path.join(kubelet_dir, "dra_health_state")
        self.reopen_interval = reopen_interval
        self.prepare_timeout = prepare_timeout
        self.drivers: dict[str, DriverConn] = {}
        self.claims: dict[str, ClaimInfo] = {}
        self.health: dict[str, dict[str, HealthEntry]] = {}
        self._unknown_devices_said: set[tuple[str, str]] = set()
        self._changed = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()

    # --- start, restart, stop ----------------------------------------------------------

    def start_fresh(self) -> None:
        """A node's first start: no claims; the kubelet writes an empty checkpoint (a null list)."""
        self._write_checkpoint()
        self._write_health()

    def restore(self) -> None:
        """After a restart: the claims from ``dra_manager_state`` (prepared ones keep their devices)."""
        try:
            raw, _, _ = read_dra_raw(self.checkpoint_path)
        except CheckpointError as e:
            log.warning("kubelet: DRA checkpoint not restored: %s", e.reason)
            return
        for c in raw.claims or ():
            for driver, devices in c.drivers:
                info = ClaimInfo(c.uid, c.name, c.namespace, driver, set(c.pod_uids), devices)
                spec = self.scenario.claim(c.uid)
                if spec is not None:
                    info.users = {(uid, spec.container) for uid in c.pod_uids}
                self.claims[c.uid] = info

    async def close(self) -> None:
        for conn in list(self.drivers.values()):
            await self._drop(conn)
        left = list(self._background)  # the drops of drivers that left: each closes a channel
        if left:
            await asyncio.wait(left)
            for task in left:
                task.result()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        """Wait until ``predicate()`` holds; asyncio.TimeoutError after ``timeout``."""

        async def until() -> None:
            while not predicate():
                await self._changed.wait()

        await within(until(), timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # --- registration (the plugin watcher's handler for DRAPlugin) ---------------------

    async def register(self, info: RegistryInfo, registration_socket: str) -> str | None:
        if not info.name:
            return "a DRA driver needs a name"
        service = choose_service(info.supported_versions)
        if service is None:
            offered = ", ".join(info.supported_versions) or "none"
            return (
                f"none of the versions offered by DRA driver {info.name} ({offered}) is supported; "
                f"this kubelet speaks {', '.join(DRA_SERVICES)}"
            )
        health = next((h for h in HEALTH_SERVICES if h in info.supported_versions), None)
        endpoint = resolve_endpoint(self.root, info.endpoint, registration_socket)
        old = self.drivers.get(info.name)
        if old is not None:
            await self._drop(old)
        conn = DriverConn(info.name, endpoint, service, health, registration_socket, plugin_channel(endpoint))
        self.drivers[info.name] = conn
        if health is not None:
            conn.health_task = asyncio.create_task(self._follow_health(conn), name=f"DRA health {info.name}")
        log.info("kubelet: registered DRA driver %s at %s (%s)", info.name, info.endpoint, service)
        self._notify()
        return None

    def deregister(self, info: RegistryInfo, registration_socket: str) -> None:
        conn = self.drivers.get(info.name)
        if conn is None or conn.registration_socket != registration_socket:
            return
        log.info("kubelet: DRA driver %s deregistered", info.name)
        del self.drivers[info.name]
        task = asyncio.create_task(self._drop(conn), name=f"drop DRA driver {info.name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        self._notify()

    async def _drop(self, conn: DriverConn) -> None:
        if self.drivers.get(conn.name) is conn:
            del self.drivers[conn.name]
        if conn.health_task is not None:
            await cancel_and_wait(conn.health_task)
        await conn.channel.close()
        self._clear_health(conn.name)

    # --- prepare and unprepare ---------------------------------------------------------

    def claimed_nodes(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(pod UID, container) -> the device nodes of the prepared claims it uses, as the drivers' CDI specs
        name them: what the runtime puts into the container and its process opens."""
        from devctl.lab.plugin.dra import device_path

        out: dict[tuple[str, str], dict[str, None]] = {}
        for info in self.claims.values():
            for user in info.users:
                nodes = out.setdefault(user, {})
                nodes.update(dict.fromkeys(device_path(info.driver, d.device) for d in info.devices or ()))
        return {user: tuple(nodes) for user, nodes in out.items() if nodes}

    def claims_of(self, pod: PodSpec) -> tuple[ClaimSpec, ...]:
        return tuple(c for c in self.scenario.claims if c.pod == (pod.namespace, pod.name))

    async def prepare_pod(self, pod: PodSpec) -> str | None:
        """Prepare every claim of the pod; None when all are prepared, else why the pod cannot start."""
        specs = self.claims_of(pod)
        if not specs:
            return None
        for spec in specs:
            info = self.claims.setdefault(spec.uid, ClaimInfo(spec.uid, spec.name, spec.namespace, spec.driver))
            info.pod_uids.add(pod.uid)
            info.users.add((pod.uid, spec.container))
        self._write_checkpoint()  # before any driver is asked: an entry is not proof of a prepared claim
        errors = []
        by_driver: dict[str, list[ClaimInfo]] = {}
        for spec in specs:
            info = self.claims[spec.uid]
            if info.devices is None:
                by_driver.setdefault(spec.driver, []).append(info)
        for driver, infos in by_driver.items():
            errors += await self._prepare(driver, infos)
        self._write_checkpoint()
        self._notify()
        return "; ".join(errors) or None

    async def _prepare(self, driver: str, infos: list[ClaimInfo]) -> list[str]:
        conn = self.drivers.get(driver)
        if conn is None:
            why = f"DRA driver {driver} is not registered"
            for info in infos:
                info.error = why
            return [f"claim {i.namespace}/{i.name}: {why}" for i in infos]
        pb, pb_grpc = DRA_SERVICES[conn.service]
        request = pb.NodePrepareResourcesRequest(
            claims=[pb.Claim(namespace=i.namespace, uid=i.uid, name=i.name) for i in infos]
        )
        try:
            reply = await pb_grpc.DRAPluginStub(conn.channel).NodePrepareResources(
                request, timeout=self.prepare_timeout
            )
        except grpc.aio.AioRpcError as e:
            why = f"NodePrepareResources failed: {e.code().name}: {e.details()}"
            log.warning("kubelet: DRA driver %s: %s", driver, why)
            for info in infos:
                info.error = why
            return [f"claim {i.namespace}/{i.name}: {why}" for i in infos]
        errors = []
        for info in infos:
            result = reply.claims.get(info.uid)
            if result is None or result.error:
                info.error = result.error if result is not None else "the driver did not answer for this claim"
                log.warning(
                    "kubelet: DRA driver %s could not prepare %s/%s: %s", driver, info.namespace, info.name, info.error
                )
                errors.append(f"claim {info.namespace}/{info.name}: {info.error}")
                continue
            info.error = ""
            info.devices = tuple(
                RawDevice(
                    pool=d.pool_name,
                    device=d.device_name,
                    requests=tuple(d.request_names) or None,
                    cdi_ids=tuple(d.cdi_device_ids) or None,
                    share_id=d.share_id if conn.service == "v1.DRAPlugin" and d.HasField("share_id") else None,
                )
                for d in result.devices
            )
            log.info("kubelet: DRA driver %s prepared %s/%s", driver, info.namespace, info.name)
        return errors

    async def unprepare_pod(self, pod: PodSpec) -> list[str]:
        """Release the pod's claims; a claim whose last pod this was is unprepared and leaves the checkpoint.

        The errors (one line each) say which claims stay, e.g. because their driver is gone.
        """
        last: dict[str, list[ClaimInfo]] = {}
        for info in self.claims.values():
            if pod.uid not in info.pod_uids:
                continue
            info.users = {u for u in info.users if u[0] != pod.uid}
            if info.pod_uids == {pod.uid}:
                last.setdefault(info.driver, []).append(info)
            else:
                info.pod_uids.discard(pod.uid)
        errors = []
        for driver, infos in last.items():
            errors += await self._unprepare(driver, infos, pod.uid)
        self._write_checkpoint()
        self._notify()
        return errors

    async def _unprepare(self, driver: str, infos: list[ClaimInfo], pod_uid: str) -> list[str]:
        conn = self.drivers.get(driver)
        if conn is None:
            return [
                f"claim {i.namespace}/{i.name}: DRA driver {driver} is not registered; the claim stays" for i in infos
            ]
        pb, pb_grpc = DRA_SERVICES[conn.service]
        request = pb.NodeUnprepareResourcesRequest(
            claims=[pb.Claim(namespace=i.namespace, uid=i.uid, name=i.name) for i in infos]
        )
        try:
            reply = await pb_grpc.DRAPluginStub(conn.channel).NodeUnprepareResources(
                request, timeout=self.prepare_timeout
            )
        except grpc.aio.AioRpcError as e:
            return [f"claim {i.namespace}/{i.name}: NodeUnprepareResources failed: {e.details()}" for i in infos]
        errors = []
        for info in infos:
            result = reply.claims.get(info.uid)
            if result is None or result.error:
                errors.append(f"claim {info.namespace}/{info.name}: {result.error if result else 'no answer for it'}")
                continue
            del self.claims[info.uid]
            log.info("kubelet: DRA driver %s unprepared %s/%s", driver, info.namespace, info.name)
        return errors

    # --- what pod-resources reports ------------------------------------------------------

    def dynamic_resources(self, pod_uid: str, container: str) -> tuple[DynamicResource, ...]:
        """The prepared claims a container uses, with each device's CDI IDs, as List/Get report them."""
        return self.dynamic_resources_by_user().get((pod_uid, container), ())

    def dynamic_resources_by_user(self) -> dict[tuple[str, str], tuple[DynamicResource, ...]]:
        """(pod UID, container) -> its prepared claims, in one pass: a List of every pod asks for all of them."""
        out: dict[tuple[str, str], list[DynamicResource]] = {}
        for info in self.claims.values():
            if info.devices is None or not info.users:
                continue
            devices = tuple(
                [ClaimDevice(info.driver, d.pool, d.device, d.cdi_ids or (), d.share_id) for d in info.devices]
            )
            resource = DynamicResource(info.name, info.namespace, devices)
            for user in info.users:
                out.setdefault(user, []).append(resource)
        return {user: tuple(resources) for user, resources in out.items()}

    # --- the checkpoint ---------------------------------------------------------------

    def _write_checkpoint(self) -> None:
        claims = tuple(
            RawClaim(
                uid=i.uid,
                name=i.name,
                namespace=i.namespace,
                pod_uids=tuple(sorted(i.pod_uids)),
                drivers=((i.driver, i.devices),),
            )
            for i in self.claims.values()
        )
        write_dra_checkpoint(self.checkpoint_path, claims or None)

    # --- health -------------------------------------------------------------------------

    def health_of(self, driver: str, pool: str, device: str, now: float | None = None) -> str:
        """The cached health of a device: ``Unknown`` when no stream told it or its last update is too old."""
        entry = self.health.get(driver, {}).get(f"{pool}/{device}")
        if entry is None:
            return UNKNOWN
        if (now if now is not None else time.time()) - entry.last_updated > entry.timeout:
            return UNKNOWN
        return entry.health

    async def _follow_health(self, conn: DriverConn) -> None:
        assert conn.health_service is not None
        pb, pb_grpc = HEALTH_SERVICES[conn.health_service]
        stub = pb_grpc.DRAResourceHealthStub(conn.channel)
        while True:
            try:
                async for message in stub.NodeWatchResources(pb.NodeWatchResourcesRequest()):
                    self._update_health(conn.name, message.devices)
                log.info("kubelet: DRA health stream of %s ended; its health is cleared", conn.name)
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    log.info("kubelet: DRA driver %s offers no health service", conn.name)
                    self._clear_health(conn.name)
                    return
                log.info(
                    "kubelet: DRA health stream of %s failed (%s); its health is cleared", conn.name, e.code().name
                )
            self._clear_health(conn.name)
            await asyncio.sleep(self.reopen_interval)

    def _update_health(self, driver: str, devices: Iterable[Any]) -> None:
        now = time.time()
        known = self.scenario.driver(driver)
        names = {d.name for d in known.devices} if known is not None else None
        entries = {}
        for d in devices:
            pool, name = d.device.pool_name, d.device.device_name
            if names is not None and name not in names and (driver, f"{pool}/{name}") not in self._unknown_devices_said:
                self._unknown_devices_said.add((driver, f"{pool}/{name}"))
                log.warning(
                    "kubelet: DRA driver %s sent health for %s/%s, a device it never listed", driver, pool, name
                )
            timeout = (
                float(d.health_check_timeout_seconds) if d.health_check_timeout_seconds > 0 else DEFAULT_HEALTH_TIMEOUT
            )
            entries[f"{pool}/{name}"] = HealthEntry(
                pool=pool,
                device=name,
                health=_HEALTH_NAMES.get(d.health, UNKNOWN),
                last_updated=float(d.last_updated_time) if d.last_updated_time > 0 else now,
                timeout=timeout,
                message=d.message[:1024],
            )
        self.health[driver] = entries
        self._write_health()
        self._notify()

    def _clear_health(self, driver: str) -> None:
        if self.health.pop(driver, None) is not None:
            self._write_health()
            self._notify()

    def _write_health(self) -> None:
        """``dra_health_state``: plain JSON with the kubelet's Go field names (no checksum)."""
        doc = {
            driver: {
                "Devices": {
                    key: {
                        "PoolName": e.pool,
                        "DeviceName": e.device,
                        "Health": self.health_of(driver, e.pool, e.device),
                        "LastUpdated": datetime.fromtimestamp(e.last_updated, timezone.utc).strftime(
                            "%Y-%m-%dT%H:%M:%SZ"
                        ),
                        "HealthCheckTimeout": int(e.timeout * 1e9),
                    }
                    for key, e in sorted(entries.items())
                }
            }
            for driver, entries in sorted(self.health.items())
        }
        write_atomically(self.health_path, json.dumps(doc, separators=(",", ":")).encode())
