"""The simulated node: a kubelet (registration, device manager, pod-resources) and the scenario's plugins.

Everything lives under one root directory laid out like a host's filesystem,
so that ``DEVCTL_ROOT=<root>`` points every devctl command at it:

    <root>/sys/...                                     the scenario's NUMA nodes and PCI devices
    <root>/var/lib/kubelet/device-plugins/             kubelet.sock, the plugins' sockets, the checkpoint
    <root>/var/lib/kubelet/pod-resources/kubelet.sock  PodResourcesLister
    <root>/var/lib/kubelet/plugins_registry/, plugins/ DRA drivers' registration and service sockets
    <root>/var/lib/kubelet/dra_manager_state           the DRA manager checkpoint (and dra_health_state)
    <root>/var/run/cdi/                                the DRA drivers' CDI specs, one per prepared claim
    <root>/var/lib/kubelet/pods/<uid>/                 one per running pod
    <root>/var/log/pods/<namespace>_<name>_<uid>/      one per running pod
    <root>/run/devctl/plugins/*.ctl, sim.ctl           live control (devctl plugin set-health, devctl sim ...)
    <root>/run/containerd/containerd.sock              the CRI runtime (devctl.lab.sim.workload, devctl.lab.sim.cri)
    <root>/proc/<pid>/{cmdline,cgroup,fd/N}            the processes that hold device nodes open
    <root>/dev/kmsg, <root>/proc/stat                  the kernel log (a regular file) and its boot time

Each scenario resource is served by an in-process ``DevicePluginServer`` that
registers with the simulated kubelet exactly as an external plugin would, and
any other process that registers is served the same way.

The root may be a host mount given by mistake, so the node only ever removes
what it made in this run (``devctl.lab.made``): it starts only on a root that holds
no file it did not make (a new or empty directory, or one of empty
directories), records every directory it creates, and removes exactly those
when it stops. No marker from an earlier run is trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.waits import cancel_and_wait, within
from devctl.lab import serving
from devctl.lab.made import MAX_SOCKET_PATH, Made
from devctl.lab.plugin.cdi import DYNAMIC_DIR
from devctl.lab.plugin.control import control_path, default_control_dir
from devctl.lab.plugin.dra import DraDriver
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.sim import nvidia, podlife
from devctl.lab.sim.control import SimControlServer, SimNotRunning, control_socket, request
from devctl.lab.sim.devicemanager import DEFAULT_GRACE_PERIOD, DeviceManager
from devctl.lab.sim.dramanager import DraManager
from devctl.lab.sim.dranode import PodResourcesWithClaims, prepare_claims, start_drivers, stop_drivers, wait_drivers
from devctl.lab.sim.drasysfs import char_devices, write_char_links
from devctl.lab.sim.kmsg import SimKmsg
from devctl.lab.sim.pluginwatcher import DevicePluginRegistryHandler, PluginWatcher
from devctl.lab.sim.podresources import PodResourcesServer
from devctl.lab.sim.registration import RegistrationServer
from devctl.lab.sim.scenario import PodSpec, Scenario
from devctl.lab.sim.sysfs import write_topology
from devctl.lab.sim.workload import Workload
from devctl.node.paths import resolve_paths

log = logging.getLogger("devctl.lab.sim")

# How long one part of the node may take to stop before it is left behind, with a warning that names it: a
# part that never ends (a gRPC server waiting on a call that never finishes) must keep neither `devctl sim`
# from exiting nor a test's teardown from finishing, and the parts after it still stop and clean up.
STOP_PATIENCE = 10.0


async def stop_part(what: str, stopping: Awaitable[None]) -> None:
    """Await one part's stop for at most STOP_PATIENCE seconds; then cancel it, warn where it waited, go on."""
    task = asyncio.ensure_future(stopping)
    try:
        done, _ = await asyncio.wait({task}, timeout=STOP_PATIENCE)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        task.result()
        return
    where = ""
    if frames := task.get_stack():
        code, line = frames[-1].f_code, frames[-1].f_lineno
        where = f" (waiting in {code.co_name}, {code.co_filename}:{line})"
    log.warning("stopping the simulated node: %s did not end within %gs%s; left behind", what, STOP_PATIENCE, where)
    task.cancel()


class SimError(DevctlError):
    """The simulated node cannot start or do what was asked; the message is one line."""


