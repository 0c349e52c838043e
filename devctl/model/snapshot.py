"""Everything at once: where it is on the node (``NodePaths``) and what was read there (``NodeSnapshot``)."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.base.errors import SocketStatus
from devctl.model.cdi import CdiState
from devctl.model.checkpoints import Checkpoint, DraCheckpoint
from devctl.model.host import HostTopology, ProcScan, RuntimeState
from devctl.model.kubelet import KubeletState
from devctl.model.plugins import PluginProbe
from devctl.model.pods import AllocatableResources, PodIdentity, PodResources
from devctl.model.sources import DRA_DRIVERS, PLUGINS, SourceError

# --- everything at once -----------------------------------------------------------


@dataclass(frozen=True)
class NodePaths:
    """Where everything on the node is, resolved once (see ``devctl.node.paths``)."""

    root: str
    kubelet_dir: str
    plugins_dir: str
    pod_resources: str
    sysfs: str
    pod_logs: str
    proc: str = ""
    runtime_endpoint: str = ""
    cdi_dirs: tuple[str, ...] = ()  # CDI spec dirs, lowest priority first (the runtime's order)

    @property
    def kubelet_socket(self) -> str:
        return f"{self.plugins_dir}/kubelet.sock"

    @property
    def checkpoint(self) -> str:
        return f"{self.plugins_dir}/kubelet_internal_checkpoint"

    @property
    def dra_checkpoint(self) -> str:
        return f"{self.kubelet_dir}/dra_manager_state"

    @property
    def plugins_registry(self) -> str:
        return f"{self.kubelet_dir}/plugins_registry"

    def in_plugins_registry(self, socket: str) -> bool:
        """Whether ``socket`` was listed in ``plugins_registry/`` (or a directory under it), where the plugin
        watcher finds registrations, rather than in the device-plugins dir."""
        return socket.startswith(self.plugins_registry.rstrip("/") + "/")


@dataclass(frozen=True)
class NodeSnapshot:
    """Everything the read commands use, collected once. ``None`` means not read."""

    taken_at: str  # UTC, ISO 8601
    paths: NodePaths
    kubelet_socket_present: bool = False  # a socket file is there (it may be stale)
    pods: tuple[PodResources, ...] | None = None
    allocatable: AllocatableResources | None = None
    plugins: tuple[PluginProbe, ...] = ()
    checkpoint: Checkpoint | None = None
    topology: HostTopology | None = None
    pod_identities: tuple[PodIdentity, ...] = ()
    errors: tuple[SourceError, ...] = ()
    # kubelet.sock dialled; None in a snapshot file written before devctl dialled it.
    kubelet_socket_status: SocketStatus | None = None
    procs: ProcScan | None = None
    runtime: RuntimeState | None = None
    kubelet_state: KubeletState | None = None
    dra_checkpoint: DraCheckpoint | None = None  # dra_manager_state; None when absent or unreadable
    cdi: CdiState | None = None
    # What was still being read when this snapshot was made: source names and plugin socket paths, as
    # collect's Progress names them. Empty for a finished read; only a face that shows the node while a
    # hung socket is awaited (the TUI's first screen) sees a partial snapshot.
    pending: tuple[str, ...] = ()
    # The name the kubelet registers the Node under (its --hostname-override, else <root>/etc/hostname), for
    # hints a person types; None when unknown (devctl.node.nodename), then hints say <node>.
    node_name: str | None = None

    @property
    def plugins_incomplete(self) -> bool:
        """Whether sockets are still being listed or answered: then no plugin or driver is known to be absent.

        A partial snapshot's ``plugins`` holds the sockets that answered so far;
        a resource or a DRA driver missing from it may be served by one still
        pending, so "no plugin serves it" cannot be said yet.
        """
        return any(p in (PLUGINS, DRA_DRIVERS) or "/" in p for p in self.pending)
