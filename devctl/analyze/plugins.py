"""Every plugin socket (``devctl plugins``), with the kubelet's socket and the checkpoint beside them."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.analyze.sources import CHECKPOINT
from devctl.model import ErrorKind, NodeSnapshot, PluginOptions, PluginStatus, RegistryInfo, SocketStatus


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
            resource=p.resource,
            status=p.status.value,
            devices=len(p.devices) if p.status == PluginStatus.SERVING and p.options is not None else None,
            healthy=sum(d.healthy for d in p.devices)
            if p.status == PluginStatus.SERVING and p.options is not None
            else None,
            options=p.options,
            latency_ms=round(p.latency_ms, 3) if p.latency_ms is not None else None,
            error=p.error,
            registry=p.registry,
            error_kind=p.error_kind,
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
