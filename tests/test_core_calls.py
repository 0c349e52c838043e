"""Calling a plugin or a driver as the core's use-case (devctl.core.calls, calls_dra): what any face gets.

The CLI's behaviour is tests/test_call.py and tests/test_call_dra.py; these check the use-case on its own: the
model values it returns, the typed failures it raises, the consent it needs before touching any socket, and
that the CLI's call modules reach the node only through it.
"""

from __future__ import annotations

import ast
import asyncio
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import devctl
from devctl.core.calls import RpcFailure, UnknownResource, call_plugin, unreachable
from devctl.core.calls_dra import UnknownDriver, call_driver
from devctl.core.callwords import DraRequest, NeedsConsent, Request
from devctl.lab.sim.thread import SimHandle
from devctl.model import NodePaths

GPU, DRIVER = "nvidia.com/gpu", "gpu.example.com"
CLI_CALL_MODULES = ("cli/call.py", "cli/call_dra.py")


def _no_node(root: Path) -> NodePaths:
    """Paths under an empty directory: a root that is no node."""
    k = f"{root}/var/lib/kubelet"
    plugins, pod_resources = f"{k}/device-plugins", f"{k}/pod-resources/kubelet.sock"
    return NodePaths(str(root), k, plugins, pod_resources, f"{root}/sys", f"{root}/log")


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at module level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", CLI_CALL_MODULES)
def test_the_call_commands_import_nothing_from_node(module: str) -> None:
    # GIVEN the CLI's call modules, WHEN every import they make is listed (inside functions too)
    imported = _imported(Path(devctl.__file__).parent / module)
    # THEN none is of node/: they reach the node through core/ only
    assert {m for m in imported if m == "devctl.node" or m.startswith("devctl.node.")} == set()
    assert "devctl.core.calls" in imported or "devctl.core.callwords" in imported


@pytest.fixture
def listening() -> Iterator[tuple[socket.socket, str]]:
    """A unix socket that listens and is never accepted on: a connect to it stays pending in its backlog."""
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        path = f"{d}/p.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(8)
        server.setblocking(False)
        try:
            yield server, path
        finally:
            server.close()


@pytest.mark.parametrize("rpc", ["allocate", "prestart"])
def test_a_state_changing_rpc_without_consent_touches_no_socket(
    rpc: str, listening: tuple[socket.socket, str], tmp_path: Path
) -> None:
    server, path = listening
    # WHEN the use-case is asked for allocate or prestart without changes_state
    request = Request(rpc, device_ids=("gpu-0",))
    with pytest.raises(NeedsConsent, match="add --yes"):
        asyncio.run(call_plugin(_no_node(tmp_path), 2.0, None, path, request))
    # THEN nobody connected to the plugin's socket: its backlog is empty
    with pytest.raises(BlockingIOError):
        server.accept()


@pytest.mark.parametrize("rpc", ["prepare", "unprepare"])
def test_a_claim_change_without_consent_fails_before_looking_for_the_driver(rpc: str, tmp_path: Path) -> None:
    # GIVEN a root that is no node (looking for the driver there would fail with an RpcFailure)
    request = DraRequest(rpc, "ml/claim", "uid-1")
    # WHEN prepare/unprepare is asked without changes_state, THEN consent is what is missing, nothing else
    with pytest.raises(NeedsConsent, match="changes node state"):
        asyncio.run(call_driver(_no_node(tmp_path), 2.0, DRIVER, request))


def test_the_first_list_and_options_come_back_as_model_values(sim_node: SimHandle) -> None:
    # WHEN the use-case calls the GPU plugin, found by its resource name
    listed = asyncio.run(call_plugin(sim_node.paths, 5.0, GPU, None, Request("list")))
    options = asyncio.run(call_plugin(sim_node.paths, 5.0, GPU, None, Request("options")))
    # THEN the socket is the plugin's, and the reply holds the devices and options the plugin serves
    assert listed.socket.startswith(sim_node.paths.plugins_dir) and listed.resource == GPU
    assert listed.reply["devices"] and all(d.id and d.health for d in listed.reply["devices"])
    assert options.socket == listed.socket
    assert isinstance(options.reply.get_preferred_allocation_available, bool)
    assert listed.latency_ms >= 0


def test_a_name_almost_served_is_an_unknown_resource_with_a_guess(sim_node: SimHandle) -> None:
    # WHEN the use-case is asked for a resource no plugin serves, one letter off a served one
    with pytest.raises(UnknownResource) as caught:
        asyncio.run(call_plugin(sim_node.paths, 5.0, GPU + "s", None, Request("list")))
    # THEN the typed failure says so and guesses the served name
    assert f"did you mean {GPU}?" in str(caught.value)


def test_a_missing_socket_is_an_rpc_failure_that_counts_as_unreachable(tmp_path: Path) -> None:
    # WHEN the socket named does not exist
    with pytest.raises(RpcFailure) as caught:
        asyncio.run(call_plugin(_no_node(tmp_path), 2.0, None, str(tmp_path / "no.sock"), Request("list")))
    # THEN it is a failure with no gRPC status: the plugin was not reached (exit 3 for the CLI)
    assert "no such socket" in caught.value.message and unreachable(caught.value)


def test_an_unknown_driver_is_named_with_the_registered_ones(sim_node: SimHandle) -> None:
    # WHEN the use-case is asked for a driver name that is nobody's
    with pytest.raises(UnknownDriver) as caught:
        asyncio.run(call_driver(sim_node.paths, 5.0, "nobody.example.com", DraRequest("info")))
    # THEN the failure lists the registered driver
    assert DRIVER in str(caught.value)


def test_info_reads_the_driver_and_its_endpoint(sim_node: SimHandle) -> None:
    # WHEN the use-case asks the driver who it is
    result = asyncio.run(call_driver(sim_node.paths, 5.0, DRIVER, DraRequest("info")))
    # THEN GetInfo names it, from its registration socket, and its endpoint connects
    assert (result.driver, result.rpc) == (DRIVER, "GetInfo")
    assert result.socket.startswith(f"{sim_node.paths.plugins_registry}/")
    assert result.reply["name"] == DRIVER and result.reply["endpoint_status"] == "serving"
    assert result.request == {}
