"""DRA and CDI as collect reads them: drivers asked and probed (never prepared), dra_manager_state, CDI specs.

Every server is real, on a unix socket under the node root: the in-process DRA
driver (whose RPC log records every call it gets), misbehaving registration
sockets, and files written as the kubelet and the runtime would.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import zlib
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from badservers import hung_server, malformed_plugin, stale_socket
from helpers import run_devctl_async

from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.core.collect import collect
from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
from devctl.model import CDI, DRA_CHECKPOINT, PLUGINS, ErrorKind, PluginStatus
from devctl.node.paths import resolve_paths

DRIVER = "gpu.example.com"
SPEC = DraSpec(driver=DRIVER, pool="node-a", devices=(DraDevice("gpu-0", (0,)), DraDevice("gpu-1", (1,))))
DEADLINE = 1.0
# Every command that reads the node: none may change a DRA driver's state.
READ_COMMANDS = (
    ("ls",),
    ("devices",),
    ("pods",),
    ("plugins",),
    ("checkpoint",),
    ("topo",),
    ("doctor",),
    ("snapshot",),
    ("claims",),
    ("cdi",),
)
CHANGES_STATE = {"NodePrepareResources", "NodeUnprepareResources", "NotifyRegistrationStatus"}


def kubelet_dir(root: Path) -> Path:
    return root / "var" / "lib" / "kubelet"


def paths(root: Path):
    """The node's paths, with the device-plugins dir every kubelet has (its absence would be an error of its own)."""
    (kubelet_dir(root) / "device-plugins").mkdir(parents=True, exist_ok=True)
    return resolve_paths(root=str(root), env={})


async def test_no_read_command_prepares_unprepares_or_notifies(short_root: Path) -> None:
    # GIVEN a DRA driver that records every RPC it gets, registered under the node root
    async with DraDriver(SPEC, str(kubelet_dir(short_root)), root=str(short_root), allocation=lambda *a: None) as d:
        # WHEN every read command runs against the node
        for argv in READ_COMMANDS:
            result = await run_devctl_async("--timeout", "2", *argv, "-o", "json", root=short_root)
            assert "Traceback" not in result.stderr, argv
        calls = {r.rpc for r in d.rpc_log}
    # THEN the driver was asked who it is and for its health, and nothing that changes the node
    assert "GetInfo" in calls and "NodeWatchResources" in calls
    assert not calls & CHANGES_STATE


async def test_a_dra_driver_is_asked_probed_and_its_health_read(short_root: Path) -> None:
    # GIVEN a DRA driver with one unhealthy device
    async with DraDriver(SPEC, str(kubelet_dir(short_root)), root=str(short_root), allocation=lambda *a: None) as d:
        d.set_health("gpu-1", "Unhealthy", "XID 79")
        # WHEN the node is read
        snap = await asyncio.wait_for(collect(paths(short_root), DEADLINE, want={PLUGINS}), 10)
    # THEN its registration, endpoint and health stream are in the snapshot
    (probe,) = snap.plugins
    assert probe.registry is not None and probe.registry.type == "DRAPlugin" and probe.registry.name == DRIVER
    assert probe.dra is not None and probe.dra.status == PluginStatus.SERVING
    assert probe.dra.path == str(kubelet_dir(short_root) / "plugins" / DRIVER / "dra.sock")
    assert probe.dra.health_stream and probe.dra.health_version == "v1alpha1"
    health = {(h.pool, h.device): (h.health, h.message) for h in probe.dra.health or ()}
    assert health == {("node-a", "gpu-0"): ("Healthy", ""), ("node-a", "gpu-1"): ("Unhealthy", "XID 79")}
    assert snap.errors == ()


class _Info(reg_grpc.RegistrationServicer):
    """A registration socket that says what it is told to (a CSI driver, a DRA driver whose endpoint is gone)."""

    def __init__(self, info: reg.PluginInfo):
        self.info = info

    async def GetInfo(self, request, context):
        return self.info


async def _registration(stack: AsyncExitStack, path: str, info: reg.PluginInfo) -> None:
    server = grpc.aio.server()
    reg_grpc.add_RegistrationServicer_to_server(_Info(info), server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    stack.push_async_callback(server.stop, None)


async def test_bad_registry_sockets_are_one_line_each_and_the_driver_still_shown(short_root: Path) -> None:
    registry = kubelet_dir(short_root) / "plugins_registry"
    registry.mkdir(parents=True, exist_ok=True)
    (registry / "nested").mkdir()
    async with AsyncExitStack() as stack:
        # GIVEN a good DRA driver beside a CSI driver, a stale socket, a hung one, one answering garbage,
        # and a DRA driver whose endpoint does not exist
        await stack.enter_async_context(
            DraDriver(SPEC, str(kubelet_dir(short_root)), root=str(short_root), allocation=lambda *a: None)
        )
        await _registration(stack, str(registry / "csi.sock"), reg.PluginInfo(type="CSIPlugin", name="csi.example.com"))
        gone = reg.PluginInfo(
            type="DRAPlugin",
            name="gone.example.com",
            endpoint="/var/lib/kubelet/plugins/gone.example.com/dra.sock",
            supported_versions=["v1.DRAPlugin"],
        )
        await _registration(stack, str(registry / "nested" / "gone-reg.sock"), gone)
        stale_socket(str(registry / "stale.sock"))
        await stack.enter_async_context(hung_server(str(registry / "hung.sock")))
        await stack.enter_async_context(malformed_plugin(str(registry / "garbage.sock")))
        # WHEN the node is read with a short deadline
        start = time.monotonic()
        snap = await asyncio.wait_for(collect(paths(short_root), DEADLINE, want={PLUGINS}), 10)
        took = time.monotonic() - start
    # THEN it took about one deadline, not one per socket
    assert took < 4 * DEADLINE
    by_name = {os.path.basename(p.socket): p for p in snap.plugins}
    assert by_name[f"{DRIVER}-reg.sock"].dra.status == PluginStatus.SERVING
    assert by_name["csi.sock"].registry.type == "CSIPlugin" and by_name["csi.sock"].dra is None
    assert by_name["gone-reg.sock"].dra.status == PluginStatus.UNREACHABLE
    assert by_name["gone-reg.sock"].dra.error_kind == ErrorKind.MISSING
    assert by_name["stale.sock"].status == PluginStatus.STALE
    assert by_name["hung.sock"].status == PluginStatus.TIMEOUT
    assert by_name["garbage.sock"].error_kind == ErrorKind.WRONG_API
    # AND each bad one is one error line of its own
    assert len(snap.errors) == 4
    assert all("\n" not in e.message for e in snap.errors)


def _dra_state(data: str, checksum: int | None = None) -> str:
    return json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode()) if checksum is None else checksum})


