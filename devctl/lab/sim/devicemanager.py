"""The simulated kubelet's device manager: what pkg/kubelet/cm/devicemanager/manager.go does, on one event loop.

It follows each registered plugin's ListAndWatch (capacity = every device,
allocatable = the healthy ones, the checkpoint rewritten on every update),
handles a stream's end as the kubelet does (every device unhealthy for a grace
period, then the resource is gone), admits the scenario's pods through
GetPreferredAllocation, Allocate and PreStartContainer, writes
``kubelet_internal_checkpoint``, restores from it after a restart, and answers
what the pod-resources server serves (it is a ``PodResourcesState``).

Everything here runs on the simulator's event loop; nothing is thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence

from devctl.base.units import format_bytes
from devctl.base.waits import cancel_and_wait, within
from devctl.lab.sim.devicemanager_state import (
    DEFAULT_GRACE_PERIOD,
    NO_TOPOLOGY,
    RPC_TIMEOUT,
    AdmissionError,
    Endpoint,
    Held,
    Resource,
    ResourceState,
    container_resources,
    numa_entries,
    numa_key,
)
from devctl.lab.sim.scenario import ContainerSpec, PodSpec, Scenario
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerMemory,
    Device,
    DynamicResource,
    PluginOptions,
    PodResources,
)
from devctl.node import convert
from devctl.node.checkpoint import RawEntry, read_checkpoint, write_checkpoint
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.gojson import CheckpointError
from devctl.node.rpc import RpcFailure

log = logging.getLogger("devctl.lab.sim.kubelet")


class DeviceManager:
    """The device manager of one simulated kubelet run; a restart makes a new one from the checkpoint.

    Tests and the node wait for its state with ``wait_until``, which wakes on
    every change of devices, endpoints or allocations. ``grace_period`` is
    endpointStopGracePeriod.
    """

    def __init__(
        self,
        plugins_dir: str,
        scenario: Scenario,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        rpc_timeout: float = RPC_TIMEOUT,
    ):
        self.plugins_dir = plugins_dir
        self.checkpoint_path = os.path.join(plugins_dir, "kubelet_internal_checkpoint")
        self.scenario = scenario
        self.grace_period = grace_period
        self.rpc_timeout = rpc_timeout
        self.failed: dict[tuple[str, str], str] = {}  # (namespace, name) -> why admission failed
        self._resources: dict[str, Resource] = {}
        self._endpoints: dict[str, Endpoint] = {}
        # What containers hold, by (pod UID, container, resource), in allocation order.
        self._held: dict[tuple[str, str, str], Held] = {}
        self._in_use: dict[str, set[str]] = {}  # resource -> IDs some container holds
        self._writes_deferred = False
        self._pods: dict[str, PodSpec] = {}  # admitted (running) pods by UID, in admission order
        self._restored_prestart: set[tuple[str, str, str]] = set()  # (uid, container, resource)
        self._streams: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._closed = False

    # --- change notification ----------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        """Wait until ``predicate()`` holds; asyncio.TimeoutError after ``timeout`` (None: no limit)."""

        async def until() -> None:
            while not predicate():
                await self._changed.wait()

        await within(until(), timeout)

    # --- plugins: registration, ListAndWatch, stream end ---------------------------------

    def plugin_connected(
        self, resource: str, socket_path: str, client: DevicePluginClient, options: PluginOptions
    ) -> None:
        """Take a plugin Register accepted: it replaces any earlier endpoint of the resource."""
        if self._closed:  # a Register that was in flight while the kubelet stopped
            self._track(asyncio.create_task(client.close()))
            return
        client.timeout = self.rpc_timeout
        old = self._endpoints.get(resource)
        if old is not None and old.expiry is not None:
            old.expiry.cancel()
        endpoint = Endpoint(resource=resource, socket=socket_path, options=options, client=client)
        self._endpoints[resource] = endpoint
        self._resources.setdefault(resource, Resource())
        endpoint.stream = self._track(asyncio.create_task(self._follow(endpoint), name=f"ListAndWatch {resource}"))
        log.debug("kubelet: %s connected (%s)", resource, os.path.basename(socket_path))
        self._notify()

    def _track(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self._streams.add(task)
        task.add_done_callback(self._streams.discard)
        return task

    async def _follow(self, endpoint: Endpoint) -> None:
        # client.go Run: ListAndWatch without a deadline; every message is the full list.
        assert endpoint.client is not None
        reason = "stream ended"
        try:
            async for devices in endpoint.client.list_and_watch():
                endpoint.lists += 1
                # Upstream feeds every update into the resource, from whichever stream sent it.
                self._update(endpoint.resource, devices)
                if endpoint.lists == 1:
                    await self._restored_prestarts(endpoint)
        except RpcFailure as e:
            reason = e.message
        finally:
            await endpoint.client.close()
        if not self._closed:
            self._disconnected(endpoint, reason)

    def _update(self, resource: str, devices: Sequence[Device]) -> None:
        # manager.go genericDeviceUpdateCallback: replace the view, then write the checkpoint.
        state = self._resources.setdefault(resource, Resource())
        state.devices = {d.id: d for d in devices}
        state.healthy = {d.id for d in devices if d.healthy}
        log.info("kubelet: %s: %d devices, %d healthy", resource, len(devices), len(state.healthy))
        self._write_checkpoint()
        self._notify()

    def _disconnected(self, endpoint: Endpoint, reason: str) -> None:
        resource = endpoint.resource
        current = self._endpoints.get(resource)
        endpoint.stopped = True
        if current is None or (current is not endpoint and current.socket == endpoint.socket):
            # A plugin that restarted on its socket: the old stream's end is old news.
            return
        # handler.go runClient -> PluginDisconnected(resourceName): by name, not by endpoint. So when
        # an endpoint that was already replaced ends, the kubelet marks the resource unhealthy and
        # stops the newer endpoint too (docs: "Two instances of one resource").
        if current is not endpoint and not current.stopped:
            log.warning(
                "kubelet: the replaced endpoint of %s (%s) ended; %s stops serving it too",
                resource,
                os.path.basename(endpoint.socket),
                os.path.basename(current.socket),
            )
            if current.stream is not None:
                current.stream.cancel()
        current.stopped = True
        # markResourceUnhealthy: every device unhealthy, capacity kept; no checkpoint write here.
        self._resources.setdefault(resource, Resource()).healthy = set()
        log.warning("kubelet: %s: ListAndWatch ended (%s); unhealthy for %gs", resource, reason, self.grace_period)
        self._start_grace(current)
        self._notify()

    def _start_grace(self, endpoint: Endpoint) -> None:
        if endpoint.expiry is not None:
            endpoint.expiry.cancel()
        endpoint.expiry = asyncio.get_running_loop().call_later(self.grace_period, self._expire, endpoint)

    def _expire(self, endpoint: Endpoint) -> None:
        # manager.go GetCapacity: a stopped endpoint past its grace period is dropped with its devices.
        if self._endpoints.get(endpoint.resource) is not endpoint or not endpoint.stopped:
            return
        del self._endpoints[endpoint.resource]
        self._resources.pop(endpoint.resource, None)
        log.info("kubelet: %s: no plugin for %gs; resource removed", endpoint.resource, self.grace_period)
        self._write_checkpoint()
        self._notify()

    async def close(self) -> None:
        """Stop following every plugin (the kubelet process ends); state stays readable."""
        self._closed = True
        for endpoint in self._endpoints.values():
            if endpoint.expiry is not None:
                endpoint.expiry.cancel()
        await cancel_and_wait(*self._streams)

    # --- what the node shows ------------------------------------------------------------

    def resource_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._resources))

    def resource(self, name: str) -> ResourceState | None:
        state = self._resources.get(name)
        if state is None:
            return None
        endpoint = self._endpoints.get(name)
        return ResourceState(
            name=name,
            socket=endpoint.socket if endpoint and endpoint.client else None,
            connected=bool(endpoint and not endpoint.stopped and endpoint.lists > 0),
            devices=tuple(state.devices.values()),
            healthy=tuple(i for i in state.devices if i in state.healthy),
            options=endpoint.options if endpoint and endpoint.client else None,
        )

    def connected(self, name: str) -> bool:
        """A live plugin has registered for ``name`` and sent its first device list."""
        state = self.resource(name)
        return state is not None and state.connected

    def held(self) -> tuple[Held, ...]:
        return tuple(self._held.values())

    def running_pods(self) -> tuple[PodSpec, ...]:
        return tuple(self._pods.values())

    def pods(
        self, claims: Mapping[tuple[str, str], tuple[DynamicResource, ...]] | None = None
    ) -> tuple[PodResources, ...]:
        """Active pods as List reports them: devices one entry per device per NUMA node, CPUs, memory, claims.

        ``claims``: (pod UID, container) -> the DRA claims it uses, after the scenario's own (the DRA manager's,
        added here rather than to a copy of every container: a List of a node with 1,000 claims, bench_dra.py).
        """
        dynamic = self.scenario.kubelet.dynamic_resources
        claims = claims or {}
        by_container: dict[tuple[str, str], list[ContainerDevices]] = {}
        for (uid, container, resource), h in self._held.items():
            by_container.setdefault((uid, container), []).extend(numa_entries(resource, h.device_ids))
        return tuple(
            PodResources(
                namespace=pod.namespace,
                name=pod.name,
                containers=tuple(
                    container_resources(
                        c,
                        by_container.get((pod.uid, c.name), ()),
                        (c.dynamic_resources if dynamic else ()) + claims.get((pod.uid, c.name), ()),
                    )
                    for c in pod.containers
                ),
            )
            for pod in self._pods.values()
        )

    def allocatable(self) -> AllocatableResources:
        """Healthy devices (one entry per device per NUMA node), allocatable CPUs, memory per NUMA node."""
        devices: list[ContainerDevices] = []
        for name in sorted(self._resources):
            state = self._resources[name]
            for d in state.devices.values():
                if d.id in state.healthy:  # as numa_entries gives them: one per NUMA node in order, or one without
                    ids = (d.id,)
                    if d.numa_nodes:
                        devices.extend([ContainerDevices(name, ids, (n,)) for n in sorted(set(d.numa_nodes))])
                    else:
                        devices.append(ContainerDevices(name, ids, ()))
        memory: list[ContainerMemory] = []
        for node in self.scenario.numa_nodes:
            memory.append(ContainerMemory("memory", node.memory_bytes, (node.id,)))
            for pages in node.hugepages:
                size = pages.size_kb * 1024
                memory.append(ContainerMemory(f"hugepages-{format_bytes(size)}", pages.total * size, (node.id,)))
        cpus = self.scenario.allocatable_cpus
        return AllocatableResources(devices=tuple(devices), cpu_ids=cpus, memory=tuple(memory))

    # --- admission --------------------------------------------------------------------

    async def admit_all(self, pods: Iterable[PodSpec]) -> tuple[PodSpec, ...]:
        """Admit pods in order, as at node start; returns those admitted (the others are in ``failed``).

        The checkpoint is written once at the end rather than after every
        container: nothing reads it before the node is ready, and rewriting a
        large checkpoint a thousand times would make a large node slow to start.
        """
        self._writes_deferred = True
        try:
            admitted = tuple([pod for pod in pods if await self.admit(pod)])
        finally:
            self._writes_deferred = False
            self._write_checkpoint()
        return admitted

    async def admit(self, pod: PodSpec) -> bool:
        """Allocate every container's devices as the kubelet does at admission; False (and ``failed``) if refused."""
        try:
            for container in pod.containers:
                for resource, count in container.requests.items():
                    await self._allocate(pod, container, resource, count)
                # manager.go allocateContainerResources: one checkpoint write per container.
                self._write_checkpoint()
                for resource in container.requests:
                    await self._prestart(pod.uid, container.name, resource)
        except AdmissionError as e:
            # The pod is rejected and never runs: nothing it was given stays held.
            for key in [k for k in self._held if k[0] == pod.uid]:
                self._release(key)
            self._write_checkpoint()
            self.failed[(pod.namespace, pod.name)] = str(e)
            log.warning("kubelet: pod %s/%s not admitted: %s", pod.namespace, pod.name, e)
            self._notify()
            return False
        self._pods[pod.uid] = pod
        log.info("kubelet: pod %s/%s admitted", pod.namespace, pod.name)
        self._notify()
        return True

    def remove_pod(self, uid: str) -> PodSpec | None:
        """A deleted pod: its devices are free again and leave the checkpoint (the pod, or None if unknown)."""
        pod = self._pods.pop(uid, None)
        if pod is None:
            return None
        for key in [k for k in self._held if k[0] == uid]:
            self._release(key)
        self._write_checkpoint()
        log.info("kubelet: pod %s/%s deleted", pod.namespace, pod.name)
        self._notify()
        return pod

    def _hold(self, held: Held) -> None:
        self._held[(held.pod_uid, held.container, held.resource)] = held
        self._in_use.setdefault(held.resource, set()).update(held.ids)

    def _release(self, key: tuple[str, str, str]) -> None:
        held = self._held.pop(key)
        self._in_use.get(held.resource, set()).difference_update(held.ids)

    async def _allocate(self, pod: PodSpec, container: ContainerSpec, resource: str, needed: int) -> None:
        # manager.go devicesToAllocate, with no topology hint (no topology manager policy).
        state = self._resources.get(resource)
        endpoint = self._endpoints.get(resource)
        if state is None or endpoint is None:
            raise AdmissionError(f"cannot allocate unregistered device {resource}")
        if not state.healthy:
            raise AdmissionError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        in_use = self._in_use.get(resource, set())
        available = [i for i in state.devices if i in state.healthy and i not in in_use]
        if len(available) < needed:
            raise AdmissionError(
                f"requested number of devices unavailable for {resource}. Requested: {needed}, "
                f"Available: {len(available)}"
            )
        client = endpoint.client
        if client is None or endpoint.stopped:
            raise AdmissionError(f"unknown Device Plugin {resource}")
        chosen: list[str] = []
        if endpoint.options.get_preferred_allocation_available:
            try:
                preferred = await client.preferred(available, [], needed)
            except RpcFailure as e:
                raise AdmissionError(f"device plugin GetPreferredAllocation rpc failed with err: {e.message}") from None
            # The kubelet takes the answer only where it intersects the candidates ...
            candidates = set(available)
            chosen = [i for i in dict.fromkeys(preferred) if i in candidates][:needed]
        # ... and fills any shortfall itself, in its own order.
        taken = set(chosen)
        chosen += [i for i in available if i not in taken][: needed - len(chosen)]
        try:
            raw = await client.allocate_raw(chosen)
        except RpcFailure as e:
            raise AdmissionError(e.message) from None
        by_numa: dict[str, list[str]] = {}
        for device_id in chosen:
            for node in state.devices[device_id].numa_nodes or (None,):
                by_numa.setdefault(numa_key(node), []).append(device_id)
        device_ids = {k: tuple(v) for k, v in by_numa.items()}
        self._hold(
            Held(pod_uid=pod.uid, container=container.name, resource=resource, device_ids=device_ids, alloc_resp=raw)
        )
        log.info("kubelet: %s/%s %s: allocated %s %s", pod.namespace, pod.name, container.name, resource, chosen)

    async def _prestart(self, pod_uid: str, container: str, resource: str) -> None:
        # manager.go callPreStartContainerIfNeeded: only if the plugin asks for it; failure fails the start.
        endpoint = self._endpoints.get(resource)
        if endpoint is None or endpoint.client is None or not endpoint.options.pre_start_required:
            return
        held = self._held[(pod_uid, container, resource)]
        try:
            await endpoint.client.prestart(held.ids)
        except RpcFailure as e:
            raise AdmissionError(f"device plugin PreStartContainer rpc failed with err: {e.message}") from None

    async def _restored_prestarts(self, endpoint: Endpoint) -> None:
        # After a restart the running containers keep their devices without a new Allocate; a plugin that
        # requires it sees PreStartContainer again (docs/kubelet-contract.md, observed on v1.32).
        for key in sorted(k for k in self._restored_prestart if k[2] == endpoint.resource):
            self._restored_prestart.discard(key)
            try:
                await self._prestart(*key)
            except AdmissionError as e:
                log.warning("kubelet: restored container %s/%s: %s", key[0], key[1], e)
        self._notify()

    # --- the checkpoint -----------------------------------------------------------------

    def _write_checkpoint(self) -> None:
        # manager.go writeCheckpoint: the allocations and, per known resource, its healthy IDs.
        if self._writes_deferred:
            return
        registered = {name: sorted(state.healthy) for name, state in self._resources.items()}
        entries = [
            RawEntry(h.pod_uid, h.container, h.resource, h.device_ids, h.alloc_resp) for h in self._held.values()
        ]
        try:
            write_checkpoint(self.checkpoint_path, entries, registered)
        except OSError as e:
            log.error("kubelet: cannot write %s: %s", self.checkpoint_path, e.strerror or e)

    def restore(self, running: Iterable[PodSpec]) -> None:
        """Start as a restarted kubelet: allocations from the checkpoint, resources at capacity 0 until re-registered.

        ``running`` are the pods the container runtime still runs. A missing,
        unreadable or corrupt checkpoint (checksum mismatch) leaves the manager
        empty, as manager.go readCheckpoint does.
        """
        self._pods = {p.uid: p for p in running}
        try:
            checkpoint = read_checkpoint(self.checkpoint_path)
        except CheckpointError as e:
            log.warning("kubelet: starting without allocations: %s", e)
            return
        if not checkpoint.checksum_ok:
            log.warning("kubelet: starting without allocations: %s: checksum mismatch", self.checkpoint_path)
            return
        for entry in checkpoint.entries:
            alloc = entry.allocation
            raw = convert.allocation_to_pb(alloc).SerializeToString(deterministic=True) if alloc else b""
            self._hold(Held(entry.pod_uid, entry.container, entry.resource, dict(entry.device_ids), raw))
            if entry.pod_uid in self._pods:
                self._restored_prestart.add((entry.pod_uid, entry.container, entry.resource))
        for name in checkpoint.registered_devices:
            # readCheckpoint: empty device sets and a stopped endpoint, so the grace period runs.
            self._resources[name] = Resource()
            endpoint = Endpoint(resource=name, socket="", options=PluginOptions(), client=None, stopped=True)
            self._endpoints[name] = endpoint
            self._start_grace(endpoint)
        log.info(
            "kubelet: restored %d allocations and %d resources from the checkpoint",
            len(self._held),
            len(checkpoint.registered_devices),
        )


__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "NO_TOPOLOGY",
    "RPC_TIMEOUT",
    "AdmissionError",
    "DeviceManager",
    "Endpoint",
    "Held",
    "ResourceState",
]
