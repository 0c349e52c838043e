"""``devctl call --dra DRIVER`` as a person runs it, against the simulated node's real DRA driver.

The driver's own ``rpc_log`` says which RPCs really reached it: a read
(``info``, ``health``) and a refused ``prepare`` never prepare, unprepare or
notify; ``--yes`` does exactly the one call asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from helpers import devctl

from devctl.lab.plugin.cdi import claim_spec_path
from devctl.lab.plugin.dra import DraDevice, DraDriver, DraSpec
from devctl.lab.sim.thread import SimHandle

DRIVER = "gpu.example.com"
CHANGES_STATE = {"NodePrepareResources", "NodeUnprepareResources", "NotifyRegistrationStatus"}


def driver_rpcs(sim: SimHandle) -> list[tuple[str, str]]:
    """The RPCs the simulated node's DRA driver served so far: (rpc, detail), oldest first."""

    async def read(node):
        return [(r.rpc, r.detail) for r in node.dra_drivers[DRIVER].rpc_log]

    return sim.call(read)


def claim_uid(sim: SimHandle, namespace: str, name: str) -> str:
    r = devctl(sim.root, "claims", "-o", "json")
    [claim] = [c for c in r.json["claims"] if (c["namespace"], c["name"]) == (namespace, name)]
    return claim["uid"]


def test_info_and_health_read_and_never_change_the_driver(sim_node: SimHandle) -> None:
    before = len(driver_rpcs(sim_node))
    # WHEN a person asks the driver who it is, and for its health
    info = devctl(sim_node.root, "call", "--dra", DRIVER, "info", "-o", "json")
    health = devctl(sim_node.root, "call", "--dra", DRIVER, "health", "-o", "json")
    # THEN GetInfo names the driver and its endpoint, resolved under the root, which connects
    assert info.exit_code == 0, info.stderr
    doc = info.json
    assert (doc["kind"], doc["resource"], doc["rpc"]) == ("dra", DRIVER, "GetInfo")
    assert doc["socket"].startswith(f"{sim_node.paths.plugins_registry}/")
    endpoint = f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
    assert doc["reply"]["endpoint"] == endpoint
    assert doc["reply"]["endpoint_path"] == f"{sim_node.root}{endpoint}"
    assert doc["reply"]["endpoint_status"] == "serving" and doc["reply"]["endpoint_error"] is None
    assert "v1.DRAPlugin" in doc["reply"]["supported_versions"]
    # AND the health stream's first message lists every device with its health
    assert health.exit_code == 0, health.stderr
    assert health.json["socket"] == f"{sim_node.root}{endpoint}"
    devices = {f"{d['pool']}/{d['device']}": d["health"] for d in health.json["reply"]["devices"]}
    assert devices == {
        "sim-node/gpu-0": "Healthy",
        "sim-node/gpu-1": "Healthy",
        "sim-node/gpu-2": "Healthy",
        "sim-node/gpu-3": "Unhealthy",
    }
    # AND the driver saw GetInfo and a health stream, nothing that changes the node
    calls = {rpc for rpc, _ in driver_rpcs(sim_node)[before:]}
    assert "GetInfo" in calls and "NodeWatchResources" in calls
    assert not calls & CHANGES_STATE


def test_tables_and_yaml(sim_node: SimHandle) -> None:
    table = devctl(sim_node.root, "call", "--dra", DRIVER, "health")
    assert table.exit_code == 0 and table.stderr == ""
    rows = [line.split()[:2] for line in table.stdout.splitlines()]
    assert rows[0] == ["DEVICE", "HEALTH"] and ["sim-node/gpu-3", "Unhealthy"] in rows
    info = devctl(sim_node.root, "call", "--dra", DRIVER, "info")
    assert ["endpoint", "status", "serving"] in [line.split() for line in info.stdout.splitlines()]
    as_yaml = yaml.safe_load(devctl(sim_node.root, "call", "--dra", DRIVER, "info", "-o", "yaml").stdout)
    assert as_yaml["reply"]["name"] == DRIVER


@pytest.mark.parametrize("rpc", ["prepare", "unprepare"])
def test_prepare_and_unprepare_refuse_without_yes_and_call_nothing(sim_node: SimHandle, rpc: str) -> None:
    before = len(driver_rpcs(sim_node))
    r = devctl(sim_node.root, "call", "--dra", DRIVER, rpc, "ml/train-1-gpus")
    assert r.exit_code == 2 and r.stdout == ""
    assert "changes node state" in r.stderr and "add --yes" in r.stderr
    assert driver_rpcs(sim_node)[before:] == []  # not even GetInfo: refused before any socket


