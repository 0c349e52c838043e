"""The in-process DRA driver over real sockets: registration, prepare/unprepare, CDI specs, health, control."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import yaml
from helpers import DEVCTL, devctl_env, run_devctl_async

from devctl.api.dra.v1 import api_pb2 as dra_v1
from devctl.api.dra.v1 import api_pb2_grpc as dra_v1_grpc
from devctl.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from devctl.api.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from devctl.api.drahealth.v1alpha1 import api_pb2 as health
from devctl.api.drahealth.v1alpha1 import api_pb2_grpc as health_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
from devctl.model import UNHEALTHY
from devctl.node.rpc import channel

DRIVER = "gpu.example.com"
SPEC = DraSpec(driver=DRIVER, pool="node-a", devices=(DraDevice("gpu-0", (0,)), DraDevice("gpu-1", (1,))))
ALLOCATIONS = {"uid-1": ("gpu-0",), "uid-2": ("node-a/gpu-1",)}


def kubelet_dir(root: Path) -> str:
    return str(root / "var" / "lib" / "kubelet")


@pytest.fixture
async def driver(short_root: Path) -> AsyncIterator[DraDriver]:
    async with DraDriver(
        SPEC, kubelet_dir(short_root), root=str(short_root), allocation=lambda ns, name, uid: ALLOCATIONS.get(uid)
    ) as d:
        yield d


def claim(pb, uid: str, name: str = "c"):
    return pb.Claim(namespace="ml", uid=uid, name=name)


async def test_get_info_says_what_the_kubelet_needs(driver: DraDriver, short_root: Path) -> None:
    # GIVEN a driver served under the node root
    # WHEN the kubelet's watcher asks its registration socket
    assert driver.registration_path == f"{kubelet_dir(short_root)}/plugins_registry/{DRIVER}-reg.sock"
    async with channel(driver.registration_path) as ch:
        info = await reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=5)
    # THEN it is a DRAPlugin with its endpoint as the kubelet sees it on the node, and the labels it speaks
    assert (info.type, info.name) == ("DRAPlugin", DRIVER)
    assert info.endpoint == f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"]


async def test_a_refusal_is_one_clear_line(driver: DraDriver, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "devctl.lab.plugin.dra")
    async with channel(driver.registration_path) as ch:
        await reg_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error="no supported version"), timeout=5
        )
    assert await driver.wait_registered(timeout=5) is False
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line == f"the kubelet refused DRA driver {DRIVER}: no supported version"


async def test_prepare_writes_a_cdi_spec_and_is_idempotent(driver: DraDriver, short_root: Path) -> None:
    spec_path = short_root / "var" / "run" / "cdi" / f"k8s.{DRIVER}-claim_uid-1.yaml"
    async with channel(driver.socket_path) as ch:
        stub = dra_v1_grpc.DRAPluginStub(ch)
        # WHEN a claim is prepared twice
        first = await stub.NodePrepareResources(
            dra_v1.NodePrepareResourcesRequest(claims=[claim(dra_v1, "uid-1")]), timeout=5
        )
        again = await stub.NodePrepareResources(
            dra_v1.NodePrepareResourcesRequest(claims=[claim(dra_v1, "uid-1")]), timeout=5
        )
        # THEN both answers give the same device with its CDI name, and the spec file defines it
        assert first == again
        [dev] = first.claims["uid-1"].devices
        assert (dev.pool_name, dev.device_name, first.claims["uid-1"].error) == ("node-a", "gpu-0", "")
        assert list(dev.cdi_device_ids) == [f"k8s.{DRIVER}/claim=uid-1-gpu-0"]
        spec = yaml.safe_load(spec_path.read_text())
        assert spec["kind"] == f"k8s.{DRIVER}/claim"
        [cdi_dev] = spec["devices"]
        assert cdi_dev["name"] == "uid-1-gpu-0"
        [node] = cdi_dev["containerEdits"]["deviceNodes"]
        assert node["path"] == f"/dev/dra/{DRIVER}/gpu-0" and node["major"] == SPEC.major and node["minor"] == 0
        assert cdi_dev["containerEdits"]["env"] == ["DEVCTL_DRA_DEVICE_GPU_0=node-a/gpu-0"]
        # WHEN it is unprepared, and a claim never prepared is unprepared too
        out = await stub.NodeUnprepareResources(
            dra_v1.NodeUnprepareResourcesRequest(claims=[claim(dra_v1, "uid-1"), claim(dra_v1, "never")]), timeout=5
        )
    # THEN both succeed and the spec file is gone
    assert out.claims["uid-1"].error == "" and out.claims["never"].error == ""
    assert not spec_path.exists() and driver.prepared == {}


async def test_a_claim_without_allocation_is_refused_the_other_prepared(driver: DraDriver) -> None:
    async with channel(driver.socket_path) as ch:
        got = await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
            dra_v1.NodePrepareResourcesRequest(claims=[claim(dra_v1, "unknown", "lost"), claim(dra_v1, "uid-2")]),
            timeout=5,
        )
    assert got.claims["unknown"].error == f"claim ml/lost (unknown): no known allocation for it on driver {DRIVER}"
    assert [d.device_name for d in got.claims["uid-2"].devices] == ["gpu-1"]


async def test_v1beta1_prepares_too_and_a_v1beta1_only_driver_offers_only_it(short_root: Path) -> None:
    spec = DraSpec(driver=DRIVER, pool="p", devices=(DraDevice("gpu-0"),), versions=("v1beta1",), health=False)
    async with DraDriver(spec, kubelet_dir(short_root), root=str(short_root), allocation=lambda *a: ["gpu-0"]) as d:
        async with channel(d.registration_path) as ch:
            info = await reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=5)
        assert list(info.supported_versions) == ["v1beta1.DRAPlugin"]
        async with channel(d.socket_path) as ch:
            got = await dra_v1beta1_grpc.DRAPluginStub(ch).NodePrepareResources(
                dra_v1beta1.NodePrepareResourcesRequest(claims=[claim(dra_v1beta1, "u")]), timeout=5
            )
            assert got.claims["u"].devices[0].device_name == "gpu-0"
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
                    dra_v1.NodePrepareResourcesRequest(), timeout=5
                )
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_health_streams_get_the_full_list_on_open_and_on_every_change(driver: DraDriver) -> None:
    async with channel(driver.socket_path) as a, channel(driver.socket_path) as b:
        streams = [
            health_grpc.DRAResourceHealthStub(ch).NodeWatchResources(health.NodeWatchResourcesRequest())
            for ch in (a, b)
        ]
        for s in streams:
            first = await asyncio.wait_for(s.read(), 5)
            assert [(d.device.pool_name, d.device.device_name, d.health) for d in first.devices] == [
                ("node-a", "gpu-0", health.HEALTHY),
                ("node-a", "gpu-1", health.HEALTHY),
            ]
            assert all(d.health_check_timeout_seconds == 30 and d.last_updated_time > 0 for d in first.devices)
        # WHEN a device turns unhealthy with a reason
        driver.set_health("node-a/gpu-1", UNHEALTHY, "XID 79")
        # THEN every open stream gets the full list with it, within 1 s
        for s in streams:
            msg = await asyncio.wait_for(s.read(), 1)
            assert [(d.device.device_name, d.health, d.message) for d in msg.devices] == [
                ("gpu-0", health.HEALTHY, ""),
                ("gpu-1", health.UNHEALTHY, "XID 79"),
            ]
            s.cancel()


async def test_no_health_leaves_the_service_out(short_root: Path) -> None:
    spec = DraSpec(driver=DRIVER, pool="p", devices=(DraDevice("gpu-0"),), health=False)
    async with DraDriver(spec, kubelet_dir(short_root), root=str(short_root)) as d, channel(d.socket_path) as ch:
        stream = health_grpc.DRAResourceHealthStub(ch).NodeWatchResources(health.NodeWatchResourcesRequest())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await asyncio.wait_for(stream.read(), 5)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_the_cli_driver_is_controlled_from_another_shell_and_cleans_up(short_root: Path, tmp_path: Path) -> None:
    # GIVEN `devctl plugin serve --dra` running with a claims file, and a prepared claim
    claims = tmp_path / "claims.yaml"
    claims.write_text("uid-9: [gpu-1]\n")
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        *("plugin", "serve", "--dra", DRIVER, "--count", "2", "--pool", "node-a", "--claims", str(claims)),
        "--no-register",
        env=devctl_env(short_root),
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 20)).decode()
        assert "serving DRA driver gpu.example.com (2 devices in pool node-a)" in line
        sock = short_root / "var/lib/kubelet/plugins" / DRIVER / "dra.sock"
        async with channel(str(sock)) as ch:
            stream = health_grpc.DRAResourceHealthStub(ch).NodeWatchResources(health.NodeWatchResourcesRequest())
            await asyncio.wait_for(stream.read(), 5)
            got = await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
                dra_v1.NodePrepareResourcesRequest(claims=[claim(dra_v1, "uid-9")]), timeout=5
            )
            assert got.claims["uid-9"].devices[0].device_name == "gpu-1"
            spec_file = short_root / "var" / "run" / "cdi" / f"k8s.{DRIVER}-claim_uid-9.yaml"
            assert spec_file.exists()
            # WHEN another shell marks a device unhealthy
            result = await run_devctl_async(
                "plugin", "set-health", DRIVER, "node-a/gpu-0", "unhealthy", root=short_root
            )
            assert result.exit_code == 0, result.stderr
            # THEN the open stream sees it
            msg = await asyncio.wait_for(stream.read(), 5)
            assert [d.health for d in msg.devices] == [health.UNHEALTHY, health.HEALTHY]
            stream.cancel()
        # and an unknown device is refused with one line
        bad = await run_devctl_async("plugin", "set-health", DRIVER, "node-a/gpu-7", "unhealthy", root=short_root)
        assert bad.exit_code != 0 and "has no device node-a/gpu-7" in bad.stderr
        # WHEN it is stopped with SIGTERM
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        # THEN its sockets and CDI files are gone
        assert not sock.exists() and not spec_file.exists()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_on_a_simulated_node_the_driver_knows_the_recorded_allocations(sim_node) -> None:
    """Without --claims, `plugin serve --dra` on a simulated node takes the claims the simulator allocated."""
    from devctl.lab.sim.scenario_dra import claim_uid

    # GIVEN the default node with its own gpu.example.com driver stopped
    await asyncio.to_thread(sim_node.call, lambda node: node.dra_drivers.pop(DRIVER).stop())
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        *("plugin", "serve", "--dra", DRIVER, "--pool", "sim-node", "--no-register"),
        *("--device", "gpu-0@0", "--device", "gpu-1@0"),
        env=devctl_env(sim_node.root),
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        assert b"serving DRA driver" in await asyncio.wait_for(proc.stderr.readline(), 20)
        sock = sim_node.root / "var/lib/kubelet/plugins" / DRIVER / "dra.sock"
        uid = claim_uid("inference", "embed-gpu")
        async with channel(str(sock)) as ch:
            got = await dra_v1_grpc.DRAPluginStub(ch).NodePrepareResources(
                dra_v1.NodePrepareResourcesRequest(
                    claims=[dra_v1.Claim(namespace="inference", uid=uid, name="embed-gpu"), claim(dra_v1, "other")]
                ),
                timeout=5,
            )
        # THEN the claim the simulator allocated gets its device; another claim is refused for that claim only
        assert [d.device_name for d in got.claims[uid].devices] == ["gpu-0"]
        assert "no known allocation" in got.claims["other"].error
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)


async def test_add_and_remove_from_another_shell_reach_the_health_stream(short_root: Path) -> None:
    from devctl.lab.plugin.control import default_control_dir

    control = default_control_dir(str(short_root))
    async with (
        DraDriver(SPEC, kubelet_dir(short_root), root=str(short_root), register=False, control_dir=control) as d,
        channel(d.socket_path) as ch,
    ):
        stream = health_grpc.DRAResourceHealthStub(ch).NodeWatchResources(health.NodeWatchResourcesRequest())
        await asyncio.wait_for(stream.read(), 5)
        added = await run_devctl_async("plugin", "add", DRIVER, "gpu-2@1", "--health", "unhealthy", root=short_root)
        assert added.exit_code == 0, added.stderr
        msg = await asyncio.wait_for(stream.read(), 5)
        assert [(x.device.device_name, x.health) for x in msg.devices][-1] == ("gpu-2", health.UNHEALTHY)
        assert [x.numa_nodes for x in d.devices if x.name == "gpu-2"] == [(1,)]
        removed = await run_devctl_async("plugin", "remove", DRIVER, "node-a/gpu-0", root=short_root)
        assert removed.exit_code == 0, removed.stderr
        msg = await asyncio.wait_for(stream.read(), 5)
        assert [x.device.device_name for x in msg.devices] == ["gpu-1", "gpu-2"]
        wrong_pool = await run_devctl_async("plugin", "remove", DRIVER, "other/gpu-1", root=short_root)
        assert wrong_pool.exit_code != 0 and f"{DRIVER} serves pool node-a, not 'other'" in wrong_pool.stderr
        stream.cancel()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--dra", DRIVER, "--count", "1", "--resource", "a.com/b"], "--resource belong(s) to a device plugin"),
        (["--resource", "a.com/b", "--count", "1", "--claims", "x"], "--claims go(es) with --dra DRIVER"),
        (["--dra", DRIVER], "give --count N or --device NAME[@NUMA]"),
        (["--dra", DRIVER, "--count", "5000"], "at most 4096 devices"),
        (["--dra", "a/b", "--count", "1"], "a DRA driver name is a DNS name"),
        (["--dra", DRIVER, "--device", "p/gpu-0"], "the pool is --pool"),
    ],
)
def test_bad_dra_flags_are_usage_errors(short_root: Path, args: list[str], words: str) -> None:
    from helpers import invoke

    r = invoke("--root", str(short_root), "plugin", "serve", *args)
    assert r.exit_code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
async def test_a_hang_up_ends_the_dra_driver_and_removes_its_sockets(short_root: Path, sig: int) -> None:
    """SIGHUP (the SSH session dropped) ends `plugin serve --dra` as SIGTERM and Ctrl-C do: its sockets are gone."""
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        *("plugin", "serve", "--dra", DRIVER, "--count", "1", "--no-register"),
        env=devctl_env(short_root),
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    assert b"serving DRA driver" in await asyncio.wait_for(proc.stderr.readline(), 20)
    sock = short_root / "var/lib/kubelet/plugins" / DRIVER / "dra.sock"
    assert sock.is_socket()
    proc.send_signal(sig)
    rest = await asyncio.wait_for(proc.stderr.read(), 20)
    assert await asyncio.wait_for(proc.wait(), 20) == 0, rest
    assert not sock.exists()
    assert b"Traceback" not in rest
