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
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from registry import plugin_info, registry_server
from test_plugin_fakes import devctl

from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.model import Device, NodePaths, SourceError
from devctl.node.paths import resolve_paths
from devctl.plugin.server import DevicePluginServer
from devctl.plugin.spec import PluginSpec

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
    from devctl.collect import collect
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
