"""DRA and CDI in the views, on the default simulated node (device plugins plus the DRA driver gpu.example.com).

The default node: ``inference/embed-0`` holds claim ``embed-gpu`` (gpu-0, NUMA 0),
``ml/train-1`` holds ``train-1-gpus`` (gpu-2 and the unhealthy gpu-3, NUMA 1).
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from helpers import devctl

DRIVER = "gpu.example.com"
SPEC = """cdiVersion: 0.6.0
kind: vendor.example/gpu
devices:
  - name: g0
    containerEdits:
      env: [FROM={where}]
"""


def test_claims_lists_each_claim_with_state_devices_health_and_numa(sim_node) -> None:
    r = devctl(sim_node.root, "claims", "-o", "json")
    assert r.exit_code == 0, r.stderr
    claims = {c["name"]: c for c in r.json["claims"]}
    assert set(claims) == {"embed-gpu", "train-1-gpus"}
    train = claims["train-1-gpus"]
    assert train["namespace"] == "ml" and train["state"] == "prepared" and train["uid"]
    assert [(p["namespace"], p["name"], p["running"]) for p in train["pods"]] == [("ml", "train-1", True)]
    devices = {d["device"]: d for d in train["devices"]}
    assert set(devices) == {"gpu-2", "gpu-3"}
    assert devices["gpu-3"]["health"] == "Unhealthy" and devices["gpu-2"]["health"] == "Healthy"
    assert devices["gpu-2"]["numa_nodes"] == [1] and devices["gpu-2"]["driver"] == DRIVER
    assert devices["gpu-2"]["cdi_devices"][0].startswith(f"k8s.{DRIVER}/claim=")
    assert claims["embed-gpu"]["devices"][0]["numa_nodes"] == [0]


def test_claims_filters_and_says_did_you_mean(sim_node) -> None:
    r = devctl(sim_node.root, "claims", "-n", "ml")
    assert r.exit_code == 0 and "train-1-gpus" in r.stdout and "embed-gpu" not in r.stdout
    assert "prepared" in r.stdout and " 1/2 " in r.stdout  # one of its two devices healthy
    assert "Unhealthy" in devctl(sim_node.root, "claims", "-n", "ml", "-o", "wide").stdout
    r = devctl(sim_node.root, "claims", "-q", "embed-gpu")
    assert r.stdout == "inference/embed-gpu\n"
    r = devctl(sim_node.root, "claims", "train-1-gpu")
    assert r.exit_code == 1
    assert "claim train-1-gpu not found (did you mean train-1-gpus?)" in r.stderr


def test_claims_reads_the_dra_drivers_not_the_device_plugins(sim_node, tmp_path: Path) -> None:
    """A dead device-plugin socket is `ls`'s business, not `claims`'s; a dead registration may be a DRA driver's."""
    from badservers import stale_socket

    kubelet = sim_node.root / "var/lib/kubelet"
    stale_socket(str(kubelet / "device-plugins" / "gone.sock"))
    assert "gone.sock" in devctl(sim_node.root, "ls").stderr
    r = devctl(sim_node.root, "claims")
    assert r.exit_code == 0, r.stderr
    assert "gone.sock" not in r.stderr and "prepared" in r.stdout
    stale_socket(str(kubelet / "plugins_registry" / "gone-reg.sock"))
    assert "gone-reg.sock" in devctl(sim_node.root, "claims").stderr
    snap = tmp_path / "node.json"
    assert devctl(sim_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    r = devctl(sim_node.root, "--from", str(snap), "claims")  # the same warnings as on the node
    assert "gone-reg.sock" in r.stderr and "gone.sock" not in r.stderr


def test_cdi_resolves_claims_names_to_pci_and_numa(sim_node) -> None:
    r = devctl(sim_node.root, "cdi", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert r.json["dirs"] == [str(sim_node.root / "etc/cdi"), str(sim_node.root / "var/run/cdi")]
    dra = [n for n in r.json["names"] if n["name"].startswith(f"k8s.{DRIVER}/")]
    assert len(dra) == 3 and all(n["status"] == "resolved" for n in dra)
    by_device = {n["name"].rsplit("-", 1)[1]: n for n in dra}
    (node,) = by_device["2"]["device_nodes"]
    assert node["path"] == f"/dev/dra/{DRIVER}/gpu-2" and node["numa_node"] == 1 and node["pci"]
    assert by_device["2"]["used_by"][0]["claim"] == "ml/train-1-gpus"
    assert any(e.startswith("DEVCTL_DRA_CLAIM_UID=") for e in by_device["2"]["env"])  # spec-level edits too


def test_a_device_plugins_names_of_a_kind_no_spec_has_are_explained_not_called_errors(sim_node) -> None:
    # GIVEN the default node: the GPU plugin's Allocate names nvidia.com/gpu=GPU-0 and GPU-4, no spec has the kind
    r = devctl(sim_node.root, "cdi")
    assert "gpu=GPU-0" in r.stdout and "unresolvable" in r.stdout  # cut in its middle to fit 80 columns
    assert "nvidia.com/gpu=GPU-0" in devctl(sim_node.root, "cdi", "-o", "wide").stdout
    # THEN the table says why doctor leaves them alone, and doctor does
    assert "no spec of kind nvidia.com/gpu in these dirs: the runtime may read others," in r.stdout
    codes = {(f["code"], f["subject"]) for f in devctl(sim_node.root, "doctor", "-o", "json").json["findings"]}
    assert ("cdi-unresolvable", "nvidia.com/gpu=GPU-0") not in codes
    # WHEN a spec of that kind appears, defining other devices: the names are judged, the note is gone
    spec_dir = sim_node.root / "etc/cdi"
    spec_dir.mkdir(parents=True)
    spec = spec_dir / "nvidia.yaml"
    spec.write_text(SPEC.format(where="x").replace("vendor.example/gpu", "nvidia.com/gpu"))
    try:
        r = devctl(sim_node.root, "cdi")
        assert "no spec of kind" not in r.stdout
        codes = {(f["code"], f["subject"]) for f in devctl(sim_node.root, "doctor", "-o", "json").json["findings"]}
        assert ("cdi-unresolvable", "nvidia.com/gpu=GPU-0") in codes
    finally:
        spec.unlink()
        spec_dir.rmdir()


def test_cdi_priority_conflict_and_unresolvable(short_root: Path) -> None:
    etc, run = short_root / "etc/cdi", short_root / "var/run/cdi"
    etc.mkdir(parents=True)
    run.mkdir(parents=True)
    (etc / "a.yaml").write_text(SPEC.format(where="etc"))
    (run / "a.yaml").write_text(SPEC.format(where="run"))  # the dynamic dir wins
    (etc / "c1.yaml").write_text(SPEC.format(where="one").replace("gpu\n", "nic\n", 1))
    (etc / "c2.yaml").write_text(SPEC.format(where="two").replace("gpu\n", "nic\n", 1))
    r = devctl(short_root, "cdi", "-o", "json", "vendor.example/gpu=g0", "vendor.example/nic=g0", "vendor.example/x=y")
    names = {n["name"]: n for n in r.json["names"]}
    assert names["vendor.example/gpu=g0"]["status"] == "resolved"
    assert names["vendor.example/gpu=g0"]["env"] == ["FROM=run"]
    assert names["vendor.example/nic=g0"]["status"] == "conflict"
    # A name that no spec defines and nothing uses does not exist here: no row, one line, exit 1.
    assert "vendor.example/x=y" not in names
    assert r.exit_code == 1
    assert "devctl: CDI name vendor.example/x=y not found" in r.stderr


def test_cdi_names_with_control_characters_are_escaped(short_root: Path) -> None:
    (short_root / "etc/cdi").mkdir(parents=True)
    (short_root / "etc/cdi/a.yaml").write_text(SPEC.format(where="x"))
    r = devctl(short_root, "cdi", "vendor.example/gpu=\x1b[2Jg0")
    assert "\x1b" not in r.stdout + r.stderr
    assert "CDI name vendor.example/gpu=\\x1b[2Jg0 not found" in r.stderr
    assert "g0" not in r.stdout  # an unknown name gets no table row


def test_checkpoint_has_the_dra_section(sim_node) -> None:
    r = devctl(sim_node.root, "checkpoint", "-o", "json")
    assert r.exit_code == 0, r.stderr
    dra = r.json["dra"]
    assert dra["path"] == str(sim_node.paths.kubelet_dir) + "/dra_manager_state"
    assert (dra["format"], dra["checksum_ok"]) == ("v1", True)
    assert {c["name"]: c["state"] for c in dra["claims"]} == {"embed-gpu": "prepared", "train-1-gpus": "prepared"}
    table = devctl(sim_node.root, "checkpoint").stdout
    assert "dra_manager_state: format v1, checksum ok" in table and "train-1-gpus" in table


def test_plugins_lists_both_worlds(sim_node) -> None:
    r = devctl(sim_node.root, "plugins", "-o", "json")
    assert r.exit_code == 0, r.stderr
    rows = {os.path.basename(p["socket"]): p for p in r.json["plugins"]}
    dra = rows[f"{DRIVER}-reg.sock"]
    assert (dra["kind"], dra["driver"], dra["status"], dra["endpoint_status"]) == ("dra", DRIVER, "serving", "serving")
    assert dra["endpoint"] == f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
    assert dra["endpoint_path"] == str(sim_node.root) + dra["endpoint"]
    assert dra["health_stream"] is True and "v1.DRAPlugin" in dra["supported_versions"]
    assert (dra["devices"], dra["healthy"]) == (4, 3)
    assert rows["nvidia-gpu.sock"]["kind"] == "device-plugin"
    assert "dra" in devctl(sim_node.root, "plugins", "-o", "wide").stdout


def test_ls_and_devices_have_dra_rows(sim_node) -> None:
    r = devctl(sim_node.root, "ls", "-o", "json", DRIVER)
    assert r.exit_code == 0, r.stderr
    (row,) = r.json["resources"]
    assert (row["kind"], row["status"], row["capacity"], row["allocatable"]) == ("dra", "serving", 4, 3)
    assert (row["allocated"], row["free"], row["unhealthy"], row["numa_nodes"]) == (3, 1, 1, [0, 1])
    r = devctl(sim_node.root, "devices", "-o", "json", DRIVER)
    devices = {d["id"]: d for d in r.json["devices"]}
    assert set(devices) == {f"sim-node/gpu-{i}" for i in range(4)}
    gpu3 = devices["sim-node/gpu-3"]
    assert (gpu3["kind"], gpu3["health"], gpu3["state"], gpu3["numa_nodes"]) == (
        "dra",
        "Unhealthy",
        "unhealthy-allocated",
        [1],
    )
    assert [(h["namespace"], h["pod"], h["claim"]) for h in gpu3["allocated_to"]] == [
        ("ml", "train-1", "ml/train-1-gpus")
    ]
    assert devices["sim-node/gpu-1"]["state"] == "free"
    table = devctl(sim_node.root, "ls").stdout
    assert any(line.startswith(DRIVER) for line in table.splitlines())


def test_ls_reads_cdi_specs_only_where_it_shows_numa(sim_node) -> None:
    """The table has no NUMA column and skips the specs (docs/dra.md); -o wide shows the driver's NUMA through them."""
    (sim_node.root / "etc/cdi").mkdir(parents=True, exist_ok=True)
    (sim_node.root / "etc/cdi/broken.yaml").write_text("cdiVersion: [\n")
    table = devctl(sim_node.root, "ls")
    wide = devctl(sim_node.root, "ls", "-o", "wide")
    assert table.exit_code == wide.exit_code == 0, wide.stderr
    assert "broken.yaml" not in table.stderr and "broken.yaml" in wide.stderr
    (line,) = [line.split() for line in wide.stdout.splitlines() if line.startswith(DRIVER)]
    assert "0,1" in line


def test_pods_and_get_give_each_claim_device_its_health_and_numa(sim_node) -> None:
    pods = devctl(sim_node.root, "pods", "-n", "ml", "--pod", "train-1", "-o", "json").json["pods"]
    got = devctl(sim_node.root, "get", "train-1", "-n", "ml", "-o", "json").json
    for pod in (pods[0], got):
        (claim,) = pod["containers"][0]["dynamic_resources"]
        devices = {d["device"]: (d["health"], d["numa_nodes"]) for d in claim["devices"]}
        assert devices == {"gpu-2": ("Healthy", [1]), "gpu-3": ("Unhealthy", [1])}


def test_topo_places_dra_devices_and_checks_their_alignment(sim_node) -> None:
    view = devctl(sim_node.root, "topo", "-o", "json").json
    per_node = {n["id"]: n["devices"].get(DRIVER) for n in view["numa_nodes"]}
    # gpu-0 on node 0 and gpu-2, gpu-3 on node 1 (their claims' CDI device nodes); gpu-1, in no claim, unknown
    assert (per_node[0]["total"], per_node[0]["allocated"]) == (1, 1)
    assert (per_node[1]["total"], per_node[1]["allocated"]) == (2, 2)
    assert (per_node[None]["total"], per_node[None]["free"]) == (1, 1)  # NUMA unknown: null
    rows = {(a["pod"], a["container"]): a for a in view["alignment"]}
    embed = rows[("embed-0", "embedder")]
    assert (embed["aligned"], embed["device_numa"], embed["cpu_numa"]) == (False, [0], [1])
    assert rows[("train-1", "trainer")]["aligned"] is True


def test_a_snapshot_carries_dra_and_cdi(sim_node, tmp_path: Path) -> None:
    snap = tmp_path / "node.json"
    assert devctl(sim_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    for argv in (("claims",), ("cdi",), ("devices", DRIVER), ("plugins",)):
        live = devctl(sim_node.root, *argv, "-o", "json").json
        from_file = devctl(sim_node.root, "--from", str(snap), *argv, "-o", "json").json
        if argv == ("plugins",):  # latencies differ between two readings
            for doc in (live, from_file):
                for p in doc["plugins"]:
                    p["latency_ms"] = None
        assert from_file == live, argv


def test_a_claim_name_with_control_characters_is_printed_escaped(short_root: Path) -> None:
    kubelet = short_root / "var/lib/kubelet"
    kubelet.mkdir(parents=True)
    data = json.dumps(
        {
            "kind": "DRACheckpoint",
            "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
            "ClaimInfoStateList": [
                {
                    "ClaimUID": "u",
                    "ClaimName": "evil\x1b[2J\rname",
                    "Namespace": "ml",
                    "PodUIDs": {},
                    "DriverState": {
                        "x\x07.example.com": {"Devices": [{"PoolName": "p", "DeviceName": "d\x1b]0;t\x07"}]}
                    },
                }
            ],
        }
    )
    (kubelet / "dra_manager_state").write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}))
    for argv in (("claims",), ("checkpoint",), ("devices",), ("ls",), ("doctor",)):
        r = devctl(short_root, *argv)
        out = r.stdout + r.stderr
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out, argv
        assert "Traceback" not in out
    assert "evil" in devctl(short_root, "claims").stdout


def test_doctor_finds_a_conflict_of_a_name_no_pod_uses_yet(short_root: Path) -> None:
    # Two specs of the same priority define vendor.example/nic=g0: the runtime refuses it however few pods use it.
    etc = short_root / "etc/cdi"
    etc.mkdir(parents=True)
    (etc / "c1.yaml").write_text(SPEC.format(where="one").replace("gpu\n", "nic\n", 1))
    (etc / "c2.yaml").write_text(SPEC.format(where="two").replace("gpu\n", "nic\n", 1))
    (etc / "ok.yaml").write_text(SPEC.format(where="ok"))
    findings = devctl(short_root, "doctor", "-o", "json").json["findings"]
    conflicts = [(f["code"], f["subject"], f["severity"]) for f in findings if f["code"].startswith("cdi-")]
    assert conflicts == [("cdi-conflict", "vendor.example/nic=g0", "warning")]
