"""Every plugin socket (``devctl plugins``), with the kubelet's socket and the checkpoint beside them."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.analyze.sources import CHECKPOINT
from devctl.model import (
    CSI_PLUGIN_TYPE,
    DEVICE_PLUGIN_TYPE,
    DRA_PLUGIN_TYPE,
    DeviceList,
    ErrorKind,
    NodePaths,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    RegistryInfo,
    SocketStatus,
)


@dataclass(frozen=True)
class SocketState:
    """The kubelet's socket: ``present`` as a file, ``status`` as dialled (``listening``, ``stale``, ``missing``...).

    The kubelet leaves its socket on disk when it exits: ``present`` alone proves nothing.
    """

    path: str
    present: bool
    status: SocketStatus | None


@dataclass(frozen=True)
class CheckpointState:
    path: str
    present: bool
    checksum_ok: bool | None


@dataclass(frozen=True)
class PluginRow:
    socket: str
    resource: str | None
    status: str
    devices: int | None
    healthy: int | None
    options: PluginOptions | None
    latency_ms: float | None
    error: str | None
    registry: RegistryInfo | None
    error_kind: ErrorKind | None
    # Both worlds (cli.md): what kind of plugin, and for a registry socket its endpoint as probed.
    kind: str = "device-plugin"  # dra | device-plugin | csi | unknown
    driver: str | None = None
    endpoint: str | None = None  # as the kubelet sees it (GetInfo)
    endpoint_path: str | None = None  # resolved under --root
    endpoint_status: str | None = None
    supported_versions: tuple[str, ...] = ()
    health_stream: bool | None = None  # DRA: DRAResourceHealth offered


# PluginInfo.type -> the ``kind`` of the CLI contract.
_KINDS = {DRA_PLUGIN_TYPE: "dra", DEVICE_PLUGIN_TYPE: "device-plugin", CSI_PLUGIN_TYPE: "csi"}


def _status(p: PluginProbe) -> str:
    """A DRA driver serves when both its registration socket and its endpoint do: the first that fails says how."""
    if p.status == PluginStatus.SERVING and p.dra is not None and p.dra.status != PluginStatus.SERVING:
        return str(p.dra.status.value)
    return str(p.status.value)


def _dra_devices(p: PluginProbe, health: str | None) -> int | None:
    """A DRA driver's devices (of ``health``) as its health stream lists them; None when no stream was read."""
    if p.dra is None or p.dra.health is None:
        return None
    return sum(1 for h in p.dra.health if health is None or h.health == health)


def _kind(p: PluginProbe, paths: NodePaths) -> str:
    if p.registry is not None:
        return _KINDS.get(p.registry.type, "unknown")
    # A socket in the device-plugins dir is a device plugin; a registry socket that never answered GetInfo is unknown.
    return "unknown" if paths.in_plugins_registry(p.socket) else "device-plugin"


@dataclass(frozen=True)
class PluginsView:
    kubelet_socket: SocketState
    checkpoint: CheckpointState
    plugins: tuple[PluginRow, ...]


def _checkpoint_present(snapshot: NodeSnapshot) -> bool:
    if snapshot.checkpoint is not None:
        return True
    return any(e.source == CHECKPOINT and e.kind != ErrorKind.MISSING for e in snapshot.errors)


def plugins_view(snapshot: NodeSnapshot) -> PluginsView:
    """Every socket probed, with the kubelet's socket and the checkpoint beside them."""
    cp = snapshot.checkpoint
    rows = tuple(
        PluginRow(
            socket=p.socket,
            # A DRA driver's name stands where a resource name stands (cli.md).
            resource=p.resource or p.dra_driver,
            status=_status(p),
            devices=len(p.devices)
            if p.status == PluginStatus.SERVING and p.options is not None
            else _dra_devices(p, None),
            healthy=DeviceList.of(p.devices).healthy_count()
            if p.status == PluginStatus.SERVING and p.options is not None
            else _dra_devices(p, "Healthy"),
            options=p.options,
            latency_ms=round(p.latency_ms, 3) if p.latency_ms is not None else None,
            error=p.error,
            registry=p.registry,
            error_kind=p.error_kind,
            kind=_kind(p, snapshot.paths),
            driver=p.dra_driver,
            endpoint=p.registry.endpoint if p.registry is not None else None,
            endpoint_path=p.dra.path if p.dra is not None else None,
            endpoint_status=p.dra.status.value if p.dra is not None else None,
            supported_versions=p.registry.supported_versions if p.registry is not None else (),
            health_stream=p.dra.health_stream if p.dra is not None else None,
        )
        for p in sorted(snapshot.plugins, key=lambda p: p.socket)
    )
    return PluginsView(
        kubelet_socket=SocketState(
            snapshot.paths.kubelet_socket, snapshot.kubelet_socket_present, snapshot.kubelet_socket_status
        ),
        checkpoint=CheckpointState(
            snapshot.paths.checkpoint, _checkpoint_present(snapshot), cp.checksum_ok if cp else None
        ),
        plugins=rows,
    )
