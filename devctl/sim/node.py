"""The simulated node: a kubelet (registration, device manager, pod-resources) and the scenario's plugins.

Everything lives under one root directory laid out like a host's filesystem,
so that ``DEVCTL_ROOT=<root>`` points every devctl command at it:

    <root>/sys/...                                     the scenario's NUMA nodes and PCI devices
    <root>/var/lib/kubelet/device-plugins/             kubelet.sock, the plugins' sockets, the checkpoint
    <root>/var/lib/kubelet/pod-resources/kubelet.sock  PodResourcesLister
    <root>/var/lib/kubelet/pods/<uid>/                 one per running pod
    <root>/var/log/pods/<namespace>_<name>_<uid>/      one per running pod
    <root>/run/devctl/plugins/*.ctl, sim.ctl           live control (devctl plugin set-health, devctl sim ...)
    <root>/run/containerd/containerd.sock              the CRI runtime (devctl.sim.workload, devctl.sim.cri)
    <root>/proc/<pid>/{cmdline,cgroup,fd/N}            the processes that hold device nodes open

Each scenario resource is served by an in-process ``DevicePluginServer`` that
registers with the simulated kubelet exactly as an external plugin would, and
any other process that registers is served the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devctl.node.paths import resolve_paths
from devctl.plugin.control import control_path, default_control_dir
from devctl.plugin.server import DevicePluginServer
from devctl.sim.control import SimControlServer, SimNotRunning, control_socket, request
from devctl.sim.devicemanager import DEFAULT_GRACE_PERIOD, DeviceManager
from devctl.sim.podresources import PodResourcesServer
from devctl.sim.registration import RegistrationServer
from devctl.sim.scenario import PodSpec, Scenario
from devctl.sim.sysfs import write_topology
from devctl.sim.workload import Workload

log = logging.getLogger("devctl.sim")

# sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
# Marks a root made by the simulator: only such a root, or an empty one, is ever cleaned.
MARKER = "run/devctl/sim-root"


class SimError(Exception):
    """The simulated node cannot start or do what was asked; the message is one line."""


class _Kubelet:
    """One run of the simulated kubelet process: what a restart throws away and builds anew."""

    def __init__(self, node: SimNode):
        paths = node.paths
        options = node.scenario.kubelet
        self.device_manager = DeviceManager(paths.plugins_dir, node.scenario, grace_period=node.grace_period)
        self.registration = RegistrationServer(paths.kubelet_socket, self.device_manager)
        self.pod_resources = PodResourcesServer(
            paths.pod_resources,
            self.device_manager,
            get_enabled=options.get_enabled,
            api=options.api,
            dynamic_resources=options.dynamic_resources,
        )

    async def start(self, running: tuple[PodSpec, ...] | None) -> None:
        """Start as manager.go Start does: read the checkpoint, clean the plugins dir, then listen."""
        if running is not None:
            self.device_manager.restore(running)
        clean_plugins_dir(self.device_manager.plugins_dir)
        await self.pod_resources.start()
        await self.registration.start()

    async def stop(self) -> None:
        await self.registration.stop()
        await self.device_manager.close()
        await self.pod_resources.stop()


def clean_plugins_dir(plugins_dir: str) -> None:
    """Delete every non-directory file in the plugins dir but the checkpoint, as the v1.32 kubelet does at start.

    (manager.go removeContents / CleanupPluginDirectory; newer kubelets delete only sockets.)
    Plugins watch for this, and for kubelet.sock appearing again, to register again.
    """
    for entry in os.scandir(plugins_dir):
        if entry.name == "kubelet_internal_checkpoint" or entry.is_dir(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)


class SimNode:
    """A simulated node under ``root``; use as ``async with SimNode(root, scenario) as node: await node.ready()``.

    ``grace_period`` is how long a resource whose plugin went away keeps its
    capacity (the kubelet's 5 minutes; tests shorten it). All methods run on the
    loop that started the node.
    """

    def __init__(self, root: Path, scenario: Scenario, *, grace_period: float = DEFAULT_GRACE_PERIOD):
        self.root = Path(root)
        self.scenario = scenario
        self.grace_period = grace_period
        self.paths = resolve_paths(root=str(self.root), env={})
        self.control_dir = default_control_dir(str(self.root))
        self.control_socket = control_socket(str(self.root))
        self.plugins: dict[str, DevicePluginServer] = {}
        self._kubelet: _Kubelet | None = None
        self._admission: asyncio.Task[None] | None = None
        self._control: SimControlServer | None = None
        self._restart_lock = asyncio.Lock()
        self.workload = Workload(
            self.root, scenario.processes, lambda: self.device_manager.running_pods(), scenario.cpus
        )

    @property
    def device_manager(self) -> DeviceManager:
        """The running kubelet's device manager (a new one after each restart)."""
        if self._kubelet is None:
            raise SimError("the simulated node is not running")
        return self._kubelet.device_manager

    # --- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> SimNode:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Lay out the root, start the kubelet and the plugins, and begin admitting pods (see ``ready``)."""
        self._check_root()
        self._check_socket_paths()
        with contextlib.suppress(SimNotRunning):
            await request(str(self.root), {"op": "info"}, 1.0)
            raise SimError(f"a simulated node already runs at {self.root}; stop it or choose another root")
        try:
            self._prepare_root()
        except OSError as e:
            raise SimError(f"cannot lay out a node under {self.root}: {e.strerror or e}") from None
        try:
            self._kubelet = _Kubelet(self)
            await self._kubelet.start(running=None)
            for spec in self.scenario.resources:
                plugin = DevicePluginServer(spec, self.paths.plugins_dir, control_dir=self.control_dir)
                await plugin.start()
                self.plugins[spec.resource] = plugin
            self._control = SimControlServer(
                self.control_socket, {"info": self._ctl_info, "restart-kubelet": self._ctl_restart}
            )
            await self._control.start()
            await self.workload.start()
        except BaseException:
            await self.stop()
            raise
        self._admission = asyncio.create_task(self._admit_all(), name="admission")
        log.info("simulated node at %s: %d resources, %d pods", self.root, len(self.plugins), len(self.scenario.pods))

    async def stop(self) -> None:
        """Stop everything and remove every socket; the rest of the root (checkpoint, sys, pod dirs) stays."""
        if self._admission is not None:
            self._admission.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._admission
            self._admission = None
        if self._control is not None:
            await self._control.stop()
            self._control = None
        if self._kubelet is not None:
            await self._kubelet.stop()
            self._kubelet = None
        for plugin in self.plugins.values():
            await plugin.stop()
        self.plugins.clear()
        await self.workload.stop()

    async def ready(self, timeout: float = 10.0) -> None:
        """Wait until every plugin registered and every pod went through admission; SimError after ``timeout``."""
        if self._admission is None:
            raise SimError("the simulated node is not running")
        try:
            await asyncio.wait_for(asyncio.shield(self._admission), timeout)
        except asyncio.TimeoutError:
            missing = [r.resource for r in self.scenario.resources if not self.device_manager.connected(r.resource)]
            raise SimError(
                f"the simulated node was not ready within {timeout:g}s"
                + (f": {', '.join(missing)} did not register" if missing else ": admission did not finish")
            ) from None

    async def wait_registered(self, timeout: float | None = 10.0) -> None:
        """Wait until every scenario resource is served by a registered plugin that sent its devices."""
        dm = self.device_manager
        try:
            await dm.wait_until(lambda: all(dm.connected(r.resource) for r in self.scenario.resources), timeout)
        except asyncio.TimeoutError:
            missing = [r.resource for r in self.scenario.resources if not dm.connected(r.resource)]
            raise SimError(f"not registered within {timeout:g}s: {', '.join(missing)}") from None

    async def restart_kubelet(self) -> None:
        """Restart the kubelet as a real restart does.

        The registration server stops and every stream ends; every file of the
        plugins dir but the checkpoint is deleted; a new device manager restores
        the allocations from the checkpoint (running pods keep their devices, no
        new Allocate) with every resource at capacity 0; kubelet.sock is created
        again. The plugins notice and register again by themselves.
        """
        if self._admission is None or not self._admission.done():
            raise SimError("the simulated node is not ready yet; restart it once its pods are admitted")
        async with self._restart_lock:
            old = self._kubelet
            assert old is not None
            log.info("restarting the simulated kubelet")
            await old.stop()
            self._kubelet = _Kubelet(self)
            self._kubelet.device_manager.failed = dict(old.device_manager.failed)
            await self._kubelet.start(running=old.device_manager.running_pods())

    # --- the root -----------------------------------------------------------------------

    def _check_root(self) -> None:
        if os.path.realpath(self.root) == "/":
            raise SimError("refusing to simulate a node over the real / ; choose an empty directory with --root")
        kubelet_dir = Path(self.paths.kubelet_dir)
        if kubelet_dir.is_dir() and any(kubelet_dir.iterdir()) and not (self.root / MARKER).exists():
            raise SimError(f"{self.root} holds a kubelet directory devctl sim did not make; choose an empty directory")

    def _check_socket_paths(self) -> None:
        sockets = [
            self.paths.kubelet_socket,
            self.paths.pod_resources,
            self.control_socket,
            self.workload.runtime.socket_path,
        ]
        for spec in self.scenario.resources:
            sockets.append(os.path.join(self.paths.plugins_dir, spec.socket))
            sockets.append(control_path(self.control_dir, spec.socket))
        for path in sockets:
            if len(os.fsencode(os.path.abspath(path))) > MAX_SOCKET_PATH:
                raise SimError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; choose a shorter root")

    def _prepare_root(self) -> None:
        marker = self.root / MARKER
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        write_topology(Path(self.paths.sysfs), self.scenario.numa_nodes, self.scenario.pci_devices)
        # A fresh node: no pods ran here yet, and the device manager starts without a checkpoint.
        for directory in (Path(self.paths.pod_logs), Path(self.paths.kubelet_dir, "pods")):
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
        os.makedirs(self.paths.plugins_dir, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.paths.checkpoint)

    def _pod_dirs(self, pod: PodSpec) -> None:
        # What the kubelet makes for a pod it runs (pkg/kubelet/kubelet_pods.go, kuberuntime logs).
        log_dir = Path(self.paths.pod_logs, f"{pod.namespace}_{pod.name}_{pod.uid}")
        for container in pod.containers:
            (log_dir / container.name).mkdir(parents=True, exist_ok=True)
            (log_dir / container.name / "0.log").touch()
        Path(self.paths.kubelet_dir, "pods", pod.uid, "containers").mkdir(parents=True, exist_ok=True)

    # --- admission ----------------------------------------------------------------------

    async def _admit_all(self) -> None:
        await self.wait_registered(timeout=None)
        dm = self.device_manager
        for pod in await dm.admit_all(self.scenario.pods):
            self._pod_dirs(pod)
        self.workload.populate(self.paths.checkpoint)
        log.info(
            "simulated node ready: %d pods running, %d not admitted",
            len(dm.running_pods()),
            len(dm.failed),
        )

    # --- control socket -----------------------------------------------------------------

    async def _ctl_info(self, message: Mapping[str, Any]) -> dict[str, Any]:
        dm = self.device_manager
        resources = []
        for name in dm.resource_names():
            state = dm.resource(name)
            assert state is not None
            resources.append(
                {
                    "name": name,
                    "capacity": state.capacity,
                    "allocatable": state.allocatable,
                    "connected": state.connected,
                }
            )
        return {
            "ok": True,
            "root": str(self.root),
            "ready": self._admission is not None and self._admission.done(),
            "resources": resources,
            "pods": [f"{p.namespace}/{p.name}" for p in dm.running_pods()],
            "failed": {f"{ns}/{name}": why for (ns, name), why in dm.failed.items()},
        }

    async def _ctl_restart(self, message: Mapping[str, Any]) -> dict[str, Any]:
        try:
            await self.restart_kubelet()
            if message.get("wait", True):
                await self.wait_registered(float(message.get("timeout", 10.0)))
        except SimError as e:
            return {"ok": False, "error": str(e)}
        dm = self.device_manager
        return {"ok": True, "registered": [n for n in dm.resource_names() if dm.connected(n)]}
