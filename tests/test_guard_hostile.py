"""Hostile plugin-watcher endpoints are one socket's failure, never the plugins source's (issue 28, item 2).

A registration socket in ``plugins_registry/`` answers GetInfo with whatever
endpoint string it likes. Each kind of string that names no file devctl may
dial is one failure line of that socket; the healthy plugin beside it is still
read, shown, followed and guarded. Real servers on real unix sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from badservers import hung_server
from registry import plugin_info, registry_server
from test_plugin_fakes import devctl

from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.core.guard import live_server_for
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import Device, NodePaths, SourceError
from devctl.node.checkpoint import write_checkpoint
from devctl.node.paths import resolve_paths

REAL = PluginSpec(resource="vendor.example/gpu", devices=(Device("GPU-a1"), Device("GPU-b2")), socket="vendor.sock")
EVIL = "evil.example/x"

# Every kind of endpoint string a registration may send that names no socket devctl may dial.
HOSTILE = {
    "nul": "vendor\0.sock",
    "long": "a/" * 2100 + "x.sock",  # 4,206 bytes: longer than PATH_MAX
    "dotdot": "../../../../../../../../../../../../run/x.sock",
    "absolute-elsewhere": "/etc/passwd",
    "control": "\x1b[2J\x1b]0;owned\x07x.sock",
    "unix-target": "unix:///var/lib/kubelet/device-plugins/vendor.sock",
    "empty": "",  # the registration socket itself, which serves no DevicePlugin here
}


@pytest.fixture
def paths(short_root: Path) -> NodePaths:
    p = resolve_paths(root=str(short_root), env={})
    Path(p.plugins_dir).mkdir(parents=True)
    return p


@contextlib.asynccontextmanager
async def healthy_plugin(paths: NodePaths) -> AsyncIterator[str]:
    """A vendor's healthy plugin, registered through plugins_registry/ (the registration names its resource)."""
    async with (
        DevicePluginServer(REAL, paths.plugins_dir, register=False) as live,
        registry_server(f"{paths.plugins_registry}/vendor-reg.sock", plugin_info(REAL.resource, REAL.socket)),
    ):
        yield live.socket_path


class _RawInfo(grpc.GenericRpcHandler):
    """GetInfo answered with raw bytes: what no protobuf library would send (a string that is not UTF-8)."""

    def __init__(self, reply: bytes):
        self._handler = grpc.unary_unary_rpc_method_handler(self._answer)
        self._reply = reply

    async def _answer(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return self._reply

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return self._handler


@contextlib.asynccontextmanager
async def raw_registration(path: str, reply: bytes) -> AsyncIterator[str]:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_RawInfo(reply)])
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield path
    finally:
        await server.stop(None)


def _not_utf8_info() -> bytes:
    head = reg.PluginInfo(type="DevicePlugin", name=EVIL, supported_versions=["v1beta1"]).SerializeToString()
    return head + b"\x1a\x04\xff\xfe\xed\xa0"  # field 3 (endpoint): bytes that are not UTF-8 (nor a surrogate's)


def _hostile(paths: NodePaths, case: str, type_: str = "DevicePlugin") -> contextlib.AbstractAsyncContextManager[str]:
    sock = f"{paths.plugins_registry}/evil.sock"
    if case == "not-utf8":
        return raw_registration(sock, _not_utf8_info())
    return registry_server(sock, plugin_info(EVIL, HOSTILE[case], type_))


def _one_line_about_evil(err: str) -> str:
    assert "Traceback" not in err and "ValueError" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("warning: registry: ")]
    assert "\x1b" not in err and "\x00" not in err and "\x07" not in err, err  # escaped where shown
    assert len(line) < 600, line  # a 4 KiB endpoint is cut, not printed whole
    return line


@pytest.mark.parametrize("case", [*sorted(HOSTILE), "not-utf8"])
async def test_a_hostile_endpoint_is_one_failure_of_its_socket(paths: NodePaths, case: str) -> None:
    root = Path(paths.root)
    async with healthy_plugin(paths), _hostile(paths, case):
        # WHEN a person lists the resources and the plugins beside a hostile registration
        code, out, err = await devctl(root, "ls", "-o", "json")
        # THEN the healthy plugin's resource is still read, served, with its two devices
        assert code == 0, err
        answer = json.loads(out)
        rows = {r["name"]: r for r in answer["resources"]}
        assert rows[REAL.resource]["status"] == "serving", rows
        assert rows[REAL.resource]["capacity"] == 2, rows
        # and the hostile socket is one error of that socket, not of the plugins source
        (error,) = [e for e in answer["errors"] if e["source"] != "checkpoint" and e["source"] != "pod-resources"]
        assert error["source"] == "registry", error
        # WHEN they list the plugins THEN the healthy one serves, and the hostile one is one warning line, escaped
        code, out, err = await devctl(root, "plugins")
        assert code == 0, err
        assert "vendor.sock" in out and "serving" in out
        _one_line_about_evil(err)


