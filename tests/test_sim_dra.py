"""The simulated kubelet's DRA side over real sockets: plugin watcher, DRA manager, checkpoint order, health."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from badservers import hung_server, malformed_plugin

from devctl.api.drahealth.v1alpha1 import api_pb2 as health
from devctl.api.drahealth.v1alpha1 import api_pb2_grpc as health_grpc
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
from devctl.lab.sim.dramanager import DraManager
from devctl.lab.sim.pluginwatcher import PluginWatcher
from devctl.lab.sim.scenario import PodSpec
from devctl.lab.sim.scenario_dra import DraScenario, parse_dra
from devctl.model import HEALTHY, UNHEALTHY
from devctl.node.dra_checkpoint import read_dra_checkpoint, read_dra_raw

DRIVER = "gpu.example.com"
WAIT = 5.0
POD = PodSpec(namespace="ml", name="train", uid="pod-uid-1")
SCENARIO = parse_dra(
    {
        "drivers": [{"name": DRIVER, "pool": "node-a", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}],
        "claims": [
            {"name": "one", "uid": "uid-1", "driver": DRIVER, "devices": ["gpu-0"], "pod": "ml/train"},
            {"name": "two", "uid": "uid-2", "driver": DRIVER, "devices": ["gpu-1"], "pod": "ml/train"},
        ],
    },
    {("ml", "train"): ["main"]},
)


class Kubelet:
    """The DRA manager with its plugin watcher under a node root: the kubelet side, without device plugins."""

    def __init__(self, root: Path, scenario: DraScenario = SCENARIO):
        self.root = root
        self.kubelet_dir = root / "var" / "lib" / "kubelet"
        self.kubelet_dir.mkdir(parents=True, exist_ok=True)
        self.manager = DraManager(str(self.kubelet_dir), str(root), scenario, reopen_interval=0.2)
        self.watcher = PluginWatcher(str(self.kubelet_dir / "plugins_registry"), {"DRAPlugin": self.manager})

    @property
    def registry(self) -> Path:
        return self.kubelet_dir / "plugins_registry"

    async def __aenter__(self) -> Kubelet:
        self.manager.start_fresh()
        await self.watcher.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.watcher.stop()
        await self.manager.close()

    async def registered(self, driver: str = DRIVER) -> None:
        await self.manager.wait_until(lambda: driver in self.manager.drivers, WAIT)


@pytest.fixture
async def kubelet(short_root: Path) -> AsyncIterator[Kubelet]:
    async with Kubelet(short_root) as k:
        yield k


def driver_for(k: Kubelet, spec: DraSpec | None = None, allocation: Any = None) -> DraDriver:
    spec = spec or SCENARIO.drivers[0]
    if allocation is None:

        def allocation(namespace: str, name: str, uid: str) -> Any:
            claim = SCENARIO.claim(uid)
            return claim.devices if claim else None

    return DraDriver(spec, str(k.kubelet_dir), root=str(k.root), allocation=allocation)


class _Info(reg_grpc.RegistrationServicer):
    def __init__(self, info: reg.PluginInfo):
        self.info = info
        self.status: asyncio.Queue[reg.RegistrationStatus] = asyncio.Queue()

    async def GetInfo(self, request: Any, context: Any) -> reg.PluginInfo:
        return self.info

    async def NotifyRegistrationStatus(self, request: Any, context: Any) -> reg.RegistrationStatusResponse:
        self.status.put_nowait(request)
        return reg.RegistrationStatusResponse()


@asynccontextmanager
async def registration(path: Path, info: reg.PluginInfo) -> AsyncIterator[_Info]:
    """A plugin-watcher socket that says whatever ``info`` says, and records the kubelet's verdict."""
    servicer = _Info(info)
    server = grpc.aio.server()
    reg_grpc.add_RegistrationServicer_to_server(servicer, server)
    path.parent.mkdir(parents=True, exist_ok=True)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield servicer
    finally:
        await server.stop(None)


# --- registration ----------------------------------------------------------------------


async def test_a_driver_registers_through_plugins_registry(kubelet: Kubelet) -> None:
    async with driver_for(kubelet) as driver:
        await kubelet.registered()
        assert await driver.wait_registered(WAIT) is True
        conn = kubelet.manager.drivers[DRIVER]
        assert conn.service == "v1.DRAPlugin" and conn.health_service == "v1alpha1.DRAResourceHealth"
        assert conn.endpoint == driver.socket_path