GOOD_DATA = json.dumps(
    {
        "kind": "DRACheckpoint",
        "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
        "ClaimInfoStateList": [
            {
                "ClaimUID": "u1",
                "ClaimName": "c1",
                "Namespace": "ml",
                "PodUIDs": {"p1": {}},
                "DriverState": {DRIVER: {"Devices": [{"PoolName": "a", "DeviceName": "gpu-0"}]}},
                "SomethingNew": 1,
            }
        ],
    }
)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (_dra_state(GOOD_DATA)[:40], ErrorKind.MALFORMED),  # truncated
        ("not json at all", ErrorKind.MALFORMED),
    ],
)
async def test_an_unreadable_dra_checkpoint_is_one_error(short_root: Path, content: str, kind: ErrorKind) -> None:
    kubelet_dir(short_root).mkdir(parents=True, exist_ok=True)
    (kubelet_dir(short_root) / "dra_manager_state").write_text(content)
    snap = await collect(paths(short_root), DEADLINE, want={DRA_CHECKPOINT, CDI})
    (error,) = snap.errors
    assert error.source == DRA_CHECKPOINT and error.kind == kind and "\n" not in error.message
    assert snap.dra_checkpoint is None and snap.cdi is not None


async def test_a_wrong_checksum_is_read_and_flagged_and_unknown_keys_ignored(short_root: Path) -> None:
    kubelet_dir(short_root).mkdir(parents=True, exist_ok=True)
    (kubelet_dir(short_root) / "dra_manager_state").write_text(_dra_state(GOOD_DATA, checksum=1))
    snap = await collect(paths(short_root), DEADLINE, want={DRA_CHECKPOINT})
    assert snap.errors == ()
    assert snap.dra_checkpoint is not None and snap.dra_checkpoint.checksum_ok is False
    (claim,) = snap.dra_checkpoint.claims
    assert (claim.namespace, claim.name, claim.devices[0].device) == ("ml", "c1", "gpu-0")


async def test_no_dra_checkpoint_is_no_error(short_root: Path) -> None:
    snap = await collect(paths(short_root), DEADLINE, want={DRA_CHECKPOINT, CDI})
    assert snap.errors == () and snap.dra_checkpoint is None


GOOD_SPEC = """cdiVersion: 0.6.0
kind: vendor.example/gpu
containerEdits:
  env: [SPEC=1]
devices:
  - name: g0
    containerEdits:
      deviceNodes: [{path: /dev/g0, major: 240, minor: 0}]
"""


async def test_bad_cdi_specs_are_one_line_each_and_good_ones_read(short_root: Path) -> None:
    etc = short_root / "etc" / "cdi"
    run = short_root / "var" / "run" / "cdi"
    etc.mkdir(parents=True)
    run.mkdir(parents=True)
    (etc / "good.yaml").write_text(GOOD_SPEC)
    (etc / "notyaml.yaml").write_text("cdiVersion: [unclosed\n")
    (run / "unknown.json").write_text(
        json.dumps({"cdiVersion": "0.6.0", "kind": "v.example/c", "devices": [{"name": "x"}], "surprise": 1})
    )
    dev = "{name: a, containerEdits: {env: [A=1]}}"
    (run / "dup.yaml").write_text(f"cdiVersion: 0.6.0\nkind: v.example/d\ndevices: [{dev}, {dev}]\n")
    (run / "ignored.txt").write_text("not a spec name")
    snap = await collect(paths(short_root), DEADLINE, want={CDI})
    assert snap.cdi is not None
    assert snap.cdi.dirs == (str(etc), str(run))
    specs = {os.path.basename(s.path): s for s in snap.cdi.specs}
    assert set(specs) == {"good.yaml", "notyaml.yaml", "unknown.json", "dup.yaml"}
    good = specs["good.yaml"]
    assert good.error is None and good.kind == "vendor.example/gpu" and good.priority == 0
    assert good.edits.env == ("SPEC=1",) and good.devices[0].edits.device_nodes[0].major == 240
    assert "not YAML" in specs["notyaml.yaml"].error
    assert "unknown field 'surprise'" in specs["unknown.json"].error
    assert "defined twice" in specs["dup.yaml"].error
    assert sorted(e.source for e in snap.errors) == [CDI, CDI, CDI]
    assert all("\n" not in e.message and e.kind == ErrorKind.MALFORMED for e in snap.errors)
