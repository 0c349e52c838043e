"""The lab's one way to serve gRPC servicers on a unix socket (devctl/lab/serving.py), as a client and a person see it:
the socket is there 0600 while it serves and answers, gone after; what is not devctl's stale socket is never taken;
a socket someone else put at the path after ours is never removed by our stop."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import grpc
import pytest

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.lab import made
from devctl.lab.serving import BindError, UnixGrpcServer


class _Kubelet(dp_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def Register(self, request: dp.RegisterRequest, context: grpc.aio.ServicerContext) -> dp.Empty:
        self.seen.append(request.resource_name)
        return dp.Empty()


def _server(path: Path, kubelet: _Kubelet, dir_mode: int | None = None) -> UnixGrpcServer:
    return UnixGrpcServer(
        str(path), lambda s: dp_grpc.add_RegistrationServicer_to_server(kubelet, s), grace=0.1, dir_mode=dir_mode
    )


async def _register(path: Path, resource: str) -> None:
    async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
        await dp_grpc.RegistrationStub(channel).Register(dp.RegisterRequest(resource_name=resource), timeout=10)


async def test_serves_on_a_private_socket_in_the_dir_it_makes_and_removes_the_socket_on_stop(short_root: Path) -> None:
    path = short_root / "plugins" / "kubelet.sock"
    kubelet = _Kubelet()
    old = os.umask(0)  # the widest umask: the socket is still 0600
    try:
        async with _server(path, kubelet, dir_mode=0o750) as server:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert server.still_bound()
            await _register(path, "example.com/gpu")
    finally:
        os.umask(old)
    assert kubelet.seen == ["example.com/gpu"]
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750
    assert not path.exists()
    assert sorted(os.listdir(path.parent)) == []  # no temporary binding name left either


async def test_a_stale_socket_is_replaced_but_a_file_is_refused_and_kept(short_root: Path) -> None:
    stale = short_root / "stale.sock"
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(stale))
    leftover.close()  # bound, never listened on: a killed server's socket
    kubelet = _Kubelet()
    async with _server(stale, kubelet):
        await _register(stale, "a/b")
    assert kubelet.seen == ["a/b"]

    taken = short_root / "notes.sock"
    taken.write_text("a person's file")
    server = _server(taken, kubelet)
    with pytest.raises(made.PathTaken, match="a regular file is there"):
        await server.start()
    assert taken.read_text() == "a person's file"
    assert not server.running
    await server.stop()  # nothing started: nothing to stop, nothing removed
    assert taken.exists()


async def test_a_missing_directory_is_one_line_naming_it(short_root: Path) -> None:
    path = short_root / "absent" / "kubelet.sock"
    with pytest.raises(BindError) as raised:
        await _server(path, _Kubelet()).start()
    assert str(raised.value) == f"cannot bind {path}: {short_root / 'absent'} is not a directory"


async def test_stop_leaves_a_socket_that_someone_else_put_at_the_path(short_root: Path) -> None:
    """As a restarting kubelet does (devicemanager removeContents), someone removes our socket and binds theirs."""
    path = short_root / "plugin.sock"
    server = _server(path, _Kubelet())
    await server.start()
    path.unlink()
    theirs = socket.socket(socket.AF_UNIX)
    theirs.bind(str(path))
    try:
        assert not server.still_bound()
        await server.stop()
        assert path.exists()  # theirs, left alone
        assert made.socket_identity(str(path)) is not None
    finally:
        theirs.close()