def test_unprepare_then_prepare_with_yes(sim_node: SimHandle) -> None:
    uid = claim_uid(sim_node, "ml", "train-1-gpus")
    spec = Path(claim_spec_path(str(sim_node.root), DRIVER, uid))
    assert spec.exists()
    # WHEN the claim is unprepared with --yes (its UID read from dra_manager_state)
    out = devctl(sim_node.root, "call", "--dra", DRIVER, "unprepare", "ml/train-1-gpus", "--yes", "-o", "json")
    # THEN the driver tore it down: its CDI spec is gone
    assert out.exit_code == 0, out.stderr
    assert out.json["request"] == {"claims": [{"namespace": "ml", "name": "train-1-gpus", "uid": uid}]}
    assert out.json["reply"]["claims"] == {uid: {"error": None}}
    assert not spec.exists()
    # WHEN it is prepared again, named by --claim and --uid
    again = devctl(
        sim_node.root,
        "call",
        "--dra",
        DRIVER,
        "prepare",
        "--claim",
        "ml/train-1-gpus",
        "--uid",
        uid,
        "--yes",
        "-o",
        "json",
    )
    assert again.exit_code == 0, again.stderr
    devices = again.json["reply"]["claims"][uid]["devices"]
    assert [(d["pool"], d["device"]) for d in devices] == [("sim-node", "gpu-2"), ("sim-node", "gpu-3")]
    assert all(d["cdi_devices"] and d["driver"] == DRIVER for d in devices)
    assert spec.exists()
    # AND the driver got exactly those two calls, each for that claim
    changes = [(rpc, detail) for rpc, detail in driver_rpcs(sim_node) if rpc in CHANGES_STATE]
    assert [rpc for rpc, _ in changes[-2:]] == ["NodeUnprepareResources", "NodePrepareResources"]
    assert all(uid in detail for _, detail in changes[-2:])


def test_a_refused_claim_is_exit_1_with_the_driver_s_error(sim_node: SimHandle) -> None:
    r = devctl(sim_node.root, "call", "--dra", DRIVER, "prepare", "ml/unknown", "--uid", "no-such-uid", "--yes")
    assert r.exit_code == 1
    assert "no known allocation" in r.stderr and "no-such-uid" in r.stderr


def test_unknown_driver_and_claim_say_what_they_likely_mean(sim_node: SimHandle) -> None:
    r = devctl(sim_node.root, "call", "--dra", "gpu.exmaple.com", "info")
    assert r.exit_code == 1 and r.stdout == ""
    assert "DRA driver gpu.exmaple.com not found (did you mean gpu.example.com?)" in r.stderr
    c = devctl(sim_node.root, "call", "--dra", DRIVER, "unprepare", "ml/train-1-gpu", "--yes")
    assert c.exit_code == 1
    assert "claim ml/train-1-gpu not found (did you mean ml/train-1-gpus?)" in c.stderr and "--uid" in c.stderr


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("info", "ml/x"), "info takes no claim"),
        (("bogus",), "unknown DRA RPC 'bogus'"),
        (("prepare", "--yes"), "prepare needs a claim"),
        (("prepare", "nonamespace", "--yes"), "NAMESPACE/NAME"),
        (("info", "--socket", "x.sock"), "--dra calls a DRA driver"),
    ],
)
def test_usage_errors_are_exit_2(sim_node: SimHandle, argv: tuple[str, ...], words: str) -> None:
    r = devctl(sim_node.root, "call", "--dra", DRIVER, *argv)
    assert r.exit_code == 2 and words in r.stderr


async def test_a_driver_without_health_or_endpoint_is_one_line(short_root: Path) -> None:
    kubelet = short_root / "var" / "lib" / "kubelet"
    spec = DraSpec(driver="nohealth.example.com", pool="p", devices=(DraDevice("d0"),), health=False)
    async with DraDriver(spec, str(kubelet), root=str(short_root)) as d:
        from helpers import run_devctl_async

        health = await run_devctl_async("--timeout", "2", "call", "--dra", spec.driver, "health", root=short_root)
        assert health.exit_code == 1 and "offers no health service" in health.stderr
        os.unlink(d.socket_path)  # the endpoint is gone; the registration still answers
        info = await run_devctl_async("--timeout", "2", "call", "--dra", spec.driver, "info", root=short_root)
        assert info.exit_code == 0, info.stderr
        assert "no such socket" in info.stdout
        prep = await run_devctl_async(
            "--timeout", "2", "call", "--dra", spec.driver, "prepare", "a/b", "--uid", "u", "--yes", root=short_root
        )
        assert prep.exit_code == 3 and "no such socket" in prep.stderr and "Traceback" not in prep.stderr
