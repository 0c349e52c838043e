"""A plugin whose device list is above the 4 MiB the kubelet reads: every command says so in one line.

The kubelet dials device plugins with grpc-go's default receive limit, so such
a plugin's devices never reach the node's capacity; devctl reads plugins with
the same limit (``devctl.node.rpc.KUBELET_RECEIVE_BYTES``) and names the
failure ``too-large``, not the pod-resources rate limit that gRPC's status code
(RESOURCE_EXHAUSTED) would suggest. The plugin is real (tests/badservers.py),
registered with the simulated kubelet, which fails to read it too.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from badservers import DEFAULT_RECEIVE_LIMIT, huge_pod_resources, too_large_list, too_large_plugin
from helpers import BOUND, devctl
from test_watch_cli import Watch

from devctl.lab.sim.thread import SimHandle
from devctl.model import ErrorKind, PluginOptions, PluginStatus
from devctl.node.deviceplugin import DevicePluginClient, register
from devctl.node.podresources import PodResourcesClient
from devctl.node.rpc import KUBELET_RECEIVE_BYTES, RpcFailure

BIG = "example.com/big"
GPU = "nvidia.com/gpu"
OTHERS = {GPU, "intel.com/sriov_netdevice", "hardware-vendor.example/foo"}
TOO_LARGE = (
    "ListAndWatch: a device list of 4.4 MiB, above the 4 MiB the kubelet reads (gRPC's default): "
    "the kubelet cannot read it either"
)


def test_the_list_is_above_the_limit_the_kubelet_reads() -> None:
    assert KUBELET_RECEIVE_BYTES == DEFAULT_RECEIVE_LIMIT
    assert DEFAULT_RECEIVE_LIMIT < len(too_large_list()) < 4.5 * 2**20


async def test_the_client_names_the_failure_too_large_and_reads_a_list_just_below(short_root) -> None:
    sock = f"{short_root}/big.sock"
    async with too_large_plugin(sock), DevicePluginClient(sock, BOUND) as client:
        with pytest.raises(RpcFailure) as first:
            await client.first_list()
        with pytest.raises(RpcFailure) as stream:
            async for _ in client.list_and_watch():
                pass
    for failed in (first.value, stream.value):
        assert failed.message == f"{sock} {TOO_LARGE}"
        assert (failed.kind, failed.status) == (ErrorKind.TOO_LARGE, PluginStatus.UNREACHABLE)
    # 180,000 devices: 3.9 MiB, which the kubelet reads, and so does devctl.
    async with too_large_plugin(sock, devices=180_000), DevicePluginClient(sock, BOUND) as client:
        assert len(await client.first_list()) == 180_000


async def test_pod_resources_is_still_read_above_4_mib(short_root) -> None:
    sock = f"{short_root}/pr.sock"
    async with huge_pod_resources(sock), PodResourcesClient(sock, BOUND) as client:
        assert len(await client.list()) == 5000


@pytest.fixture
def big_plugin(sim_node: SimHandle, background) -> str:
    """The too-large plugin, serving and registered as ``example.com/big`` with the simulated kubelet."""
    sock = f"{sim_node.paths.plugins_dir}/big.sock"

    @asynccontextmanager
    async def serving() -> AsyncIterator[None]:
        async with too_large_plugin(sock):
            await register(sim_node.paths.kubelet_socket, "big.sock", BIG, PluginOptions(), timeout=BOUND)
            yield

    background(serving())
    return sock


def test_ls_devices_and_plugins_say_it_in_one_line_and_show_the_other_plugins(
    sim_node: SimHandle, big_plugin: str
) -> None:
    line = f"{big_plugin} {TOO_LARGE}"
    ls = devctl(sim_node.root, "ls", "-o", "json", timeout=BOUND)
    assert ls.exit_code == 0  # as for any plugin that cannot be read: a warning, the rest shown
    assert {r["name"] for r in ls.json["resources"]} >= OTHERS
    assert {"source": "plugin", "message": line, "kind": "too-large"} in [
        {k: e[k] for k in ("source", "message", "kind")} for e in ls.json["errors"]
    ]
    for command in ("ls", "devices", "plugins"):
        r = devctl(sim_node.root, command, timeout=BOUND)
        assert r.exit_code == 0, (command, r.stderr)
        assert f"warning: plugin: {line}" in r.stderr.splitlines(), (command, r.stderr)
        assert GPU in r.stdout
    plugins = {p["socket"]: p for p in devctl(sim_node.root, "plugins", "-o", "json", timeout=BOUND).json["plugins"]}
    big = plugins[big_plugin]
    assert (big["status"], big["devices"], big["error"], big["error_kind"]) == ("unreachable", None, line, "too-large")


def test_doctor_finds_plugin_list_too_large(sim_node: SimHandle, big_plugin: str) -> None:
    r = devctl(sim_node.root, "doctor", "-o", "json", timeout=BOUND)
    assert r.exit_code == 1
    found = [f for f in r.json["findings"] if f["subject"] == big_plugin]
    assert [(f["severity"], f["code"]) for f in found] == [("error", "plugin-list-too-large")]
    assert found[0]["message"].startswith(f"{big_plugin} {TOO_LARGE}")
    assert "none of these devices become allocatable" in found[0]["hint"]
    assert not any(f["code"] == "plugin-unreachable" for f in r.json["findings"])


def test_watch_says_it_and_watches_the_other_plugins(sim_node: SimHandle, big_plugin: str) -> None:
    w = Watch(sim_node.root, "watch", "-o", "json")
    try:
        # The simulated node has five sources besides the big plugin; their first snapshots come in any order.
        snapshots: set[str] = set()
        while not snapshots >= OTHERS:
            snapshots.add(w.until("snapshot")[1]["resource"])
        assert BIG not in snapshots
        sim_node.set_health(GPU, "GPU-7", "Unhealthy")
        _, flip = w.until("health")
        assert (flip["resource"], flip["device"]) == (GPU, "GPU-7")
        deadline = time.monotonic() + BOUND
        while not any(TOO_LARGE in line for line in w.err):
            assert time.monotonic() < deadline, w.err
            time.sleep(0.05)
        assert f"devctl: {big_plugin} {TOO_LARGE}; retrying" in w.err, w.err  # the socket named once
    finally:
        w.proc.send_signal(signal.SIGTERM)
        w.proc.wait(BOUND)


@pytest.fixture
def kubelet_log() -> Iterator[list[str]]:
    """What the simulated kubelet logs from now on, caught on its own logger.

    Not caplog: its records are kept per test phase, and the refusal can come in setup or in the call; a
    CI run once saw none of them in either (a thread's record between phases, or the root logger's level).
    """
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("devctl.lab.sim.kubelet")
    handler, level = Keep(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_simulated_kubelet_cannot_read_it_either(
    kubelet_log: list[str], sim_node: SimHandle, big_plugin: str
) -> None:
    # It dials plugins as the real one does (grpc-go's default): its stream fails on the first list,
    # which may come while the fixtures are still being set up.
    deadline = time.monotonic() + BOUND
    while not any(TOO_LARGE in m for m in kubelet_log):
        assert time.monotonic() < deadline, kubelet_log
        time.sleep(0.05)

    async def state(node):
        return node.device_manager.resource(BIG)

    big = sim_node.call(state)
    assert big is not None and big.devices == () and not big.connected
    assert BIG not in {r["name"] for r in devctl(sim_node.root, "ls", "-o", "json", timeout=BOUND).json["resources"]}
