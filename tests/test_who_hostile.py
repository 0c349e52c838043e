"""`devctl who` and its doctor checks on a hostile or half-readable node: no accusation without evidence.

A device node's host path from the node never leads devctl to a file of its own machine; a process whose pod
devctl cannot name is an unknown holder, never one to stop; a scan of ``<proc>`` obeys the command's deadline
and an incomplete one claims nothing about who does not hold a device.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest
import yaml
from helpers import devctl

from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import running_sim
from devctl.model import ErrorKind
from devctl.node.procs import Watch, scan

GPU = "nvidia.com/gpu"


def _default() -> dict:
    return yaml.safe_load(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())


# --- host paths that climb out of the root (issue 28, item 7) -------------------------------------


@pytest.mark.parametrize("how", ["dotdot", "symlink"])
def test_a_host_path_leading_out_of_the_root_is_never_stated_on_this_machine(tmp_path, how):
    # GIVEN a root whose device node climbs out of it, by `..` or by a symlink to this machine's /dev/null,
    # and a real child process holding this machine's /dev/null open
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    if how == "dotdot":
        host_path = "/" + "../" * (len(root.parts) + 2) + "dev/null"
    else:
        host_path = "/dev/gpu0"
        os.symlink("/dev/null", root / "dev" / "gpu0")
    code = "import sys; f = open('/dev/null', 'rb'); print('open', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        # WHEN the real /proc is scanned for that node
        watch = Watch.of([host_path], str(root))
        result, _ = scan("/proc", watch)
    finally:
        child.kill()
        child.wait()
    # THEN nothing of this machine was looked at: the child holds no device of the node
    assert watch.rdevs == {}
    assert result is not None and child.pid not in {p.pid for p in result.processes}


def test_a_cdi_host_path_out_of_the_root_accuses_no_process(short_root):
    # GIVEN the default node, whose GPU-0 Allocate reply carries the CDI name nvidia.com/gpu=GPU-0, and a CDI
    # spec giving that device the host path /../../dev/null (every simulated process holds /dev/null at fd 0)
    spec = {
        "cdiVersion": "0.6.0",
        "kind": GPU,
        "devices": [
            {
                "name": "GPU-0",
                "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/../../dev/null"}]},
            }
        ],
    }
    with running_sim(short_root, parse_scenario(_default())):
        (short_root / "etc" / "cdi").mkdir(parents=True, exist_ok=True)
        (short_root / "etc" / "cdi" / "nvidia.yaml").write_text(yaml.safe_dump(spec))
        # WHEN who and doctor look at GPU-0
        who = devctl(short_root, "who", "GPU-0", "-o", "json")
        doctor = devctl(short_root, "doctor", "-o", "json")
    # THEN only the container given GPU-0 holds it, and doctor tells no one to stop a process
    assert who.exit_code == 0, who.stderr
    assert {(h["pid"], h["container"], h["allocated"]) for h in who.json["holders"]} == {(1000, "trainer", True)}
    codes = {f["code"] for f in doctor.json["findings"]}
    assert not codes & {"device-used-not-allocated", "device-used-outside-pods"}


# --- a holder devctl cannot place (issue 28, item 9) --------------------------------------------------

CID = "c" * 64


def _pod_process(proc: Path) -> None:
    """One process of a pod's container (its cgroup names the container, not the pod) holding foo-0's node."""
    d = proc / "4242"
    (d / "fd").mkdir(parents=True)
    (d / "cmdline").write_bytes(b"python\0train.py\0")
    (d / "cgroup").write_text(f"0::/kubepods/besteffort/{CID}\n")
    os.symlink("/dev/foo-0", d / "fd" / "3")


def test_without_the_runtime_a_holder_in_no_known_pod_is_unknown_never_told_to_stop(sim_node, tmp_path):
    # GIVEN a pod's process devctl cannot place: the CRI runtime cannot be read, its cgroup names no pod
    _pod_process(tmp_path / "proc")
    args = ("--proc", str(tmp_path / "proc"), "--runtime-endpoint", str(tmp_path / "no.sock"))
    # WHEN who and doctor look at who holds foo-0
    who = devctl(sim_node.root, *args, "who", "foo-0", "-o", "json")
    table = devctl(sim_node.root, *args, "who", "foo-0")
    doctor = devctl(sim_node.root, *args, "doctor", "-o", "json")
    # THEN its ALLOCATED is unknown (never "no"), who says why in one line, and doctor tells no one to stop it
    assert who.exit_code == 0, who.stderr
    assert [(h["pid"], h["pod"], h["allocated"]) for h in who.json["holders"]] == [(4242, None, None)]
    assert table.stdout.splitlines()[1].split()[-1] == "?"
    assert "devctl: pid 4242: in which pod, if any, is unknown (the CRI runtime could not be read)" in table.stderr
    findings = {f["code"]: f for f in doctor.json["findings"]}
    assert "device-used-outside-pods" not in findings and "device-used-not-allocated" not in findings
    assert "stop" not in findings["device-holder-unknown"]["hint"].replace("asks no one to stop it", "")
    assert findings["device-holder-unknown"]["subject"] == "pid 4242"


def test_with_the_runtime_a_holder_in_no_running_container_is_still_reported(sim_node, tmp_path):
    # GIVEN the same process, and the runtime readable: it lists every running container, and not this one
    _pod_process(tmp_path / "proc")
    # WHEN doctor runs, THEN the process is one left behind, outside any running pod (evidence: the runtime)
    doctor = devctl(sim_node.root, "--proc", str(tmp_path / "proc"), "doctor", "-o", "json")
    [finding] = [f for f in doctor.json["findings"] if f["subject"] == "pid 4242"]
    assert finding["code"] == "device-used-outside-pods"


# --- the <proc> scan under the command's deadline (issue 28, item 11) ---------------------------------


def _slow_proc(proc: Path, count: int, fds: int) -> None:
    """``count`` processes whose ``fd/`` is one shared directory of ``fds`` links (cheap to make, as slow to read
    as ``count * fds`` links): without a deadline their scan takes minutes."""
    shared = proc.parent / "fds"
    shared.mkdir(parents=True)
    for fd in range(fds):
        os.symlink(f"pipe:[{fd}]", shared / str(fd))
    for pid in range(1, count + 1):
        (proc / str(pid)).mkdir(parents=True)
        os.symlink(shared, proc / str(pid) / "fd")


@pytest.mark.parametrize("count", [2000, 9000], ids=["caller-alone", "with-a-worker"])
def test_the_scan_stops_at_its_deadline_and_says_how_far_it_got(tmp_path, count):
    # GIVEN a <proc> whose full scan takes minutes (2,000 or 9,000 processes of 20,000 fds each)
    _slow_proc(tmp_path / "proc", count, 20_000)
    # WHEN it is scanned within 1 s
    started = time.monotonic()
    result, errors = scan(str(tmp_path / "proc"), Watch.of(["/dev/nvidia0"], str(tmp_path)), timeout=1.0)
    elapsed = time.monotonic() - started
    # THEN it ends soon after (a generous bound: it does not run on), says how many of how many it read,
    # and counts only those
    assert elapsed < 15
    assert result is not None and 0 < result.scanned < count
    [error] = errors
    assert error.kind == ErrorKind.TIMEOUT
    assert f"scanned {result.scanned} of {count} processes before the deadline" in error.message


def test_an_incomplete_scan_claims_no_one_holds_a_device(sim_node, tmp_path):
    # GIVEN the default node, whose containers' processes are among 2,000 that take minutes to scan
    _slow_proc(tmp_path / "proc", 2000, 20_000)
    args = ("--proc", str(tmp_path / "proc"))
    # WHEN who, devices and doctor run with a 1 s deadline
    started = time.monotonic()
    who = devctl(sim_node.root, *args, "who", timeout=1.0)
    wide = devctl(sim_node.root, *args, "devices", GPU, "-o", "wide", timeout=1.0)
    doctor = devctl(sim_node.root, *args, "doctor", "-o", "json", timeout=1.0)
    # THEN each finishes (a generous bound), who says how far the scan got, no device has 0 holders (unknown: ?)
    # and doctor calls no container idle
    assert time.monotonic() - started < 60
    assert who.exit_code == 0, who.stderr
    assert "processes before the deadline" in who.stderr and " of 2000 processes" in who.stderr
    procs = [line.split()[-1] for line in wide.stdout.splitlines()[1:]]
    assert procs and set(procs) == {"?"}
    codes = {f["code"] for f in doctor.json["findings"]}
    assert "allocated-device-idle" not in codes
    [scan_finding] = [f for f in doctor.json["findings"] if f["subject"] == "procs"]
    assert "longer --timeout" in scan_finding["hint"]


# --- DRA health messages (issue 28, two items of 10) ---------------------------------------------------


def test_a_health_message_naming_a_device_three_times_counts_it_once(sim_node):
    import asyncio
    from dataclasses import replace

    from devctl.analyze.inventory import devices_view, resources_view
    from devctl.core.collect import collect

    # GIVEN the DRA driver's health message, with its first device listed twice more
    snap = asyncio.run(collect(sim_node.paths, 2.0))
    [probe] = [p for p in snap.plugins if p.dra is not None and p.dra.health]
    driver = probe.registry.name
    health = probe.dra.health
    tripled = replace(probe, dra=replace(probe.dra, health=(*health, health[0], health[0])))
    snap = replace(snap, plugins=tuple(tripled if p is probe else p for p in snap.plugins))
    # WHEN ls and devices count its devices, THEN they agree: each device once
    [row] = [r for r in resources_view(snap) if r.name == driver]
    devices = [d for d in devices_view(snap) if d.resource == driver]
    assert row.capacity == len(devices) == len({(h.pool, h.device) for h in health})
    assert row.allocatable == sum(d.health == "Healthy" for d in devices)


def test_call_dra_health_shows_a_timestamp_beyond_any_date_as_sent():
    from devctl.cli.call_dra import DraCallResult, dra_table
    from devctl.model import DraDeviceHealth
    from devctl.render.table import TableStyle

    # GIVEN a driver's health reply whose last update is 2^63-1 seconds
    reply = {"devices": [DraDeviceHealth("pool", "gpu-0", "Healthy", last_updated=2**63 - 1)]}
    result = DraCallResult("gpu.example.com", "/x.sock", {}, reply, 1.0, "NodeWatchResources")
    # WHEN it is shown, THEN the row shows the number (no crash)
    table = dra_table(result, TableStyle())
    assert str(2**63 - 1) in table and "pool/gpu-0" in table