async def test_a_driver_with_no_version_it_speaks_is_refused(
    kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    info = reg.PluginInfo(type="DRAPlugin", name="old.example.com", supported_versions=["v1alpha3.NodeService"])
    async with registration(kubelet.registry / "old-reg.sock", info) as plugin:
        status = await asyncio.wait_for(plugin.status.get(), WAIT)
    assert not status.plugin_registered
    assert "none of the versions offered by DRA driver old.example.com (v1alpha3.NodeService)" in status.error
    assert kubelet.manager.drivers == {}
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"kubelet: refused DRAPlugin old.example.com: {status.error}"
    ]


async def test_the_first_supported_label_in_the_plugins_own_order_wins(kubelet: Kubelet) -> None:
    info = reg.PluginInfo(
        type="DRAPlugin", name="x.example.com", supported_versions=["v9.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAPlugin"]
    )
    async with registration(kubelet.registry / "sub" / "x-reg.sock", info) as plugin:  # found in a subdirectory
        assert (await asyncio.wait_for(plugin.status.get(), WAIT)).plugin_registered
        assert kubelet.manager.drivers["x.example.com"].service == "v1beta1.DRAPlugin"


async def test_a_csi_socket_is_never_handed_to_the_dra_manager(kubelet: Kubelet) -> None:
    info = reg.PluginInfo(type="CSIPlugin", name="csi.example.com", endpoint="/csi.sock", supported_versions=["1.0.0"])
    async with registration(kubelet.registry / "csi-reg.sock", info) as plugin:
        status = await asyncio.wait_for(plugin.status.get(), WAIT)
    assert not status.plugin_registered and "no handler registered for plugin type: CSIPlugin" in status.error
    assert kubelet.manager.drivers == {}


