"""``devctl doctor``'s DRA and CDI findings, each planted for real on the simulated node.

The default node already has one: gpu-3 of gpu.example.com is unhealthy under
the running ml/train-1 (docs/dra.md). To it the test adds a claim of a driver
that is not running (its pods could never terminate), a claim whose pod is gone,
a lost CDI spec (as a reboot empties /var/run/cdi), an invalid spec and two
specs defining one device at the same priority.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from helpers import add_dra_claims, devctl

from devctl.analyze.doctor import diagnose
from devctl.model import (
    DraCheckpoint,
    DraDeviceHealth,
    DraEndpoint,
    ErrorKind,
    NodeSnapshot,
    PluginProbe,
    PluginStatus,
    RegistryInfo,
    SourceError,
)
from devctl.node.paths import resolve_paths

DRIVER = "gpu.example.com"


def _claim(uid: str, name: str, driver: str, device: str) -> dict:
    return {
        "ClaimUID": uid,
        "ClaimName": name,
        "Namespace": "ml",
        "PodUIDs": {f"pod-of-{uid}": {}},
        "DriverState": {driver: {"Devices": [{"PoolName": "p", "DeviceName": device, "RequestNames": None}]}},
    }


def test_each_planted_dra_and_cdi_problem_is_found(sim_node) -> None:
    root = Path(sim_node.root)
    # GIVEN a dead driver holding a claim, a stale claim, a lost spec, a bad spec and a conflict
    add_dra_claims(
        Path(sim_node.paths.kubelet_dir) / "dra_manager_state",
        [_claim("u-dead", "held-by-dead", "dead.example.com", "d0"), _claim("u-stale", "gone", DRIVER, "gpu-1")],
    )
    embed = json.loads(devctl(root, "claims", "-o", "json", "embed-gpu").stdout)["claims"][0]
    lost = root / "var/run/cdi" / f"k8s.{DRIVER}-claim_{embed['uid']}.yaml"
    lost.unlink()
    etc = root / "etc/cdi"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "broken.yaml").write_text("cdiVersion: [\n")
    for n in (1, 2):
        (etc / f"dup{n}.yaml").write_text(
            "cdiVersion: 0.6.0\nkind: v.example/x\ndevices: [{name: a, containerEdits: {env: [A=1]}}]\n"
        )
    # WHEN the doctor looks (at the names in use, and at the conflicting one through devctl cdi)
    r = devctl(root, "doctor", "-o", "json")
    found = {(f["severity"], f["code"], f["subject"]): f for f in r.json["findings"]}
    # THEN each is one finding with a hint, and the exit code says there are errors
    assert r.exit_code == 1
    dead = found[("error", "dra-driver-missing", "dead.example.com")]
    assert "ml/held-by-dead" in dead["message"] and "cannot terminate" in dead["hint"]
    assert ("warning", "dra-claim-stale", "ml/gone") in found
    lost_name = embed["devices"][0]["cdi_devices"][0]
    assert found[("error", "cdi-unresolvable", lost_name)]["message"].startswith("in use by inference/embed-gpu")
    assert ("error", "dra-device-unhealthy-in-use", f"{DRIVER}/sim-node/gpu-3") in found
    assert ("warning", "cdi-spec-invalid", str(etc / "broken.yaml")) in found
    assert all(f["hint"] for f in r.json["findings"])
    # The conflict is said by devctl cdi for the name asked (no container uses it, so no doctor finding).
    cdi = devctl(root, "cdi", "-o", "json", "v.example/x=a").json
    assert cdi["names"][0]["status"] == "conflict"
    # AND claims shows the states
    states = {c["name"]: c["state"] for c in devctl(root, "claims", "-o", "json").json["claims"]}
    assert states == {
        "embed-gpu": "prepared",
        "train-1-gpus": "prepared",
        "held-by-dead": "driver-missing",
        "gone": "stale",
    }


async def test_a_dead_endpoint_is_the_evidence_of_its_driver_s_finding(short_root: Path) -> None:
    """The endpoint's error is tied to its driver by the driver's name, whatever its path says."""
    import grpc
    from helpers import run_devctl_async

    from devctl.api.pluginregistration.v1 import api_pb2 as reg
    from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc

    kubelet = short_root / "var" / "lib" / "kubelet"
    (kubelet / "device-plugins").mkdir(parents=True)
    (kubelet / "plugins_registry").mkdir()
    data = json.dumps(
        {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": None}
    )
    (kubelet / "dra_manager_state").write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}))
    add_dra_claims(kubelet / "dra_manager_state", [_claim("u-1", "held", "dead.example.com", "d0")])

    class Info(reg_grpc.RegistrationServicer):
        async def GetInfo(self, request, context):
            # GIVEN a registered driver whose endpoint (in a dir not named after it) is gone
            return reg.PluginInfo(
                type="DRAPlugin",
                name="dead.example.com",
                endpoint="/var/lib/kubelet/plugins/vendor-x/dra.sock",
                supported_versions=["v1.DRAPlugin"],
            )

    server = grpc.aio.server()
    reg_grpc.add_RegistrationServicer_to_server(Info(), server)
    server.add_insecure_port(f"unix:{kubelet / 'plugins_registry' / 'x-reg.sock'}")
    await server.start()
    try:
        r = await run_devctl_async("--timeout", "2", "doctor", "-o", "json", root=short_root)
    finally:
        await server.stop(None)
    # THEN the driver's finding carries the endpoint's own failure, and that error is not reported again
    found = {(f["code"], f["subject"]): f for f in r.json["findings"]}
    missing = found[("dra-driver-missing", "dead.example.com")]
    assert "vendor-x/dra.sock: no such socket" in missing["message"] and "ml/held" in missing["message"]
    assert not [f for f in r.json["findings"] if f["code"] == "source-unreadable" and "vendor-x" in f["message"]]


def test_the_default_node_has_no_other_dra_or_cdi_finding(sim_node) -> None:
    r = devctl(sim_node.root, "doctor", "-o", "json")
    dra = [(f["code"], f["subject"]) for f in r.json["findings"] if f["code"].startswith(("dra-", "cdi-", "registry-"))]
    assert dra == [("dra-device-unhealthy-in-use", f"{DRIVER}/sim-node/gpu-3")]


# --- the findings no simulated node makes on cue, on snapshots -----------------------------------------

ROOT = "/r"
PATHS = resolve_paths(root=ROOT, env={})
REG = f"{PATHS.plugins_registry}/drv-reg.sock"


def _node(**kw) -> NodeSnapshot:
    return NodeSnapshot(taken_at="2026-01-01T00:00:00.000Z", paths=PATHS, pods=(), **kw)


def _driver(versions=("v1.DRAPlugin", "v1alpha1.DRAResourceHealth"), health=()) -> PluginProbe:
    info = RegistryInfo("DRAPlugin", "drv.example.com", "/var/lib/kubelet/plugins/drv/dra.sock", tuple(versions))
    dra = DraEndpoint(path="/r/x", status=PluginStatus.SERVING, health_stream=True, health=tuple(health), read_at=1000)
    return PluginProbe(REG, PluginStatus.SERVING, "drv.example.com", registry=info, dra=dra)


def _codes(node: NodeSnapshot) -> set[tuple[str, str, str]]:
    return {(f.severity, f.code, f.subject) for f in diagnose(node)}


def test_health_older_than_its_timeout_is_stale() -> None:
    old = DraDeviceHealth("p", "d0", "Healthy", last_updated=900, timeout_seconds=30)
    fresh = DraDeviceHealth("p", "d1", "Healthy", last_updated=990, timeout_seconds=30)
    found = diagnose(_node(plugins=(_driver(health=(old, fresh)),)))
    (stale,) = [f for f in found if f.code == "dra-health-stale"]
    assert (stale.severity, stale.subject) == ("warning", "drv.example.com") and "p/d0" in stale.message
    assert "p/d1" not in stale.message and stale.hint


def test_a_driver_offering_no_dra_service_a_kubelet_speaks() -> None:
    assert ("error", "dra-no-supported-version", "drv.example.com") in _codes(
        _node(plugins=(_driver(versions=("v9.DRAPlugin",)),))
    )
    assert not any(c[1] == "dra-no-supported-version" for c in _codes(_node(plugins=(_driver(),))))


def test_a_stale_registry_socket() -> None:
    probe = PluginProbe(f"{PATHS.plugins_registry}/old-reg.sock", PluginStatus.STALE, error="stale socket")
    # As collect gives it: the probe's failure in the errors too, its socket the subject; doctor says it once.
    errors = (SourceError("registry", "stale socket", ErrorKind.STALE, probe.socket),)
    found = diagnose(_node(plugins=(probe,), errors=errors))
    assert [(f.severity, f.code) for f in found if "stale socket" in f.message or f.subject == probe.socket] == [
        ("warning", "registry-socket-stale")
    ]
    # The same stale socket listed in the device-plugins dir is a plugin's, not a registration's.
    plugin = PluginProbe(f"{PATHS.plugins_dir}/old.sock", PluginStatus.STALE, error="stale socket")
    errors = (SourceError("plugin", "stale socket", ErrorKind.STALE, plugin.socket),)
    assert not any(c[1] == "registry-socket-stale" for c in _codes(_node(plugins=(plugin,), errors=errors)))


def test_a_corrupt_and_a_legacy_dra_checkpoint() -> None:
    bad = DraCheckpoint(PATHS.dra_checkpoint, "v1", False, 1, 2)
    assert ("error", "dra-checkpoint-corrupt", PATHS.dra_checkpoint) in _codes(_node(dra_checkpoint=bad))
    unreadable = SourceError("dra-checkpoint", f"{PATHS.dra_checkpoint}: not JSON", ErrorKind.MALFORMED)
    found = diagnose(_node(errors=(unreadable,)))
    assert [(f.code, f.subject) for f in found if f.code.startswith("dra-")] == [
        ("dra-checkpoint-corrupt", PATHS.dra_checkpoint)
    ]
    assert not any(f.code == "source-unreadable" and f.subject == "dra-checkpoint" for f in found)
    legacy = DraCheckpoint(PATHS.dra_checkpoint, "legacy", None, 1, None)
    assert ("info", "dra-checkpoint-legacy", PATHS.dra_checkpoint) in _codes(_node(dra_checkpoint=legacy))
