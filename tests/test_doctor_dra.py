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

from helpers import devctl

DRIVER = "gpu.example.com"


def _add_claims(path: Path, claims: list[dict]) -> None:
    """Add ClaimInfoState entries to dra_manager_state with the checksum the kubelet would write."""
    doc = json.loads(path.read_text())
    data = json.loads(doc["Data"])
    data["ClaimInfoStateList"] = (data["ClaimInfoStateList"] or []) + claims
    text = json.dumps(data, separators=(",", ":"))
    path.write_text(json.dumps({"Data": text, "Checksum": zlib.crc32(text.encode())}))


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
    _add_claims(
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
        (etc / f"dup{n}.yaml").write_text("cdiVersion: 0.6.0\nkind: v.example/x\ndevices: [{name: a}]\n")
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


def test_the_default_node_has_no_other_dra_or_cdi_finding(sim_node) -> None:
    r = devctl(sim_node.root, "doctor", "-o", "json")
    dra = [(f["code"], f["subject"]) for f in r.json["findings"] if f["code"].startswith(("dra-", "cdi-", "registry-"))]
    assert dra == [("dra-device-unhealthy-in-use", f"{DRIVER}/sim-node/gpu-3")]