async def test_hung_garbage_and_dot_sockets_do_not_stop_the_watcher(
    kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a registration socket that never answers, one that answers garbage, and a hidden one
    kubelet.registry.mkdir(parents=True, exist_ok=True)
    async with (
        hung_server(str(kubelet.registry / "hung-reg.sock")),
        malformed_plugin(str(kubelet.registry / "garbage-reg.sock")),
        registration(
            kubelet.registry / ".hidden-reg.sock", reg.PluginInfo(type="DRAPlugin", name="hidden.example.com")
        ) as hidden,
        driver_for(kubelet),  # WHEN a real driver comes too
    ):
        # THEN it registers, each bad socket is one warning, and the hidden one is never asked
        await kubelet.registered()
        await asyncio.wait_for(_until(lambda: _warnings(caplog, "GetInfo failed") == 2), WAIT)
        assert hidden.status.empty()
        assert list(kubelet.manager.drivers) == [DRIVER]


def _warnings(caplog: pytest.LogCaptureFixture, words: str) -> int:
    return sum(1 for r in caplog.records if r.levelno == logging.WARNING and words in r.getMessage())


async def _until(predicate: Any) -> None:
    """Poll a condition that only a log line tells (the caller bounds the wait)."""
    for _ in iter(int, 1):
        if predicate():
            return
        await asyncio.sleep(0.02)


# --- prepare ---------------------------------------------------------------------------


async def test_the_checkpoint_is_written_before_prepare(kubelet: Kubelet) -> None:
    # GIVEN a driver that, when asked to prepare, looks at dra_manager_state itself
    seen: list[tuple[str, bool, bool]] = []
    checkpoint = str(kubelet.kubelet_dir / "dra_manager_state")

    def allocation(namespace: str, name: str, uid: str) -> Any:
        cp = read_dra_checkpoint(checkpoint)
        (claim,) = [c for c in cp.claims if c.uid == uid] or [None]
        seen.append((uid, claim is not None and POD.uid in claim.pod_uids, bool(cp.checksum_ok)))
        return SCENARIO.claim(uid).devices  # type: ignore[union-attr]

    async with driver_for(kubelet, allocation=allocation) as driver:
        await kubelet.registered()
        # WHEN the kubelet prepares the pod's claims
        assert await kubelet.manager.prepare_pod(POD) is None
    # THEN at the moment of each prepare the claim with its pod was already in a valid checkpoint
    assert seen == [("uid-1", True, True), ("uid-2", True, True)]
    # and the driver logged a prepare of each claim
    assert [r.rpc for r in driver.rpc_log if r.rpc == "NodePrepareResources"] == ["NodePrepareResources"] * 2
    cp = read_dra_checkpoint(checkpoint)
    assert cp.checksum_ok and {(c.name, tuple(d.device for d in c.devices)) for c in cp.claims} == {
        ("one", ("gpu-0",)),
        ("two", ("gpu-1",)),
    }
    assert cp.claims[0].devices[0].cdi_devices[0].startswith(f"k8s.{DRIVER}/claim=")
    # and pod-resources reports the CDI IDs the driver returned
    (one, two) = sorted(kubelet.manager.dynamic_resources(POD.uid, "main"), key=lambda r: r.claim_name)
    assert one.devices[0].cdi_devices == (f"k8s.{DRIVER}/claim=uid-1-gpu-0",)
    assert (two.claim_name, two.devices[0].device) == ("two", "gpu-1")


async def test_a_prepare_error_for_one_claim_of_two(kubelet: Kubelet, caplog: pytest.LogCaptureFixture) -> None:
    async with driver_for(kubelet, allocation=lambda ns, name, uid: ("gpu-0",) if uid == "uid-1" else None):
        await kubelet.registered()
        error = await kubelet.manager.prepare_pod(POD)
    assert error == f"claim ml/two: claim ml/two (uid-2): no known allocation for it on driver {DRIVER}"
    raw, _, _ = read_dra_raw(str(kubelet.kubelet_dir / "dra_manager_state"))
    devices = {c.name: c.drivers[0][1] for c in raw.claims or ()}
    assert devices["two"] is None  # as the kubelet leaves it: entry written, devices null
    assert [d.device for d in devices["one"] or ()] == ["gpu-0"]
    assert _warnings(caplog, "could not prepare ml/two") == 1


async def test_a_v1beta1_only_driver_is_prepared_through_v1beta1(kubelet: Kubelet) -> None:
    spec = DraSpec(
        driver=DRIVER, pool="node-a", devices=(DraDevice("gpu-0"), DraDevice("gpu-1")), versions=("v1beta1",)
    )
    async with driver_for(kubelet, spec) as driver:
        await kubelet.registered()
        assert kubelet.manager.drivers[DRIVER].service == "v1beta1.DRAPlugin"
        assert await kubelet.manager.prepare_pod(POD) is None
    assert {r.detail.split()[0] for r in driver.rpc_log if r.rpc == "NodePrepareResources"} == {"v1beta1"}


async def test_a_dead_driver_leaves_its_claims_and_the_pod_cannot_finish(kubelet: Kubelet) -> None:
    # GIVEN prepared claims
    async with driver_for(kubelet):
        await kubelet.registered()
        assert await kubelet.manager.prepare_pod(POD) is None
    # WHEN the driver is gone (its registration socket removed) and the pod is deleted
    await kubelet.manager.wait_until(lambda: DRIVER not in kubelet.manager.drivers, WAIT)
    errors = await kubelet.manager.unprepare_pod(POD)
    # THEN unprepare cannot happen: each claim says so and stays in the checkpoint
    assert len(errors) == 2 and all("is not registered; the claim stays" in e for e in errors)
    cp = read_dra_checkpoint(str(kubelet.kubelet_dir / "dra_manager_state"))
    assert {c.name for c in cp.claims} == {"one", "two"}


async def test_unprepare_on_the_last_pod_removes_the_claim_and_its_cdi_file(kubelet: Kubelet) -> None:
    async with driver_for(kubelet) as driver:
        await kubelet.registered()
        assert await kubelet.manager.prepare_pod(POD) is None
        spec_file = kubelet.root / "var" / "run" / "cdi" / f"k8s.{DRIVER}-claim_uid-1.yaml"
        assert spec_file.exists()
        assert await kubelet.manager.unprepare_pod(POD) == []
        assert [r.rpc for r in driver.rpc_log].count("NodeUnprepareResources") == 2  # one call, two claims
        assert not spec_file.exists()
    assert read_dra_checkpoint(str(kubelet.kubelet_dir / "dra_manager_state")).claims == ()


# --- health ----------------------------------------------------------------------------


async def test_a_health_flip_reaches_the_cache_within_a_second(kubelet: Kubelet) -> None:
    async with driver_for(kubelet) as driver:
        await kubelet.registered()
        m = kubelet.manager
        await m.wait_until(lambda: m.health_of(DRIVER, "node-a", "gpu-1") == HEALTHY, WAIT)
        start = time.monotonic()
        driver.set_health("gpu-1", UNHEALTHY, "XID 79")
        await m.wait_until(lambda: m.health_of(DRIVER, "node-a", "gpu-1") == UNHEALTHY, 1.0)
        assert time.monotonic() - start < 1.0
        assert m.health[DRIVER]["node-a/gpu-1"].message == "XID 79"
        state = json.loads((kubelet.kubelet_dir / "dra_health_state").read_text())
        entry = state[DRIVER]["Devices"]["node-a/gpu-1"]
        assert (entry["Health"], entry["HealthCheckTimeout"]) == ("Unhealthy", 30 * 10**9)
    # WHEN the driver stops, its stream ends: its health is cleared
    await m.wait_until(lambda: DRIVER not in m.health, WAIT)


class _Silent(health_grpc.DRAResourceHealthServicer):
    """One list (a healthy device and a device the driver never listed), then nothing: a stuck health check."""

    async def NodeWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield health.NodeWatchResourcesResponse(
            devices=[
                health.DeviceHealth(
                    device=health.DeviceIdentifier(pool_name="node-a", device_name=name),
                    health=health.HEALTHY,
                    last_updated_time=int(time.time()),
                    health_check_timeout_seconds=1,
                )
                for name in ("gpu-0", "ghost")
            ]
        )
        await asyncio.Event().wait()


async def test_a_silent_stream_goes_unknown_after_the_timeout(
    kubelet: Kubelet, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a driver whose registration socket and endpoint are one server, and whose health stream goes silent
    sock = kubelet.root / "silent.sock"
    kubelet.registry.mkdir(parents=True, exist_ok=True)
    server = grpc.aio.server()
    health_grpc.add_DRAResourceHealthServicer_to_server(_Silent(), server)
    info = reg.PluginInfo(
        type="DRAPlugin",
        name=DRIVER,
        endpoint="/silent.sock",
        supported_versions=["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"],
    )
    reg_grpc.add_RegistrationServicer_to_server(_Info(info), server)
    server.add_insecure_port(f"unix:{sock}")
    server.add_insecure_port(f"unix:{kubelet.registry / 'silent-reg.sock'}")
    await server.start()
    try:
        m = kubelet.manager
        await m.wait_until(lambda: m.health_of(DRIVER, "node-a", "gpu-0") == HEALTHY, WAIT)
        assert _warnings(caplog, "sent health for node-a/ghost, a device it never listed") == 1
        # THEN with nothing more sent, the device is Unknown once its 1 s timeout passed
        await asyncio.sleep(1.2)
        assert m.health_of(DRIVER, "node-a", "gpu-0") == "Unknown"
        assert DRIVER in m.health  # the stream is still open: stale, not cleared
    finally:
        await server.stop(None)


# --- the default node, as a user checks it -----------------------------------------------


def test_done_when_the_default_sim_shows_each_claim_with_its_cdi_names() -> None:
    """`devctl sim -- devctl pods -o json`: each DRA claim with driver, pool, device and CDI names."""
    from helpers import run_devctl

    script = (
        'devctl pods -o json > "$DEVCTL_ROOT/pods.json"; '
        'ls "$DEVCTL_ROOT/var/lib/kubelet/plugins_registry" "$DEVCTL_ROOT/var/run/cdi"; '
        'cat "$DEVCTL_ROOT/var/lib/kubelet/dra_manager_state" > "$DEVCTL_ROOT/state"; '
        'python3 -c "import json,sys,zlib; d=json.load(open(sys.argv[1])); '
        "print('verifies' if zlib.crc32(d['Data'].encode()) == d['Checksum'] else 'corrupt'); "
        'print(json.dumps(json.load(open(sys.argv[2]))))" "$DEVCTL_ROOT/state" "$DEVCTL_ROOT/pods.json"'
    )
    result = run_devctl("sim", "--", "sh", "-c", script)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "gpu.example.com-reg.sock" in lines and "verifies" in lines
    specs = [line for line in lines if line.startswith("k8s.gpu.example.com-claim_")]
    assert len(specs) == 2
    pods = json.loads(lines[-1])["pods"]
    claims = {
        (p["namespace"], p["name"], r["claim_name"]): r["devices"]
        for p in pods
        for c in p["containers"]
        for r in c["dynamic_resources"]
    }
    assert sorted(claims) == [("inference", "embed-0", "embed-gpu"), ("ml", "train-1", "train-1-gpus")]
    devices = claims[("ml", "train-1", "train-1-gpus")]
    assert [(d["driver"], d["pool"], d["device"]) for d in devices] == [
        ("gpu.example.com", "sim-node", "gpu-2"),
        ("gpu.example.com", "sim-node", "gpu-3"),
    ]
    for d in devices:
        (name,) = d["cdi_devices"]
        kind, _, device_name = name.partition("=")
        assert kind == "k8s.gpu.example.com/claim" and device_name.endswith(f"-{d['device']}")
        uid = device_name.removesuffix(f"-{d['device']}")
        assert f"k8s.gpu.example.com-claim_{uid}.yaml" in specs
