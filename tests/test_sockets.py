"""The one socket lister and resolver (devctl.node.sockets), on real socket files and real registry servers."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
from badservers import stale_socket
from registry import plugin_info, registry_server

from devctl import analyze
from devctl.core.collect import collect
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import (
    Checkpoint,
    CheckpointEntry,
    ContainerDevices,
    ContainerResources,
    Device,
    NodePaths,
    PluginStatus,
    PodResources,
)
from devctl.node.paths import resolve_paths
from devctl.node.sockets import OutsideRoot, in_root, known_ids, plugin_sockets, registry_sockets

GPU = "vendor.example/gpu"
ANSWER = 5.0
PLUGINS_NODE_DIR = "/var/lib/kubelet/device-plugins"


@pytest.fixture
def node(short_root: Path) -> NodePaths:
    paths = resolve_paths(root=str(short_root), env={})
    os.makedirs(paths.plugins_dir)
    return paths


def names(found: list, base: str) -> list[tuple[str, str]]:
    return [(os.path.relpath(s.path, base), os.path.relpath(s.real, base)) for s in found]


def test_plugins_dir_lists_sockets_and_links_to_them_once(node: NodePaths) -> None:
    d, root = Path(node.plugins_dir), node.root
    stale_socket(str(d / "a.sock"))
    stale_socket(str(d / "kubelet.sock"))
    stale_socket(str(d / ".hidden.sock"))
    (Path(root) / "run/vendor").mkdir(parents=True)
    stale_socket(f"{root}/run/vendor/gpu.sock")
    (d / "gpu.sock").symlink_to("/run/vendor/gpu.sock")  # a node path: found under the root
    (d / "alias.sock").symlink_to("a.sock")  # the same plugin as a.sock: one row, not two
    (d / "kubelet-link.sock").symlink_to("kubelet.sock")
    (d / "dangling.sock").symlink_to("gone.sock")
    (d / "file.sock").write_text("")
    (d / "dir.sock").mkdir()
    os.mkfifo(d / "fifo.sock")
    found = plugin_sockets(node.plugins_dir, root)
    assert names(found, root) == [
        ("var/lib/kubelet/device-plugins/a.sock", "var/lib/kubelet/device-plugins/a.sock"),
        ("var/lib/kubelet/device-plugins/gpu.sock", "run/vendor/gpu.sock"),
    ]
    with pytest.raises(FileNotFoundError):
        plugin_sockets(f"{root}/nowhere", root)


def test_registry_is_walked_as_the_plugin_watcher_walks_it(node: NodePaths) -> None:
    reg, root = Path(node.plugins_registry), node.root
    (reg / "csi/deep").mkdir(parents=True)
    (reg / ".hidden-dir").mkdir()
    stale_socket(str(reg / "top.sock"))
    stale_socket(str(reg / "csi/deep/driver-reg.sock"))
    stale_socket(str(reg / "csi/.ignored.sock"))
    stale_socket(str(reg / ".hidden-dir/found.sock"))  # the watcher skips dot-named sockets, not directories
    (Path(root) / "elsewhere").mkdir()
    stale_socket(f"{root}/elsewhere/x.sock")
    (reg / "linked-dir").symlink_to(f"{root}/elsewhere")  # a symlinked directory is not followed
    found = registry_sockets(node.plugins_registry, root)
    assert [os.path.relpath(s.path, reg) for s in found] == [
        ".hidden-dir/found.sock",
        "csi/deep/driver-reg.sock",
        "top.sock",
    ]


def test_paths_stay_inside_the_root(short_root: Path) -> None:
    root = str(short_root)
    (short_root / "a/b").mkdir(parents=True)
    (short_root / "a/abs").symlink_to("/a/b")
    (short_root / "a/rel").symlink_to("b")
    (short_root / "a/up").symlink_to("../../../../../etc")
    (short_root / "a/loop").symlink_to("loop")
    assert in_root(root, "/a/abs/x.sock") == f"{root}/a/b/x.sock"
    assert in_root(root, "/a/rel/../b/x.sock") == f"{root}/a/b/x.sock"
    for path in ("/../etc/passwd", "/a/up/passwd", "/a/loop/x"):
        with pytest.raises(OutsideRoot):
            in_root(root, path)


def test_every_kubelet_known_id_counts() -> None:
    pods = (PodResources("ns", "p", (ContainerResources("c", (ContainerDevices(GPU, ("held",)),)),)),)
    checkpoint = Checkpoint(
        path="x",
        format="v2",
        checksum_ok=True,
        checksum=None,
        computed_checksum=None,
        entries=(CheckpointEntry("uid", "c", GPU, {"-1": ("checkpointed",)}),),
        registered_devices={GPU: ("registered",)},
    )
    assert known_ids(None, pods, checkpoint) == {GPU: {"held", "checkpointed", "registered"}}


# --- plugins_registry endpoints under --root: absolute, relative, empty, and outside the root ------------


async def serve(paths: NodePaths, socket_path: str, devices: tuple[Device, ...]) -> DevicePluginServer:
    Path(socket_path).parent.mkdir(parents=True, exist_ok=True)
    spec = PluginSpec(GPU, devices, os.path.basename(socket_path))
    server = DevicePluginServer(spec, os.path.dirname(socket_path), register=False)
    await server.start()
    return server


@pytest.mark.parametrize(
    ("endpoint", "serves_at"),
    [
        ("/var/lib/kubelet/plugins/gpu/dp.sock", "var/lib/kubelet/plugins/gpu/dp.sock"),  # absolute: a node path
        ("vendor/dp.sock", "var/lib/kubelet/device-plugins/vendor/dp.sock"),  # relative to the device-plugins dir
        ("", None),  # empty: the registration socket serves DevicePlugin itself
    ],
)
async def test_registry_endpoint_forms(node: NodePaths, endpoint: str, serves_at: str | None) -> None:
    reg_sock = f"{node.plugins_registry}/vendor/gpu-reg.sock"
    devices = (Device("g0"), Device("g1", "Unhealthy"))
    server = await serve(node, f"{node.root}/{serves_at}", devices) if serves_at else None
    try:
        async with registry_server(reg_sock, plugin_info(GPU, endpoint), None if server else devices):
            snap = await asyncio.wait_for(collect(node, ANSWER, want={analyze.PLUGINS}), 10)
    finally:
        if server is not None:
            await server.stop()
    probe = next(p for p in snap.plugins if p.socket == reg_sock)
    assert (probe.status, probe.resource, [d.id for d in probe.devices]) == (PluginStatus.SERVING, GPU, ["g0", "g1"])
    assert snap.errors == ()
    (row,) = analyze.resources_view(snap)
    assert (row.name, row.status, row.capacity, row.allocatable) == (GPU, "serving", 2, 1)


@pytest.mark.parametrize(
    "endpoint",
    ["../../../../../../outside.sock", "/../outside.sock", "/var/lib/kubelet/plugins/gpu/escape.sock"],
)
async def test_an_endpoint_outside_the_root_is_refused_never_dialled(short_root: Path, endpoint: str) -> None:
    node = resolve_paths(root=str(short_root / "node"), env={})
    os.makedirs(node.plugins_dir)
    escape = Path(node.kubelet_dir) / "plugins/gpu/escape.sock"
    escape.parent.mkdir(parents=True)
    escape.symlink_to("../../../../../../outside.sock")
    # A listener where each form would lead: a dial would leave a connection in its backlog.
    outside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    outside.bind(str(short_root / "outside.sock"))
    outside.listen(8)
    outside.setblocking(False)
    reg_sock = f"{node.plugins_registry}/gpu-reg.sock"
    try:
        async with registry_server(reg_sock, plugin_info(GPU, endpoint)):
            snap = await asyncio.wait_for(collect(node, ANSWER, want={analyze.PLUGINS}), 10)
        with pytest.raises(BlockingIOError):
            outside.accept()
    finally:
        outside.close()
    (probe,) = snap.plugins
    assert probe.status != PluginStatus.SERVING and probe.resource == GPU
    (error,) = snap.errors
    assert "outside the root" in error.message and "\n" not in error.message
    assert error.message.startswith(reg_sock)


def test_a_plugins_dir_given_outside_the_root_is_listed_as_it_is(short_root: Path) -> None:
    # --plugins-dir names a directory of this machine, wherever --root points.
    plugins = short_root / "elsewhere/device-plugins"
    plugins.mkdir(parents=True)
    stale_socket(str(plugins / "a.sock"))
    (plugins / "b.sock").symlink_to("a.sock")
    root = short_root / "node"
    root.mkdir()
    found = plugin_sockets(str(plugins), str(root))
    assert [(os.path.basename(s.path), s.real) for s in found] == [("a.sock", str(plugins / "a.sock"))]


async def test_a_registry_socket_linked_from_elsewhere_is_dialled_under_the_root(node: NodePaths) -> None:
    # plugins_registry/vendor.sock -> /run/vendor/reg.sock, a node path: the file under the root is asked.
    target = f"{node.root}/run/vendor/reg.sock"
    os.makedirs(node.plugins_registry)
    link = Path(node.plugins_registry) / "vendor.sock"
    async with registry_server(target, plugin_info(GPU, ""), (Device("g0"),)):
        link.symlink_to("/run/vendor/reg.sock")
        snap = await asyncio.wait_for(collect(node, ANSWER, want={analyze.PLUGINS}), 10)
    (probe,) = snap.plugins
    assert (probe.socket, probe.status, probe.resource) == (str(link), PluginStatus.SERVING, GPU)
    assert [d.id for d in probe.devices] == ["g0"]
