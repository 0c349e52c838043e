"""The read commands as a user runs them, against simulated nodes and broken ones.

Most commands run in-process through typer's CliRunner (fast); a few run as
real subprocesses (exit codes, start-up imports, a user without privileges).
JSON is checked field by field against what the scenario implies.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from badservers import huge_pod_resources, hung_server, rate_limited_pod_resources, stale_socket
from helpers import DEVCTL, devctl, invoke, run_devctl
from shared_data import needs_shared, shared

from devctl.cli.common import NO_RIGHTS
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.lab.sim.scenario import KubeletOptions, default_scenario, load_scenario
from devctl.lab.sim.scenario_dra import claim_uid
from devctl.lab.sim.thread import running_sim
from devctl.model import Device
from devctl.node.checkpoint import fnv1a32, render_spew

GPU, NIC, FOO = "nvidia.com/gpu", "intel.com/sriov_netdevice", "hardware-vendor.example/foo"
SHARED = "nvidia.com/gpu.shared"  # the default node's time-sliced GPU: 4 replicas, two held
DRA = "gpu.example.com"  # the default node's DRA driver: its rows follow the device plugins'
FPGA, NPU = "example.com/fpga", "acme.io/npu"
EDGE = Path(__file__).parent / "scenarios" / "edge-node.yaml"
COMMANDS = [["ls"], ["devices"], ["pods"], ["get", "train-0", "-n", "ml"], ["topo"], ["plugins"], ["checkpoint"]]
GIB = 1 << 30


@contextlib.contextmanager
def sim_root(scenario) -> Iterator[object]:
    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, scenario, grace_period=5.0) as handle:
            yield handle
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def default_node():
    """The default scenario, shared by the tests that only read it."""
    with sim_root(default_scenario()) as handle:
        yield handle


@pytest.fixture(scope="module")
def edge_node():
    with sim_root(load_scenario(EDGE)) as handle:
        yield handle


def by(rows: list[dict], key: str) -> dict:
    return {r[key]: r for r in rows}


# --- the default scenario ------------------------------------------------------------------------


def test_ls_json(default_node):
    r = devctl(default_node.root, "ls", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert doc["errors"] == []
    rows = by(doc["resources"], "name")
    assert list(rows) == [FOO, NIC, GPU, SHARED, DRA]
    gpu = rows[GPU]
    assert gpu["socket"] == f"{default_node.paths.plugins_dir}/nvidia-gpu.sock"
    assert gpu["status"] == "serving"
    assert (gpu["capacity"], gpu["allocatable"], gpu["allocated"], gpu["free"], gpu["unhealthy"]) == (8, 7, 6, 1, 1)
    assert gpu["numa_nodes"] == [0, 1]
    assert gpu["options"] == {"pre_start_required": False, "get_preferred_allocation_available": True}
    nic = rows[NIC]
    assert (nic["capacity"], nic["allocatable"], nic["allocated"], nic["free"], nic["unhealthy"]) == (8, 8, 2, 6, 0)
    assert nic["options"] == {"pre_start_required": True, "get_preferred_allocation_available": False}
    foo = rows[FOO]
    assert (foo["capacity"], foo["allocated"], foo["free"], foo["numa_nodes"]) == (2, 1, 1, [])


def test_ls_table_filters_quiet_and_no_headers(default_node):
    r = devctl(default_node.root, "ls")
    assert r.exit_code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    # the TUI's short headers: the default table fits 80 columns (issue 10, item 2)
    assert lines[0].split() == ["NAME", "STATUS", "CAP", "ALLOC", "USED", "FREE", "BAD"]
    assert max(len(x) for x in lines) <= 80
    assert lines[3].split() == [GPU, "serving", "8", "7", "6", "1", "1"]
    assert devctl(default_node.root, "ls", GPU, "--no-headers").stdout.split() == [
        GPU,
        "serving",
        "8",
        "7",
        "6",
        "1",
        "1",
    ]
    assert devctl(default_node.root, "ls", "-q").stdout == f"{FOO}\n{NIC}\n{GPU}\n{SHARED}\n{DRA}\n"
    wide = devctl(default_node.root, "ls", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-4:] == ["NUMA", "PRE-START", "PREFERRED", "SOCKET"]


def test_a_misspelt_resource_is_not_found_with_a_suggestion(default_node):
    # As `kubectl get pod NAME` does: the rows found, one line per name not found, exit 1.
    typo = devctl(default_node.root, "ls", "nvidia.com/gpus")
    assert (typo.exit_code, typo.stdout) == (1, "")
    assert typo.stderr == "devctl: resource nvidia.com/gpus not found (did you mean nvidia.com/gpu?)\n"
    both = devctl(default_node.root, "devices", GPU, "nope.io/x", "-o", "json")
    assert both.exit_code == 1
    assert {d["resource"] for d in both.json["devices"]} == {GPU}  # stdout is still the whole JSON document
    assert both.stderr == "devctl: resource nope.io/x not found\n"
    # by its last part and in any case, as a person types it
    for asked in ("gpu", "NVIDIA.com/gpu"):
        for command in ("ls", "devices"):
            r = devctl(default_node.root, command, asked)
            assert (r.exit_code, r.stderr) == (1, f"devctl: resource {asked} not found (did you mean {GPU}?)\n")


def test_devices_takes_a_device_id_after_its_resource_or_alone(default_node):
    # GIVEN the default node; WHEN a person names a device as completion offers it (resource, then ID)
    one = devctl(default_node.root, "devices", GPU, "GPU-0")
    # THEN that device's row alone
    assert one.exit_code == 0, one.stderr
    assert [r.split()[:2] for r in one.stdout.splitlines()[1:]] == [[GPU, "GPU-0"]]
    # AND an ID alone finds its resource, DRA devices included
    two = devctl(default_node.root, "devices", "GPU-5", "sim-node/gpu-3", "-q")
    assert (two.exit_code, two.stdout) == (0, "GPU-5\nsim-node/gpu-3\n")
    # AND a device the resource does not have is exit 1 with a likely ID, the rows found still shown
    typo = devctl(default_node.root, "devices", GPU, "GPU-0", "GPU-99", "-q")
    assert (typo.exit_code, typo.stdout) == (1, "GPU-0\n")
    assert typo.stderr == "devctl: device GPU-99 not found (did you mean GPU-7?)\n"


def test_pods_resource_that_the_node_does_not_have_is_exit_1_with_a_suggestion(default_node):
    for asked in ("gpu", "NVIDIA.com/gpu"):
        r = devctl(default_node.root, "pods", "--resource", asked)
        assert (r.exit_code, r.stdout) == (1, "")
        assert r.stderr == f"devctl: resource {asked} not found (did you mean {GPU}?)\n"
    held = devctl(default_node.root, "pods", "--resource", GPU, "-q")
    assert (held.exit_code, held.stdout) == (0, "ml/train-0\nml/train-1\n")


def test_devices_json(default_node):
    r = devctl(default_node.root, "devices", "-o", "json")
    assert r.exit_code == 0
    rows = by(r.json["devices"], "id")
    assert len(rows) == 18 + 4 + 4  # the replicas, and the DRA driver's four
    assert rows["GPU-5"] == {
        "resource": GPU,
        "id": "GPU-5",
        "health": "Unhealthy",
        "numa_nodes": [1],
        "state": "unhealthy",
        "allocated_to": [],
        "kind": "device-plugin",
        "pci": None,  # no CDI name or PCI address leads from it to hardware
    }
    assert rows["GPU-0"]["state"] == "allocated"
    assert rows["GPU-0"]["allocated_to"] == [{"namespace": "ml", "pod": "train-0", "container": "trainer"}]
    assert rows["GPU-7"]["state"] == "free"
    assert rows["foo-0"]["numa_nodes"] == [] and rows["foo-0"]["allocated_to"][0]["pod"] == "serve-1"
    assert [d["id"] for d in devctl(default_node.root, "devices", FOO, "-o", "json").json["devices"]] == [
        "foo-0",
        "foo-1",
    ]


def test_pods_json(default_node):
    r = devctl(default_node.root, "pods", "-o", "json")
    assert r.exit_code == 0
    pods = {(p["namespace"], p["name"]): p for p in r.json["pods"]}
    assert len(pods) == 8
    trainer, shipper = pods["ml", "train-0"]["containers"]
    assert trainer["name"] == "trainer" and shipper == {
        "name": "log-shipper",
        "devices": [],
        "cpu_ids": [],
        "memory": [],
        "dynamic_resources": [],
    }
    devices = by(trainer["devices"], "resource")
    assert devices[GPU] == {"resource": GPU, "ids": ["GPU-0", "GPU-1", "GPU-2", "GPU-3"], "numa_nodes": [0]}
    assert len(devices[NIC]["ids"]) == 1
    assert trainer["cpu_ids"] == list(range(2, 10))
    assert trainer["memory"] == [
        {"type": "memory", "size": 32 * GIB, "numa_nodes": [0]},
        {"type": "hugepages-1Gi", "size": 2 * GIB, "numa_nodes": [0]},
    ]
    (claim,) = pods["inference", "embed-0"]["containers"][0]["dynamic_resources"]
    assert claim == {
        "claim_name": "embed-gpu",
        "claim_namespace": "inference",
        "devices": [
            {
                "driver": "gpu.example.com",
                "pool": "sim-node",
                "device": "gpu-0",
                "cdi_devices": [f"k8s.gpu.example.com/claim={claim_uid('inference', 'embed-gpu')}-gpu-0"],
                "health": "Healthy",  # from the driver's health stream
                "numa_nodes": [0],  # through its CDI device node and sysfs
                "share_id": None,  # ClaimResource.share_id: the simulated driver shares none
            }
        ],
    }


def test_pods_filters(default_node):
    root = default_node.root
    assert devctl(root, "pods", "-q", "-n", "ml").stdout == "ml/train-0\nml/train-1\n"
    assert devctl(root, "pods", "-q", "--resource", NIC).stdout == "inference/serve-0\nml/train-0\n"
    only = devctl(root, "pods", "--resource", NIC, "--pod", "train-0", "-o", "json").json["pods"]
    assert [c["name"] for c in only[0]["containers"]] == ["trainer"]
    assert [d["resource"] for d in only[0]["containers"][0]["devices"]] == [NIC]


def test_get_is_one_element_of_pods(default_node):
    root = default_node.root
    got = devctl(root, "get", "train-0", "-n", "ml", "-o", "json")
    assert got.exit_code == 0
    pods = {p["name"]: p for p in devctl(root, "pods", "-o", "json").json["pods"]}
    assert got.json == pods["train-0"]
    assert devctl(root, "get", "train-0", "-n", "ml", "-q").stdout == "ml/train-0\n"
    missing = devctl(root, "get", "train-0")  # the default namespace: says where it does run
    assert (missing.exit_code, missing.stdout) == (1, "")
    assert missing.stderr == (
        "devctl: pod train-0 in namespace default not found (it runs in namespace ml: devctl get train-0 -n ml)\n"
    )
    nowhere = devctl(root, "get", "trian-0", "-n", "ml")
    assert (nowhere.exit_code, nowhere.stderr) == (
        1,
        "devctl: pod trian-0 in namespace ml not found (did you mean train-0?)\n",
    )
    # NS/NAME, as devctl prints holders
    assert devctl(root, "get", "ml/train-0", "-o", "json").json == pods["train-0"]
    assert devctl(root, "get", "ml/train-0", "-n", "default").exit_code == 2
    # a command's name where the pod's goes, kubectl-style
    for word, meant in (("pods", "pods"), ("devices", "devices")):
        r = devctl(root, "get", word)
        assert (r.exit_code, r.stderr) == (
            1,
            f"devctl: pod {word} in namespace default not found (did you mean `devctl {meant}`?)\n",
        )


def test_topo_json(default_node):
    r = devctl(default_node.root, "topo", "-o", "json")
    assert r.exit_code == 0 and r.json["errors"] == []
    n0, n1 = (n for n in r.json["numa_nodes"] if n["id"] is not None)
    assert n0["cpus"] == list(range(16)) and n0["allocatable_cpus"] == list(range(2, 16))
    assert n0["exclusive_cpus"] == list(range(2, 10)) and n0["shared_cpus"] == list(range(10, 16))
    assert n0["memory_bytes"] == 64 * GIB
    assert n0["devices"][GPU] == {"total": 4, "allocated": 4, "free": 0, "total_min": None}
    assert n1["devices"][GPU] == {"total": 4, "allocated": 2, "free": 1, "total_min": None}  # GPU-5 unhealthy
    assert n1["exclusive_cpus"] == [*range(16, 22), *range(24, 30)]
    assert {"size_kb": 2048, "total": 1024, "free": 768} in n1["hugepages"]
    assert r.json["shared_pool"] == [*range(10, 16), 22, 23, 30, 31]
    (minus_one,) = (n for n in r.json["numa_nodes"] if n["id"] is None)  # NUMA unknown: null, never -1
    assert minus_one["devices"] == {
        FOO: {"total": 2, "allocated": 1, "free": 1, "total_min": None},
        # the DRA driver's gpu-1: in no claim, so no CDI device node says its NUMA node
        "gpu.example.com": {"total": 1, "allocated": 0, "free": 1, "total_min": None},
    }
    align = {(a["namespace"], a["pod"]): a for a in r.json["alignment"]}
    assert align["inference", "serve-0"] == {
        "namespace": "inference",
        "pod": "serve-0",
        "container": "server",
        "aligned": False,
        "device_numa": [0],
        "cpu_numa": [1],
        "memory_numa": [1],
    }
    assert align["ml", "train-0"]["aligned"] is True and align["ml", "train-1"]["aligned"] is True
    assert align["inference", "serve-1"]["aligned"] is None  # a device without topology, nothing else


def test_plugins_json(default_node):
    r = devctl(default_node.root, "plugins", "-o", "json")
    assert r.exit_code == 0
    doc = r.json
    paths = default_node.paths
    assert doc["kubelet_socket"] == {"path": paths.kubelet_socket, "present": True, "status": "listening"}
    assert doc["checkpoint"] == {"path": paths.checkpoint, "present": True, "checksum_ok": True}
    plugins = by(doc["plugins"], "socket")
    gpu = plugins[f"{paths.plugins_dir}/nvidia-gpu.sock"]
    assert (gpu["resource"], gpu["status"], gpu["devices"], gpu["healthy"]) == (GPU, "serving", 8, 7)
    assert gpu["options"] == {"pre_start_required": False, "get_preferred_allocation_available": True}
    assert gpu["latency_ms"] > 0 and gpu["error"] is None
    assert {p["resource"] for s, p in plugins.items() if s.startswith(paths.plugins_dir)} == {GPU, NIC, FOO, SHARED}
    # the default node's DRA driver registers through plugins_registry
    dra = plugins[f"{paths.plugins_registry}/gpu.example.com-reg.sock"]
    assert (dra["status"], dra["registry"]["type"], dra["registry"]["name"]) == (
        "serving",
        "DRAPlugin",
        "gpu.example.com",
    )


def test_checkpoint_json(default_node):
    r = devctl(default_node.root, "checkpoint", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert (doc["format"], doc["checksum_ok"], doc["path"]) == ("v2", True, default_node.paths.checkpoint)
    assert len(doc["registered_devices"][GPU]) == 7  # healthy only
    assert len(doc["entries"]) == 7 and not any(e["stale"] for e in doc["entries"])
    (gpu,) = (e for e in doc["entries"] if e["resource"] == GPU and e["pod"]["name"] == "train-0")
    assert gpu["container"] == "trainer" and gpu["device_ids"] == {"0": ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]}
    assert gpu["allocation"]["envs"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-0,GPU-1,GPU-2,GPU-3"
    # the plugin's old-style name for the request, then the NVIDIA plugin's own kind, one name per device
    assert gpu["allocation"]["cdi_devices"] == [
        "nvidia.com/gpu=GPU-0",
        *(f"k8s.device-plugin.nvidia.com/gpu=GPU-{i}" for i in range(4)),
    ]
    (foo,) = (e for e in doc["entries"] if e["resource"] == FOO)
    assert foo["device_ids"] == {"-1": ["foo-0"]}
    assert foo["allocation"]["mounts"] == [
        {"container_path": "/var/lib/foo", "host_path": "/var/lib/foo", "read_only": True}
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_has_a_table_and_yaml_equal_to_json(default_node, command):
    root = default_node.root
    table = devctl(root, *command)
    assert table.exit_code == 0 and table.stdout and "\033[" not in table.stdout
    as_json = devctl(root, *command, "-o", "json").json
    as_yaml = yaml.safe_load(devctl(root, *command, "-o", "yaml").stdout)
    if command[0] == "plugins":  # latency differs between two runs
        for doc in (as_json, as_yaml):
            for p in doc["plugins"]:
                p["latency_ms"] = None
    assert as_yaml == as_json


def test_snapshot_and_from_give_the_same_answers(default_node, tmp_path):
    root = default_node.root
    snap = tmp_path / "node.json"
    r = devctl(root, "snapshot", "-f", str(snap))
    assert r.exit_code == 0 and r.stdout == ""
    for command in COMMANDS:
        live = devctl(root, *command, "-o", "json").json
        offline = invoke("--from", str(snap), *command, "-o", "json")
        assert offline.exit_code == 0, offline.stderr
        offline_doc = json.loads(offline.stdout)
        if command[0] == "plugins":  # latency is measured per run
            for doc in (live, offline_doc):
                for p in doc["plugins"]:
                    p["latency_ms"] = None
        assert offline_doc == live, command


def test_a_snapshot_read_an_hour_later_answers_as_the_node_did_then(default_node, tmp_path):
    # GIVEN a snapshot of the default node, as if taken an hour ago (every time in it an hour back)
    snap = tmp_path / "node.json"
    assert devctl(default_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    doc = json.loads(snap.read_text())
    for p in doc["plugins"]:
        if p.get("dra"):
            p["dra"]["read_at"] -= 3600
            for h in p["dra"]["health"]:
                h["last_updated"] -= 3600
    snap.write_text(json.dumps(doc))
    # WHEN it is read now THEN the DRA driver's devices keep the health its stream gave then (not all Unknown)
    ls = invoke("--from", str(snap), "ls", "-o", "json")
    dra = by(ls.json["resources"], "name")[DRA]
    assert (dra["capacity"], dra["allocatable"], dra["unhealthy"]) == (4, 3, 1)
    health = {d["id"]: d["health"] for d in invoke("--from", str(snap), "devices", DRA, "-o", "json").json["devices"]}
    assert health == {f"sim-node/gpu-{i}": "Unhealthy" if i == 3 else "Healthy" for i in range(4)}


def test_from_a_snapshot_of_a_broken_node_answers_as_the_node_did(short_root, tmp_path):
    # Warnings, errors and exit codes too: each command names the failures of the sources it reads.
    snap = tmp_path / "broken.json"
    assert devctl(short_root, "snapshot", "-f", str(snap)).exit_code == 3

    def answer(r):  # the sources are read concurrently: their errors may come in any order
        doc = json.loads(r.stdout) if r.stdout else None
        if doc:
            doc["errors"] = sorted(doc["errors"], key=lambda e: (e["source"], e["message"]))
        return r.exit_code, doc, r.stderr

    for command in [*COMMANDS, ["get", "x"]]:
        live = devctl(short_root, *command, "-o", "json")
        offline = invoke("--from", str(snap), *command, "-o", "json")
        assert answer(offline) == answer(live), command


def test_a_reader_that_goes_away_is_a_normal_end(default_node, tmp_path):
    # `devctl snapshot | head -1`: exit 0 and no noise, as watch does, not 1 (findings).
    snap = tmp_path / "node.json"
    assert devctl(default_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    proc = subprocess.Popen([*DEVCTL, "--from", str(snap), "snapshot"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes a byte
    assert proc.wait(timeout=30) == 0
    assert proc.stderr.read() == b""


def test_a_bad_snapshot_file_is_one_line_and_exit_3(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{")
    r = invoke("--from", str(path), "ls")
    assert r.exit_code == 3
    assert r.stderr == f"devctl: --from {path}: not JSON: Expecting property name enclosed in double quotes at line 1\n"


def tree(root: Path) -> dict[str, tuple[int, float]]:
    """Every file under the kubelet dir with its size and mtime.

    Not dra_health_state: the simulated kubelet rewrites it on each health message, and its DRA
    driver sends its list every 10 s on its own (a test slower than that under load saw it change).
    """
    out = {}
    for dirpath, _, files in os.walk(root / "var/lib/kubelet"):
        for f in files:
            if f == "dra_health_state":
                continue
            st = os.lstat(os.path.join(dirpath, f))
            out[os.path.join(dirpath, f)] = (st.st_size, st.st_mtime_ns)
    return out


def test_nothing_writes_to_the_node(default_node):
    checkpoint = Path(default_node.paths.checkpoint)
    before_bytes, before_tree = checkpoint.read_bytes(), tree(default_node.root)
    for command in [*COMMANDS, ["snapshot"]]:
        for output in (["-o", "json"], ["-o", "wide"]) if command[0] != "snapshot" else ([],):
            devctl(default_node.root, *command, *output)
    assert checkpoint.read_bytes() == before_bytes
    assert tree(default_node.root) == before_tree


# --- the second scenario ---------------------------------------------------------------------------


def test_edge_ls(edge_node):
    r = devctl(edge_node.root, "ls", "-o", "json")
    assert r.exit_code == 0 and r.json["errors"] == []
    rows = by(r.json["resources"], "name")
    fpga, npu = rows[FPGA], rows[NPU]
    assert (fpga["capacity"], fpga["allocatable"], fpga["allocated"], fpga["free"]) == (1, 1, 1, 0)
    assert fpga["numa_nodes"] == [0, 1]
    assert (npu["capacity"], npu["allocatable"], npu["allocated"], npu["unhealthy"]) == (3, 2, 1, 1)
    assert npu["numa_nodes"] == []


def test_edge_devices(edge_node):
    rows = by(devctl(edge_node.root, "devices", "-o", "json").json["devices"], "id")
    assert rows["fpga-0"]["numa_nodes"] == [0, 1] and rows["fpga-0"]["state"] == "allocated"
    assert (rows["npu-2"]["health"], rows["npu-2"]["state"]) == ("Unhealthy", "unhealthy")


def test_edge_pods_memory_and_dra(edge_node):
    pods = {p["name"]: p for p in devctl(edge_node.root, "pods", "-o", "json").json["pods"]}
    (infer,) = pods["vision-0"]["containers"]
    assert infer["memory"] == [
        {"type": "memory", "size": 4 * GIB, "numa_nodes": [0]},
        {"type": "hugepages-2Mi", "size": 512 << 20, "numa_nodes": [0]},
        {"type": "hugepages-1Gi", "size": GIB, "numa_nodes": [0]},
    ]
    (fpga,) = infer["devices"]
    assert fpga == {"resource": FPGA, "ids": ["fpga-0"], "numa_nodes": [0, 1]}  # one entry per NUMA node, merged
    claims = by(pods["render-0"]["containers"][0]["dynamic_resources"], "claim_name")
    assert claims["two-gpus"]["claim_namespace"] == "dra"
    assert [d["device"] for d in claims["two-gpus"]["devices"]] == ["gpu-0", "gpu-1"]
    assert claims["shared-nic"]["claim_namespace"] == "net"
    assert claims["shared-nic"]["devices"][0]["cdi_devices"] == []
    wide = devctl(edge_node.root, "pods", "-o", "wide", "--pod", "render-0").stdout
    assert "dra/two-gpus=gpu.example.com/edge-node/gpu-0,gpu.example.com/edge-node/gpu-1" in wide


def test_edge_get_falls_back_to_list(edge_node):
    r = devctl(edge_node.root, "get", "vision-0", "-n", "edge", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert r.json["containers"][0]["cpu_ids"] == [2, 3]
    missing = devctl(edge_node.root, "get", "nope", "-n", "edge")
    assert (missing.exit_code, missing.stderr) == (1, "devctl: pod nope in namespace edge not found\n")


def test_edge_topo(edge_node):
    doc = devctl(edge_node.root, "topo", "-o", "json").json
    nodes = by(doc["numa_nodes"], "id")
    assert nodes[0]["devices"][FPGA] == {"total": 1, "allocated": 1, "free": 0, "total_min": None}
    assert nodes[1]["devices"][FPGA] == {"total": 1, "allocated": 1, "free": 0, "total_min": None}
    assert nodes[None]["devices"][NPU] == {"total": 3, "allocated": 1, "free": 1, "total_min": None}
    assert {"size_kb": 1048576, "total": 2, "free": 1} in nodes[0]["hugepages"]
    align = by(doc["alignment"], "pod")
    assert align["vision-0"]["aligned"] is True and align["vision-0"]["device_numa"] == [0, 1]
    assert align["batch-0"]["aligned"] is False
    assert (align["batch-0"]["cpu_numa"], align["batch-0"]["memory_numa"]) == ([1], [0])


def test_edge_topo_without_sysfs(edge_node):
    r = devctl(edge_node.root, "--sysfs", "/nonexistent/sys", "topo", "-o", "json")
    assert r.exit_code == 0, r.stderr  # pod-resources still answers
    message = "cannot read sysfs at /nonexistent/sys: No such file or directory"
    assert r.json["errors"] == [{"source": "sysfs", "message": message, "kind": "missing", "subject": None}]
    nodes = by(r.json["numa_nodes"], "id")
    # The nodes that devices and memory name; no CPU map, so no CPUs and no verdict on CPU alignment.
    assert list(nodes) == [None, 0, 1] and all(n["cpus"] == [] for n in nodes.values())
    assert nodes[0]["memory_bytes"] == 32 * GIB  # from GetAllocatableResources
    align = by(r.json["alignment"], "pod")
    assert align["vision-0"]["aligned"] is None and align["vision-0"]["cpu_numa"] == []
    assert r.json["shared_pool"] == [1, 4, 5, 6, 7, *range(10, 16)]


def test_edge_plugins(edge_node):
    doc = devctl(edge_node.root, "plugins", "-o", "json").json
    plugins = by(doc["plugins"], "socket")
    d = edge_node.paths.plugins_dir
    npu = plugins[f"{d}/npu.sock"]
    assert (npu["resource"], npu["status"], npu["devices"], npu["healthy"]) == (NPU, "serving", 3, 2)
    assert plugins[f"{d}/fpga.sock"]["resource"] == FPGA
    assert doc["checkpoint"]["checksum_ok"] is True and doc["errors"] == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_edge_tables_and_yaml(edge_node, command):
    if command[0] == "get":
        command = ["get", "vision-0", "-n", "edge"]
    table = devctl(edge_node.root, *command)
    assert table.exit_code == 0 and table.stdout and table.stderr == ""
    as_json = devctl(edge_node.root, *command, "-o", "json").json
    as_yaml = yaml.safe_load(devctl(edge_node.root, *command, "-o", "yaml").stdout)
    for doc in (as_json, as_yaml):
        for p in doc.get("plugins", ()):
            p["latency_ms"] = None
    assert as_yaml == as_json


def test_edge_checkpoint(edge_node):
    entries = by(devctl(edge_node.root, "checkpoint", "-o", "json").json["entries"], "resource")
    assert entries[NPU]["device_ids"] == {"-1": ["npu-0"]}
    assert entries[NPU]["pod"] == {"namespace": "edge", "name": "batch-0"}
    assert entries[NPU]["allocation"]["cdi_devices"] == ["acme.io/npu=npu-0"]
    assert sorted(entries[FPGA]["device_ids"]) == ["0", "1"]  # one device, filed under both nodes
    rows = devctl(edge_node.root, "checkpoint", "--no-headers").stdout.splitlines()
    assert ["edge/vision-0", "infer", FPGA, "fpga-0", "no"] in [r.split() for r in rows]
    wide = devctl(edge_node.root, "checkpoint", "--no-headers", "-o", "wide").stdout.splitlines()
    assert ["edge/vision-0", "infer", FPGA, "fpga-0", "no", "0,1"] in [r.split()[1:7] for r in wide]


# --- bad input ---------------------------------------------------------------------------------------


# Every read command, and one that names something: a wrong root is said the same way whatever the command.
NOT_A_NODE_COMMANDS = [
    ["ls"],
    ["ls", GPU],
    ["devices"],
    ["devices", "gpu"],
    ["pods"],
    ["get", "ml/train-0"],
    ["topo"],
    ["plugins"],
    ["checkpoint"],
    ["claims"],
    ["claims", "train-1-gpus"],
    ["cdi"],
    ["who"],
    ["snapshot"],
    ["watch", GPU],
    ["watch", "--once"],
    ["call", GPU, "list"],
    ["call", "--dra", "gpu.example.com", "info"],
]


def test_a_root_that_is_no_node_is_one_line_and_exit_3_in_every_command(short_root):
    # GIVEN a root with no kubelet under it (a wrong --root, or not a node)
    line = f"devctl: {short_root}/var/lib/kubelet/device-plugins does not exist: is this a node? --root/--kubelet-dir"
    for command in NOT_A_NODE_COMMANDS:
        # WHEN a person runs any command there (watch in its own process: it takes the signals)
        r = run_devctl(*command, root=short_root) if command[0] == "watch" else devctl(short_root, *command)
        # THEN one line says why (not one warning per missing socket and file), exit 3: no source
        assert r.exit_code == 3, command
        (said,) = r.stderr.splitlines()
        assert said == line or said.startswith(f"{line} (use --wait"), command  # a whole-node watch may wait
    # AND JSON keeps every source's error in errors[], with the same one line on stderr
    ls = devctl(short_root, "ls", "-o", "json")
    assert ls.exit_code == 3 and ls.stderr.splitlines() == [line]
    assert sorted(e["source"] for e in ls.json["errors"]) == ["checkpoint", "plugins-dir", "pod-resources"]
    assert {e["kind"] for e in ls.json["errors"]} == {"missing"}
    doc = devctl(short_root, "pods", "-o", "json").json
    assert doc == {"pods": [], "errors": [doc["errors"][0]]} and doc["errors"][0]["source"] == "pod-resources"


def test_a_missing_pod_resources_socket_on_a_node_is_still_its_own_warning(sim_node, tmp_path):
    # GIVEN a node whose plugins dir is there but whose pod-resources socket is not: not a wrong root
    r = devctl(sim_node.root, "--pod-resources", str(tmp_path / "none.sock"), "pods")
    assert r.exit_code == 3
    assert r.stderr.splitlines() == [f"warning: pod-resources: {tmp_path}/none.sock: no such socket"]


def test_an_output_that_cannot_encode_a_name_gets_an_escape_not_a_traceback(default_node, tmp_path):
    snap = tmp_path / "node.json"
    assert devctl(default_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    snap.write_text(snap.read_text().replace('"train-0"', '"tr\u00e4in-0"').replace('"train-1"', '"\U0001f680-1"'))
    ascii_only = {"PYTHONIOENCODING": "ascii"}  # a pipe or terminal that is not UTF-8
    table = run_devctl("--from", str(snap), "pods", "-n", "ml", env=ascii_only)
    assert (table.exit_code, table.stderr) == (0, "")
    assert "tr\\u00e4in-0" in table.stdout
    doc = run_devctl("--from", str(snap), "pods", "-n", "ml", "-o", "json", env=ascii_only)
    assert doc.exit_code == 0 and {p["name"] for p in doc.json["pods"]} == {"tr\u00e4in-0", "\U0001f680-1"}


def test_usage_errors_are_exit_2(default_node):
    assert devctl(default_node.root, "ls", "-o", "bogus").exit_code == 2
    assert devctl(default_node.root, "get").exit_code == 2


def test_stale_and_hung_plugins_are_one_line_each_and_the_rest_shows(sim_node, background):
    d = sim_node.paths.plugins_dir
    stale_socket(f"{d}/old.sock")
    background(hung_server(f"{d}/hung.sock"))
    start = time.monotonic()
    r = devctl(sim_node.root, "ls", timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.exit_code == 0
    assert sorted(r.stderr.splitlines()) == [
        f"warning: plugin: {d}/hung.sock GetDevicePluginOptions: no answer after 0.5s (deadline exceeded)",
        f"warning: plugin: {d}/old.sock: stale socket (nothing listens on it)",
    ]
    assert len(r.stdout.splitlines()) == 6  # the header, the four resources and the DRA driver
    plugins = by(devctl(sim_node.root, "plugins", "-o", "json", timeout=0.5).json["plugins"], "socket")
    assert plugins[f"{d}/old.sock"]["status"] == "stale" and plugins[f"{d}/old.sock"]["resource"] is None
    assert plugins[f"{d}/hung.sock"]["status"] == "timeout"
    assert plugins[f"{d}/nvidia-gpu.sock"]["status"] == "serving"


def write_checkpoint_file(directory: Path, doc) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "kubelet_internal_checkpoint"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_a_corrupt_checkpoint(default_node, tmp_path):
    write_checkpoint_file(tmp_path, '{"Data": {"PodDeviceEntries": [{"PodUID": ')
    args = ["--plugins-dir", str(tmp_path)]
    r = devctl(default_node.root, *args, "checkpoint")
    # The node's other checkpoint, dra_manager_state, still reads: it is shown, the broken one is a warning.
    assert r.exit_code == 0 and r.stdout.startswith("dra_manager_state: format v1, checksum ok")
    (warning,) = r.stderr.splitlines()
    assert warning.startswith(f"warning: checkpoint: {tmp_path}/kubelet_internal_checkpoint: ")
    ls = devctl(default_node.root, *args, "ls", "-o", "json")
    assert ls.exit_code == 0  # pod-resources still answers
    assert [e["source"] for e in ls.json["errors"]] == ["checkpoint"]
    assert {r["name"] for r in ls.json["resources"]} == {GPU, NIC, FOO, SHARED, DRA}
    plugins = devctl(default_node.root, *args, "plugins", "-o", "json").json
    assert plugins["checkpoint"] == {
        "path": f"{tmp_path}/kubelet_internal_checkpoint",
        "present": True,
        "checksum_ok": None,
    }


VECTORS = shared("checkpoints")


@needs_shared("checkpoints")
@pytest.mark.parametrize(
    ("name", "entries", "envs"),
    [
        ("single-gpu-no-pods.json", 0, None),
        ("tegra-one-pod.json", 1, {"NVIDIA_VISIBLE_DEVICES": "tegra"}),
        ("kubelet-1.32-empty-allocresp.json", 1, {}),
        ("kubelet-1.32-env-numa0.json", 1, {"WIDGET_VISIBLE": "w-0"}),
    ],
)
def test_the_shared_checkpoint_vectors(short_root, name, entries, envs):
    plugins_dir = short_root / "dp"
    plugins_dir.mkdir()
    shutil.copy(VECTORS / name, plugins_dir / "kubelet_internal_checkpoint")
    r = devctl(short_root, "--plugins-dir", str(plugins_dir), "checkpoint", "-o", "json")
    assert r.exit_code == 0  # pod-resources is missing, but the checkpoint is what this command shows
    doc = r.json
    assert (doc["format"], doc["checksum_ok"]) == ("v2", True)
    assert len(doc["entries"]) == entries
    if entries:
        (entry,) = doc["entries"]
        assert entry["allocation"]["envs"] == envs
        assert entry["stale"] is True  # no pod on this node has that UID
    sources = [e["source"] for e in doc["errors"]]
    assert "pod-resources" in sources and "checkpoint" not in sources


def test_a_checksum_mismatch_is_a_finding_not_a_failure(default_node, tmp_path):
    doc = json.loads(Path(default_node.paths.checkpoint).read_text())
    doc["Checksum"] += 1
    write_checkpoint_file(tmp_path, doc)
    r = devctl(default_node.root, "--plugins-dir", str(tmp_path), "checkpoint")
    assert r.exit_code == 0
    assert "checksum:   MISMATCH" in r.stdout


def test_an_old_format_checkpoint(default_node, tmp_path):
    data = {
        "PodDeviceEntries": [
            {
                "PodUID": "uid-old",
                "ContainerName": "cuda",
                "ResourceName": GPU,
                "DeviceIDs": ["GPU-a", "GPU-b"],
                "AllocResp": base64.b64encode(b"\n\x08\n\x01A\x12\x03GPU").decode(),
            }
        ],
        "RegisteredDevices": {GPU: ["GPU-a", "GPU-b"]},
    }
    write_checkpoint_file(tmp_path, {"Data": data, "Checksum": fnv1a32(render_spew(data).encode())})
    r = devctl(default_node.root, "--plugins-dir", str(tmp_path), "checkpoint", "-o", "json")
    assert r.exit_code == 0
    doc = r.json
    assert (doc["format"], doc["checksum_ok"]) == ("v1", True)
    (entry,) = doc["entries"]
    assert entry["device_ids"] == {"-1": ["GPU-a", "GPU-b"]}
    assert entry["allocation"]["envs"] == {"A": "GPU"}
    assert entry["stale"] is True and entry["pod"] is None  # no pod on this node has that UID
    table = devctl(default_node.root, "--plugins-dir", str(tmp_path), "checkpoint").stdout
    assert "format:     v1 (the flat DeviceIDs of Kubernetes <= 1.19)" in table


def test_a_pod_resources_reply_above_4_mib(short_root, background):
    sock = f"{short_root}/pr.sock"
    background(huge_pod_resources(sock, pods=5000))
    # Seconds of work on a loaded CI for 5,000 pods (server in another thread of this process): the receive
    # limit is tested here, not the default 5 s deadline.
    r = invoke("--root", str(short_root), "--timeout", "30", "--pod-resources", sock, "pods", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert len(json.loads(r.stdout)["pods"]) == 5000


def test_a_v1alpha1_only_kubelet():
    scenario = dataclasses.replace(default_scenario(), kubelet=KubeletOptions(api="v1alpha1"))
    with sim_root(scenario) as node:
        ls = devctl(node.root, "ls", "-o", "json")
        pods = devctl(node.root, "pods", "-o", "json")
        got = devctl(node.root, "get", "train-1", "-n", "ml", "-o", "json")
    assert ls.exit_code == 0
    (error,) = ls.json["errors"]
    assert error["source"] == "pod-resources" and "v1alpha1 only" in error["message"]
    gpu = by(ls.json["resources"], "name")[GPU]
    assert (gpu["capacity"], gpu["allocated"]) == (8, 6)  # the plugin's list, v1alpha1's allocations
    train = {p["name"]: p for p in pods.json["pods"]}["train-0"]
    assert train["containers"][0]["cpu_ids"] == [] and len(train["containers"][0]["devices"][0]["ids"]) == 4
    assert got.exit_code == 0 and got.json["containers"][0]["devices"][0]["ids"] == ["GPU-4", "GPU-6"]


# --- real processes -------------------------------------------------------------------------------------


def test_ls_as_a_process(default_node):
    p = run_devctl("ls", "-o", "json", root=default_node.root)
    assert p.exit_code == 0 and p.stderr == ""
    assert {r["name"] for r in json.loads(p.stdout)["resources"]} == {GPU, NIC, FOO, SHARED, DRA}


def test_ls_does_not_import_textual(short_root):
    code = (
        "import sys, json\nfrom devctl.cli.app import main\nsys.argv = ['devctl', 'ls']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DEVCTL_ROOT": str(short_root)},
    )
    assert json.loads(p.stdout.splitlines()[-1]) == []


@contextlib.asynccontextmanager
async def open_plugin(plugins_dir: str):
    """A plugin whose socket anyone may connect to, as a third-party plugin's may be (devctl's own is 0600)."""
    server = DevicePluginServer(
        PluginSpec("example.com/open", (Device("open-0"),), "open.sock"), plugins_dir, register=False
    )
    await server.start()
    os.chmod(server.socket_path, 0o777)  # a mode change is no new socket: the plugin serves on
    try:
        yield server
    finally:
        await server.stop()


def test_permission_denied_as_an_unprivileged_user(sim_node, background):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    root, d = sim_node.root, sim_node.paths.plugins_dir
    os.chmod(root, 0o755)  # the directories are open; the kubelet's sockets and checkpoint are root's only
    # Every source refuses: the sockets' names are listed, but nothing was read.
    assert run_devctl("ls", "-o", "json", root=root, as_nobody=True).exit_code == 3
    background(open_plugin(d))
    p = run_devctl("plugins", "-o", "json", root=root, as_nobody=True)
    assert p.exit_code == 0, p.stderr
    doc = json.loads(p.stdout)
    plugins = by(doc["plugins"], "socket")
    gpu = plugins[f"{d}/nvidia-gpu.sock"]
    assert (gpu["status"], gpu["error"]) == ("permission-denied", f"{d}/nvidia-gpu.sock: permission denied")
    assert plugins[f"{d}/open.sock"]["status"] == "serving" and plugins[f"{d}/open.sock"]["devices"] == 1
    errors = {(e["source"], e["message"]) for e in doc["errors"]}
    assert ("plugin", f"{d}/nvidia-gpu.sock: permission denied") in errors
    assert ("pod-resources", f"{sim_node.paths.pod_resources}: permission denied") in errors
    assert ("checkpoint", f"{sim_node.paths.checkpoint}: permission denied") in errors
    pods = run_devctl("pods", root=root, as_nobody=True)
    assert pods.exit_code == 3
    assert pods.stderr.splitlines() == [f"devctl: {NO_RIGHTS}"]


READ_COMMANDS = [
    ["ls"],
    ["devices"],
    ["pods"],
    ["get", "train-0", "-n", "ml"],
    ["topo"],
    ["plugins"],
    ["checkpoint"],
    ["snapshot"],
    ["claims"],
    ["cdi"],
    ["who"],
    ["doctor"],
    ["watch", "--duration", "3"],  # as root first (helpers.AS_NOBODY), so not for ever
    ["watch", "--once"],
    ["call", "--dra", "gpu.example.com", "info"],
]


def test_without_rights_every_read_command_says_run_as_root_once(sim_node):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    os.chmod(sim_node.root, 0o755)  # the directories are open; the kubelet's sockets and checkpoint are root's only
    for args in [*READ_COMMANDS, ["ls", "-o", "json"], ["topo", "-o", "json"]]:
        p = run_devctl(*args, root=sim_node.root, as_nobody=True)
        assert p.exit_code == 3, (args, p.stdout, p.stderr)
        (line,) = [line for line in p.stderr.splitlines() if "permission denied" in line]
        assert line.endswith("run as root (e.g. kubectl debug node/NAME -it --profile=sysadmin --image=IMAGE)")
        assert not [line for line in p.stderr.splitlines() if line.startswith("warning:") and "denied" in line]


# --- unknown is not zero ---------------------------------------------------------------------------


def test_with_pod_resources_rate_limited_who_holds_what_is_unknown_not_zero(sim_node, background, short_root):
    limited = f"{short_root}/pr.sock"
    background(rate_limited_pod_resources(limited))
    args = ("--pod-resources", limited)
    ls = devctl(sim_node.root, *args, "ls", "-o", "json")
    assert ls.exit_code == 0  # the plugins and the checkpoint answered
    gpu = by(ls.json["resources"], "name")[GPU]
    assert (gpu["capacity"], gpu["allocatable"], gpu["unhealthy"]) == (8, 7, 1)  # the plugin's word
    assert (gpu["allocated"], gpu["free"]) == (None, None)  # not 0 allocated, 7 free
    errors = [e for e in ls.json["errors"] if e["source"] == "pod-resources"]
    assert len(errors) == 2  # List and GetAllocatableResources, each after the client's backoff
    assert all(e["kind"] == "rate-limited" and "rate limit" in e["message"] for e in errors)
    table = devctl(sim_node.root, *args, "ls")
    row = next(r.split() for r in table.stdout.splitlines() if r.startswith(GPU))
    assert row[2:7] == ["8", "7", "?", "?", "1"]
    assert "warning: pod-resources:" in table.stderr
    devices = by(devctl(sim_node.root, *args, "devices", "-o", "json").json["devices"], "id")
    assert (devices["GPU-0"]["state"], devices["GPU-0"]["allocated_to"]) == (None, None)
    held = next(r.split() for r in devctl(sim_node.root, *args, "devices").stdout.splitlines() if " GPU-0 " in r)
    assert held[-1] == "?"  # ALLOCATED-TO
    topo = devctl(sim_node.root, *args, "topo", "-o", "json").json
    (n0,) = [n for n in topo["numa_nodes"] if n["id"] == 0]
    assert n0["devices"][GPU] == {"total": 4, "allocated": None, "free": None, "total_min": None}
    assert ["0", GPU, "4", "?", "?"] in [r.split() for r in devctl(sim_node.root, *args, "topo").stdout.splitlines()]


def test_a_stopped_plugins_capacity_is_at_least_what_the_checkpoint_names(sim_node):
    async def stop_gpu(node):
        await node.plugins[GPU].stop()

    sim_node.call(stop_gpu)  # 8 GPUs, GPU-5 unhealthy: the kubelet keeps all 8 for 5 minutes
    gpu = by(devctl(sim_node.root, "ls", "-o", "json").json["resources"], "name")[GPU]
    assert (gpu["status"], gpu["capacity"], gpu["capacity_min"]) == ("no-plugin", None, 7)
    assert (gpu["allocatable"], gpu["unhealthy"]) == (0, None)  # the kubelet: nothing allocatable, now
    table = devctl(sim_node.root, "ls").stdout
    row = next(r.split() for r in table.splitlines() if r.startswith(GPU))
    assert row[1:4] == ["no-plugin", "≥7", "0"]
    assert "the kubelet keeps a stopped plugin's devices for 5 minutes" in table
    assert "5 minutes" not in devctl(sim_node.root, "ls", "--no-headers").stdout


def test_kubectl_habits_sort_by_o_name_and_all_namespaces(default_node):
    root = default_node.root
    # --sort-by a key of the JSON rows (kubectl's {.field} too); unknown values last
    by_free = devctl(root, "ls", "--sort-by", "free", "-o", "json").json["resources"]
    assert [r["free"] for r in by_free] == sorted(r["free"] for r in by_free)
    assert devctl(root, "ls", "--sort-by", "{.free}", "-q").stdout == "".join(f"{r['name']}\n" for r in by_free)
    pods = devctl(root, "pods", "--sort-by", "name", "-o", "json").json["pods"]
    assert [p["name"] for p in pods] == sorted(p["name"] for p in pods)
    bad = devctl(root, "devices", "--sort-by", "nope")
    assert bad.exit_code == 2 and "--sort-by nope: no such field; one of " in bad.stderr
    # a column as the table heads it: FREE, and ls's short USED for allocated
    assert devctl(root, "ls", "--sort-by", "FREE", "-q").stdout == "".join(f"{r['name']}\n" for r in by_free)
    by_used = devctl(root, "ls", "--sort-by", "USED", "-o", "json").json["resources"]
    assert [r["allocated"] for r in by_used] == sorted(r["allocated"] for r in by_used)
    # -o name is -q; -A is every namespace, the default
    for command in ("ls", "devices", "pods"):
        assert devctl(root, command, "-o", "name").stdout == devctl(root, command, "-q").stdout != ""
    assert devctl(root, "get", "ml/train-0", "-o", "name").stdout == "ml/train-0\n"
    assert devctl(root, "pods", "-A").stdout == devctl(root, "pods").stdout
    assert devctl(root, "pods", "-A", "-n", "ml").exit_code == 2


def test_numa_unknown_is_none_in_tables_and_topo_without_headers_has_no_blank_line(default_node):
    root = default_node.root
    topo = devctl(root, "topo").stdout.splitlines()
    # the devices no NUMA node is known for, in the table of devices per node
    assert ["<none>", FOO, "2", "1", "1"] in [line.split() for line in topo]
    assert not any(line.split()[0] == "-1" for line in topo if line.strip())
    bare = devctl(root, "topo", "--no-headers").stdout.splitlines()
    assert bare and "" not in bare
    wide = devctl(root, "checkpoint", "-o", "wide").stdout.splitlines()
    foo = [line.split() for line in wide if FOO in line.split()]
    assert foo and foo[-1][6] == "<none>"  # NUMA, after STALE