class _Kubelet:
    """One run of the simulated kubelet process: what a restart throws away and builds anew."""

    def __init__(self, node: SimNode):
        paths = node.paths
        options = node.scenario.kubelet
        self.device_manager = DeviceManager(paths.plugins_dir, node.scenario, grace_period=node.grace_period)
        self.registration = RegistrationServer(paths.kubelet_socket, self.device_manager)
        # DRA: the plugin watcher on plugins_registry hands DRA drivers to the DRA manager (devctl/lab/sim/dra*.py).
        self.dra = DraManager(paths.kubelet_dir, paths.root, node.scenario.dra)
        self.watcher = PluginWatcher(
            paths.plugins_registry,
            {"DRAPlugin": self.dra, "DevicePlugin": DevicePluginRegistryHandler(self.registration, paths.root)},
        )
        self.pod_resources = PodResourcesServer(
            paths.pod_resources,
            PodResourcesWithClaims(self.device_manager, self.dra),
            get_enabled=options.get_enabled,
            api=options.api,
            dynamic_resources=options.dynamic_resources,
        )

    async def start(self, running: tuple[PodSpec, ...] | None) -> None:
        """Start as manager.go Start does: read the checkpoint, clean the plugins dir, then listen."""
        if running is not None:
            self.device_manager.restore(running)
            self.dra.restore()
        else:
            self.dra.start_fresh()
        clean_plugins_dir(self.device_manager.plugins_dir)
        await self.pod_resources.start()
        await self.registration.start()
        await self.watcher.start()

    async def stop(self) -> None:
        """Stop each part in turn, each within STOP_PATIENCE (stop_part)."""
        await stop_part("the kubelet's plugin watcher", self.watcher.stop())
        await stop_part("the kubelet's DRA manager", self.dra.close())
        await stop_part("the kubelet's registration server", self.registration.stop())
        await stop_part("the kubelet's device manager", self.device_manager.close())
        await stop_part("the kubelet's pod-resources server", self.pod_resources.stop())


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