async def test_a_nul_dra_endpoint_leaves_watch_and_call_one_line(paths: NodePaths) -> None:
    # GIVEN a DRA driver's registration whose endpoint holds a NUL, beside a healthy device plugin
    root = Path(paths.root)
    async with healthy_plugin(paths), _hostile(paths, "nul", "DRAPlugin"):
        # THEN watching every plugin shows the healthy one's snapshot, and says one line of the bad one
        code, out, err = await devctl(root, "watch", "--once")
        assert code == 0, err
        assert "snapshot" in out and "2/2 healthy" in out, out
        assert "Traceback" not in err, err
        # and watching or calling the bad driver is one `devctl:` line, not a traceback
        for argv in (("watch", EVIL, "--once"), ("call", "--dra", EVIL, "info")):
            code, out, err = await devctl(root, *argv)
            assert code == 1, err
            (line,) = err.strip().splitlines()
            assert line.startswith("devctl: ") and EVIL in line, err


async def test_the_exporter_tells_a_sockets_failure_from_the_sources(paths: NodePaths) -> None:
    # devctl_source_up{source="plugins"} is 1 when the source was read whole (docs/exporter.md); one
    # socket's failure is that socket's devctl_plugin_up 0
    from devctl.core.collect import collect
    from devctl.exporter.metrics import source_up

    async with healthy_plugin(paths), _hostile(paths, "nul"):
        snapshot = await asyncio.wait_for(collect(paths, 2), 15)
    assert any(p.resource == REAL.resource and p.status.value == "serving" for p in snapshot.plugins)
    (bad,) = [p for p in snapshot.plugins if p.socket.endswith("evil.sock")]
    assert bad.status.value == "unreachable" and bad.error is not None and "NUL" in bad.error
    assert source_up(snapshot)["plugins"] is True
    # and when the plugins source itself failed (its reader raised, as the NUL once made it), it is 0, not 1
    failed = replace(snapshot, plugins=(), errors=(SourceError("plugins", "ValueError: embedded null byte"),))
    assert source_up(failed)["plugins"] is False


# --- the takeover guard fails closed ---------------------------------------------------------------------------


SERVE = ("plugin", "serve", "--resource", REAL.resource, "--count", "1", "--socket", "debug.sock")


async def _refused(paths: NodePaths, *argv: str) -> str:
    """`plugin serve` of REAL's resource: exit 2, one `devctl:` line that says --force, nothing served."""
    code, _, err = await devctl(Path(paths.root), *argv, *SERVE)
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"devctl: {REAL.resource} ") and "--force" in line, line
    assert "debug.sock" not in os.listdir(paths.plugins_dir)
    return line


async def test_serve_refuses_beside_a_healthy_plugin_and_a_nul_registration(paths: NodePaths) -> None:
    async with healthy_plugin(paths) as live, _hostile(paths, "nul"):
        line = await _refused(paths)
    assert f"is already served by the live plugin at {live}" in line


async def test_serve_refuses_when_the_resources_registration_cannot_be_resolved(paths: NodePaths) -> None:
    # GIVEN the only registration of the resource names an endpoint with a NUL: devctl cannot tell what it dials
    sock = f"{paths.plugins_registry}/vendor-reg.sock"
    async with registry_server(sock, plugin_info(REAL.resource, "vendor\0.sock")):
        line = await _refused(paths)
    assert f"may already be served by the live plugin at {sock}" in line
    assert "endpoint cannot be resolved" in line and "\\x00" in line


async def test_serve_refuses_beside_a_plugin_that_answers_after_the_timeout(paths: NodePaths) -> None:
    # GIVEN a plugin the kubelet knows (its devices in the checkpoint) that accepts and answers nothing in time
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-a1", "GPU-b2"]})
    async with hung_server(f"{paths.plugins_dir}/{REAL.socket}"):
        line = await _refused(paths, "--timeout", "0.5")
    assert f"may already be served by the live plugin at {paths.plugins_dir}/{REAL.socket}" in line
    assert "did not answer within the timeout" in line


async def test_serve_with_a_tiny_timeout_refuses_over_a_healthy_plugin(paths: NodePaths) -> None:
    # --timeout 0.01: the healthy plugin answers in time (served) or not (may serve); either way, refused
    write_checkpoint(paths.checkpoint, [], {REAL.resource: ["GPU-a1", "GPU-b2"]})
    async with DevicePluginServer(REAL, paths.plugins_dir, register=False):
        await _refused(paths, "--timeout", "0.01")


async def test_serve_refuses_when_the_kubelets_devices_cannot_be_read(paths: NodePaths) -> None:
    # GIVEN a healthy plugin no registration names, and a kubelet whose pod-resources never answers (no
    # checkpoint): devctl cannot tie the plugin to its resource, so it may serve this one
    Path(paths.pod_resources).parent.mkdir(parents=True)
    async with hung_server(paths.pod_resources), DevicePluginServer(REAL, paths.plugins_dir, register=False) as live:
        # Room for the live plugin on a loaded machine; the hung kubelet never answers.
        line = await _refused(paths, "--timeout", "2")
    assert f"may already be served by the live plugin at {live.socket_path}" in line
    assert "the kubelet's devices could not be read" in line


async def test_serve_still_registers_when_nothing_can_serve(paths: NodePaths) -> None:
    # A stale socket, a registration of another resource and a DRA driver's bad endpoint prove nobody serves R.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(f"{paths.plugins_dir}/{REAL.socket}")
    stale.close()
    async with (
        _hostile(paths, "nul"),
        registry_server(f"{paths.plugins_registry}/dra.sock", plugin_info("gpu.example.com", "\0", "DRAPlugin")),
    ):
        assert await asyncio.wait_for(live_server_for(REAL.resource, paths, 1), 10) is None