class SimNode(serving.StartStop):
    """A simulated node under ``root``; use as ``async with SimNode(root, scenario) as node: await node.ready()``.

    ``grace_period`` is how long a resource whose plugin went away keeps its
    capacity (the kubelet's 5 minutes; tests shorten it). ``made`` is the record
    of what this run created, when the caller created the root itself (a
    temporary root); what it holds may be in the root, and is removed with the
    node's own files on stop. All methods run on the loop that started the node.
    """

    def __init__(
        self,
        root: Path,
        scenario: Scenario,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        made: Made | None = None,
    ):
        self.root = Path(root)
        self.made = made if made is not None else Made()
        self.scenario = scenario
        self.grace_period = grace_period
        self.paths = resolve_paths(root=str(self.root), env={})
        self.control_dir = default_control_dir(str(self.root))
        self.control_socket = control_socket(str(self.root))
        self.plugins: dict[str, DevicePluginServer] = {}
        self.dra_drivers: dict[str, DraDriver] = {}
        self._kubelet: _Kubelet | None = None
        self._admission: asyncio.Task[None] | None = None
        self._control: SimControlServer | None = None
        self._restart_lock = asyncio.Lock()
        self.workload = Workload(
            self.root,
            scenario.processes,
            lambda: self.device_manager.running_pods(),
            scenario.cpus,
            made=self.made,
            kubelet_config=scenario.kubelet.config,
            scenario_pods=frozenset(p.uid for p in scenario.pods),
        )
        self.kmsg = SimKmsg(self.root, self.workload.proc, scenario.kernel)  # <root>/dev/kmsg (lab/sim/kmsg.py)

    @property
    def dra_manager(self) -> DraManager:
        """The running kubelet's DRA manager (a new one after each restart)."""
        if self._kubelet is None:
            raise SimError("the simulated node is not running")
        return self._kubelet.dra

    @property
    def device_manager(self) -> DeviceManager:
        """The running kubelet's device manager (a new one after each restart)."""
        if self._kubelet is None:
            raise SimError("the simulated node is not running")
        return self._kubelet.device_manager

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Lay out the root, start the kubelet and the plugins, and begin admitting pods (see ``ready``).

        SimError (one line) when the root cannot hold a node: too long for its
        sockets, a node already runs there, or it holds files this run did not make.
        """
        self._check_root_path()
        with contextlib.suppress(SimNotRunning):
            await request(str(self.root), {"op": "info"}, 1.0)
            raise SimError(f"a simulated node already runs at {self.root}; stop it or choose another root")
        self._check_root()
        try:
            try:
                self._prepare_root()
            except OSError as e:
                raise SimError(f"cannot lay out a node under {self.root}: {e.strerror or e}") from None
            self._kubelet = _Kubelet(self)
            await self._kubelet.start(running=None)
            for spec in self.scenario.resources:
                plugin = DevicePluginServer(spec, self.paths.plugins_dir, control_dir=self.control_dir)
                self.plugins[spec.resource] = plugin  # before it starts: stop() must reach a half-started one
                await plugin.start()
            self.dra_drivers = await start_drivers(self.scenario.dra, self.paths, self.control_dir)
            self._control = SimControlServer(
                self.control_socket,
                {
                    "info": self._ctl_info,
                    "restart-kubelet": self._ctl_restart,
                    "delete-pod": lambda m: podlife.delete_pod(self, m),
                    "add-pod": lambda m: podlife.add_pod(self, m),
                    "kmsg": self.kmsg.control,
                },
            )
            await self._control.start()
            await self.workload.start()
            self.kmsg.start()
        except BaseException:
            await self.stop()
            raise
        self._admission = asyncio.create_task(self._admit_all(), name="admission")
        log.info("simulated node at %s: %d resources, %d pods", self.root, len(self.plugins), len(self.scenario.pods))

    async def stop(self) -> None:
        """Stop everything, then remove what this run made under the root (and nothing else). Safe to call twice."""
        if self._admission is not None:
            await stop_part("admission", cancel_and_wait(self._admission))
            self._admission = None
        if self._control is not None:
            await stop_part("the control socket's server", self._control.stop())
            self._control = None
        if self._kubelet is not None:
            await self._kubelet.stop()
            self._kubelet = None
        for name, plugin in self.plugins.items():
            await stop_part(f"the device plugin of {name}", plugin.stop())
        self.plugins.clear()
        await stop_part("the DRA drivers", stop_drivers(self.dra_drivers))
        await stop_part("the container runtime", self.workload.stop())
        await stop_part("the kernel log", self.kmsg.stop())
        self.made.remove()

    async def ready(self, timeout: float = 10.0) -> None:
        """Wait until every plugin registered and every pod went through admission; SimError after ``timeout``."""
        if self._admission is None:
            raise SimError("the simulated node is not running")
        try:
            await within(asyncio.shield(self._admission), timeout)
        except asyncio.TimeoutError:
            missing = [r.resource for r in self.scenario.resources if not self.device_manager.connected(r.resource)]
            missing += [d.driver for d in self.scenario.dra.drivers if d.driver not in self.dra_manager.drivers]
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
        """SimError unless the root is new, or ours and holds nothing but directories and what this run made."""
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            return
        except OSError as e:
            raise SimError(f"cannot use {self.root} as a root: {e.strerror or e}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise SimError(f"{self.root} is not a directory; give a new or empty directory with --root")
        if st.st_uid != os.geteuid():
            raise SimError(f"{self.root} belongs to uid {st.st_uid}; give a directory of your own with --root")
        try:
            foreign = _first_foreign_file(str(self.root), self.made)
        except OSError as e:
            raise SimError(f"cannot read {e.filename or self.root}: {e.strerror or e}") from None
        if foreign is not None:
            raise SimError(
                f"{self.root} holds files devctl sim did not make in this run (such as {foreign}); "
                "give a new or empty directory with --root"
            )

    def _check_root_path(self) -> None:
        """SimError for the real / and for a root too long for the node's socket paths."""
        try:
            real = os.path.realpath(self.root)
        except OSError as e:  # /proc/1/root of a process in another namespace: a root we cannot even resolve
            raise SimError(f"cannot use {self.root} as a root: {e.strerror or e}") from None
        if real == "/":
            raise SimError("refusing to simulate a node over the real / ; choose an empty directory with --root")
        sockets = [
            self.paths.kubelet_socket,
            self.paths.pod_resources,
            self.control_socket,
            self.workload.runtime.socket_path,
        ]
        for spec in self.scenario.resources:
            sockets.append(os.path.join(self.paths.plugins_dir, spec.socket))
            sockets.append(control_path(self.control_dir, spec.socket))
        for dra in self.scenario.dra.drivers:
            sockets.append(os.path.join(self.paths.plugins_registry, f"{dra.driver}-reg.sock"))
            sockets.append(os.path.join(self.paths.kubelet_dir, "plugins", dra.driver, "dra.sock"))
        for path in sockets:
            size = len(os.fsencode(os.path.abspath(path)))
            if size > MAX_SOCKET_PATH:
                inside = os.path.relpath(path, self.root)
                raise SimError(
                    f"{self.root} is too long a root: its socket {inside} would take {size} bytes, "
                    f"over the {MAX_SOCKET_PATH} of a unix socket path; choose a shorter root"
                )

    def _prepare_root(self) -> None:
        # Every directory the node writes into is made here and recorded, so stop removes exactly these.
        # The root held no file, so the node starts fresh: no pods ran here yet, and no checkpoint.
        for directory in (
            self.root,
            self.paths.sysfs,
            self.paths.plugins_dir,
            self.paths.plugins_registry,
            os.path.join(self.paths.kubelet_dir, "plugins"),
            os.path.join(self.root, DYNAMIC_DIR),
            os.path.dirname(self.paths.pod_resources),
            os.path.join(self.paths.kubelet_dir, "pods"),
            self.paths.pod_logs,
            self.control_dir,
            self.workload.proc,
            os.path.dirname(self.workload.runtime.socket_path),
        ):
            self.made.makedirs(directory)
        # DRA and device-plugin devices get PCI functions and /sys/dev/char links too (devctl/lab/sim/drasysfs.py).
        chars = char_devices(self.scenario.dra, self.scenario.resources, self.scenario.pci_devices)
        sim_gpus = nvidia.gpus(self.scenario.resources, self.scenario.pci_devices)  # 195:N and their CDI spec
        chars.update(nvidia.char_devices(sim_gpus))
        listed = set(self.scenario.pci_devices)
        pci = self.scenario.pci_devices + tuple(dict.fromkeys(d for d in chars.values() if d not in listed))
        with self.made.new_dirs(self.paths.sysfs):  # before the root is announced: only this run writes there
            write_topology(Path(self.paths.sysfs), self.scenario.numa_nodes, pci)
            write_char_links(Path(self.paths.sysfs), chars)
        if (spec := nvidia.write_spec(str(self.root), sim_gpus)) is not None:
            self.made.file(spec)
        self.kmsg.lay_out(self.made)

    def make_pod_dirs(self, pod: PodSpec) -> None:
        # What the kubelet makes for a pod it runs (pkg/kubelet/kubelet_pods.go, kuberuntime logs).
        log_dir = Path(self.paths.pod_logs, f"{pod.namespace}_{pod.name}_{pod.uid}")
        for container in pod.containers:
            self.made.makedirs(log_dir / container.name)
            (log_dir / container.name / "0.log").touch()
        self.made.makedirs(Path(self.paths.kubelet_dir, "pods", pod.uid, "containers"))

    # --- admission ----------------------------------------------------------------------

    async def _admit_all(self) -> None:
        await self.wait_registered(timeout=None)
        await wait_drivers(self.dra_manager, self.scenario.dra, timeout=None)
        dm = self.device_manager
        runnable = await prepare_claims(self.dra_manager, self.scenario.pods, dm.failed)
        for pod in await dm.admit_all(runnable):
            self.make_pod_dirs(pod)
        self.workload.populate(self.paths.checkpoint, self.dra_manager.claimed_nodes())
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
            "dra_drivers": sorted(self.dra_manager.drivers),
            "dra_claims": sorted(f"{c.namespace}/{c.name}" for c in self.dra_manager.claims.values()),
        }

    async def _ctl_restart(self, message: Mapping[str, Any]) -> dict[str, Any]:
        try:
            await self.restart_kubelet()
            if message.get("wait", True):
                await self.wait_registered(float(message.get("timeout", 10.0)))
        except SimError as e:
            return {"ok": False, "error": str(e)}
        dm = self.device_manager
        try:
            if message.get("wait", True):
                await wait_drivers(self.dra_manager, self.scenario.dra, float(message.get("timeout", 10.0)))
        except asyncio.TimeoutError:
            return {"ok": False, "error": "a DRA driver did not register again after the restart"}
        return {
            "ok": True,
            "registered": [n for n in dm.resource_names() if dm.connected(n)],
            "dra_drivers": sorted(self.dra_manager.drivers),
        }


def _first_foreign_file(root: str, made: Made) -> str | None:
    """The first entry under ``root`` that is not a directory and that ``made`` did not record, or None.

    Symlinks count as files and are never followed; an unreadable directory raises OSError.
    """
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.path in made:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    return entry.path
    return None
