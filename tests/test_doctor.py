"""``devctl doctor`` on simulated nodes made sick on purpose, and ``devctl.analyze.doctor`` on snapshots.

Each node problem is made for real (a dead socket file, a hung or babbling
plugin, a changed checkpoint, a device that goes bad under a running
container, a plugin that stops) and the finding a person would act on is
checked field by field, with the exit code. The few conditions a simulator
cannot make on cue (the kubelet's rate limit) are checked on a snapshot.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import time
from pathlib import Path

import pytest
import yaml
from badservers import GARBAGE, hung_server, malformed_plugin, newest_stream_only_plugin, stale_socket
from helpers import devctl, run_devctl, run_devctl_async

from devctl.analyze import POD_RESOURCES
from devctl.analyze.doctor import diagnose, fails_on
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.lab.sim.scenario import KubeletOptions, default_scenario, parse_scenario
from devctl.lab.sim.thread import SimHandle, running_sim
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    Device,
    ErrorKind,
    Finding,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    SocketStatus,
    SourceError,
)
from devctl.node.checkpoint import fnv1a32, render_spew
from devctl.node.deviceplugin import DevicePluginClient, register
from devctl.node.paths import resolve_paths
from devctl.node.podresources import PodResourcesClient

GPU, NIC, FOO = "nvidia.com/gpu", "intel.com/sriov_netdevice", "hardware-vendor.example/foo"
FIELDS = ["severity", "code", "subject", "message", "hint"]
# The default node's DRA driver has gpu-3 unhealthy under the running ml/train-1 (docs/dra.md): an error of its own.
PLANTED = ("error", "dra-device-unhealthy-in-use", "gpu.example.com/sim-node/gpu-3")


def doctor(root: Path | str, *args: str, timeout: float = 2.0):
    return devctl(root, "doctor", *args, timeout=timeout)


def findings(result) -> list[dict]:
    doc = result.json
    assert list(doc) == ["findings", "errors"]
    for f in doc["findings"]:
        assert list(f) == FIELDS and all(isinstance(f[k], str) and f[k] for k in FIELDS), f
    return doc["findings"]


def others(result) -> list[dict]:
    """The findings but the default node's planted DRA one."""
    return [f for f in findings(result) if (f["severity"], f["code"], f["subject"]) != PLANTED]


def codes(result) -> list[tuple[str, str, str]]:
    """(severity, code, subject) of each finding, in the order printed."""
    return [(f["severity"], f["code"], f["subject"]) for f in findings(result)]


def edit_checkpoint(sim: SimHandle, change) -> Path:
    """Rewrite the simulated node's checkpoint in place: ``change(doc)`` edits the parsed JSON."""
    path = Path(sim.paths.checkpoint)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return path


def seal(doc: dict) -> None:
    """Give a checkpoint the checksum the kubelet would compute for its Data."""
    doc["Checksum"] = fnv1a32(render_spew(doc["Data"]).encode())


# --- the default scenario -----------------------------------------------------------------------------


def test_the_default_node_has_one_unhealthy_gpu_and_one_misaligned_pod(sim_node: SimHandle):
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1, r.stderr
    assert r.json["errors"] == []
    # embed-0's DRA GPU (gpu-0, NUMA 0, through its CDI device node) is across from its CPUs (NUMA 1).
    # (the time-sliced GPU-8's physical-shared note is tests/test_doctor_physical.py's, the stuck ml/train-0's
    # device-container-waiting tests/test_doctor_pods.py's)
    others = ("physical-shared", "device-container-waiting")
    planted, unhealthy, embed, misaligned = [f for f in findings(r) if f["code"] not in others]
    assert (embed["code"], embed["subject"]) == ("numa-misaligned", "inference/embed-0/embedder")
    assert (planted["severity"], planted["code"], planted["subject"]) == PLANTED
    assert unhealthy == {
        "severity": "warning",
        "code": "unhealthy-devices",
        "subject": GPU,
        "message": "1 of 8 device(s) unhealthy: GPU-5",
        "hint": unhealthy["hint"],
    }
    assert "allocates them to no one" in unhealthy["hint"]
    assert misaligned == {
        "severity": "warning",
        "code": "numa-misaligned",
        "subject": "inference/serve-0/server",
        "message": "devices on NUMA 0; exclusive CPUs on NUMA 1; memory on NUMA 1",
        "hint": misaligned["hint"],
    }
    assert "--topology-manager-policy=single-numa-node" in misaligned["hint"]


def finding_rows(lines: list[str]) -> list[str]:
    """The rows of doctor's table: the lines not indented under one."""
    return [line for line in lines if not line.startswith(" ")]


def under_rows(lines: list[str]) -> list[str]:
    """What is written under each row (message, then ``hint: …``), its wrapped lines joined again."""
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith(" "):
            blocks[-1].append(line.strip())
        else:
            blocks.append([])
    return [" ".join(b) for b in blocks]


def test_table_wide_yaml_and_fail_on(sim_node: SimHandle):
    r = doctor(sim_node.root)
    assert (r.exit_code, r.stderr) == (1, "")  # the default node plants an unhealthy DRA device in use: an error
    header, *lines = r.stdout.splitlines()
    assert header.split() == ["SEVERITY", "CODE", "SUBJECT"]
    # each finding's message and hint are the indented lines under it, by default (issue 10, item 3)
    rows = finding_rows(lines)
    assert [row.split()[:3] for row in rows] == [
        list(PLANTED),
        ["warning", "unhealthy-devices", GPU],
        ["warning", "numa-misaligned", "inference/embed-0/embedder"],
        ["warning", "numa-misaligned", "inference/serve-0/server"],
        ["warning", "device-container-waiting", "ml/train-0"],  # its CDI spec is gone: the runtime cannot start it
        ["info", "physical-shared", "0000:cc:00.0"],  # chat/bot-0 and bot-1 on replicas of GPU-8
    ]
    as_json = findings(doctor(sim_node.root, "-o", "json"))
    assert under_rows(lines) == [f"{f['message']} hint: {f['hint']}" for f in as_json]
    assert under_rows(lines)[1].startswith("1 of 8 device(s) unhealthy: GPU-5 hint:")
    assert all(len(line) <= 80 for line in lines[1:]) and max(map(len, lines)) > 60  # wrapped at 80, not cut
    assert doctor(sim_node.root, "-o", "name").stdout.splitlines() == [f"{f['code']}/{f['subject']}" for f in as_json]
    wide = doctor(sim_node.root, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["SEVERITY", "CODE", "SUBJECT", "MESSAGE", "HINT"]
    assert wide[1].endswith(findings(doctor(sim_node.root, "-o", "json"))[0]["hint"])
    assert [line.split() for line in doctor(sim_node.root, "--no-headers").stdout.splitlines()] == [
        line.split() for line in lines
    ]
    as_yaml = yaml.safe_load(doctor(sim_node.root, "-o", "yaml").stdout)
    assert as_yaml == doctor(sim_node.root, "-o", "json").json
    assert doctor(sim_node.root, "--fail-on", "warning").exit_code == 1
    assert doctor(sim_node.root, "--fail-on", "bogus").exit_code == 2


def test_a_snapshot_file_gets_the_same_findings(sim_node: SimHandle, tmp_path: Path):
    snap = tmp_path / "node.json"
    assert devctl(sim_node.root, "snapshot", "-f", str(snap)).exit_code == 0
    from_file = devctl(sim_node.root, "--from", str(snap), "doctor", "-o", "json")
    assert from_file.exit_code == 1
    live = doctor(sim_node.root, "-o", "json").json
    # Only what doctor reads of the live node beside the snapshot is missing from the file's findings: the
    # runtime's reason for a container it keeps from starting (devctl.core.doctor).
    live_only = [f for f in live["findings"] if f["code"] == "device-container-waiting"]
    assert [f["subject"] for f in live_only] == ["ml/train-0"]
    assert from_file.json == {**live, "findings": [f for f in live["findings"] if f not in live_only]}


def test_a_healthy_node_has_no_problems(short_root: Path):
    scenario = parse_scenario(
        {
            "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "1Gi"}],
            "resources": [{"name": "example.com/dev", "count": 2, "numa": [0, 0]}],
            "pods": [{"name": "p", "containers": [{"name": "c", "requests": {"example.com/dev": 1}}]}],
        }
    )
    with running_sim(short_root, scenario) as node:
        r = doctor(node.root)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "No problems found.\n")


# --- sockets ----------------------------------------------------------------------------------------------


def test_stale_hung_and_malformed_sockets_are_errors(sim_node: SimHandle, background):
    d = sim_node.paths.plugins_dir
    stale_socket(f"{d}/old.sock")
    background(hung_server(f"{d}/hung.sock"))
    background(malformed_plugin(f"{d}/bad.sock"))
    start = time.monotonic()
    r = doctor(sim_node.root, "-o", "json", timeout=0.5)
    assert time.monotonic() - start < 0.5 + 1
    assert r.exit_code == 1
    found = {f["code"]: f for f in findings(r)}
    assert codes(r)[:3] == [
        ("error", "plugin-malformed", f"{d}/bad.sock"),
        ("error", "plugin-timeout", f"{d}/hung.sock"),
        ("error", "stale-socket", f"{d}/old.sock"),
    ]
    assert found["stale-socket"]["message"] == (
        "a socket file with nothing listening on it: its plugin died without removing it"
    )
    assert "restart the plugin's pod" in found["stale-socket"]["hint"]
    assert "remove the file" in found["stale-socket"]["hint"]
    assert (
        found["plugin-timeout"]["message"]
        == f"{d}/hung.sock GetDevicePluginOptions: no answer after 0.5s (deadline exceeded)"
    )
    assert found["plugin-malformed"]["message"].endswith("it does not speak the v1beta1 DevicePlugin API")
    # The rest of the node is still checked, and every source error is in "errors" too.
    assert {"unhealthy-devices", "numa-misaligned"} <= set(found)
    assert sorted(e["message"].split(" ")[0].rstrip(":") for e in r.json["errors"]) == [
        f"{d}/bad.sock",
        f"{d}/hung.sock",
        f"{d}/old.sock",
    ]
    # A table needs no warning lines: each of those errors is a finding.
    table = doctor(sim_node.root, timeout=0.5)
    assert table.exit_code == 1 and table.stderr == ""
    assert [line.split()[:2] for line in finding_rows(table.stdout.splitlines()[1:])[:3]] == [
        ["error", "plugin-malformed"],
        ["error", "plugin-timeout"],
        ["error", "stale-socket"],
    ]


def serve(directory: str, socket: str, resource: str, ids: list[str]):
    """A plugin that serves ``ids`` on ``socket`` without registering (a debug plugin beside the real one)."""
    spec = PluginSpec(resource, tuple(Device(i, numa_nodes=(0,)) for i in ids), socket)
    return DevicePluginServer(spec, directory, register=False)


def test_a_second_plugin_of_a_resource_and_a_plugin_of_nothing_known(sim_node: SimHandle, background):
    d = sim_node.paths.plugins_dir
    background(serve(d, "gpu-debug.sock", GPU, [f"GPU-{i}" for i in range(8)]))
    background(serve(d, "mystery.sock", "example.com/mystery", ["m-0", "m-1"]))
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    found = {f["code"]: f for f in findings(r)}
    duplicate = found["duplicate-plugin"]
    assert (duplicate["severity"], duplicate["subject"]) == ("warning", GPU)
    assert duplicate["message"] == f"2 sockets serve it: {d}/gpu-debug.sock, {d}/nvidia-gpu.sock"
    unknown = found["unknown-resource"]
    assert (unknown["severity"], unknown["subject"]) == ("info", f"{d}/mystery.sock")
    assert unknown["message"] == "serves 2 device(s) whose IDs the kubelet does not tie to any one resource"
    assert "devctl call --socket" in unknown["hint"]
    assert codes(r)[-1][0] == "info"  # notes come last


def test_a_plugin_that_stopped_leaves_its_resource_without_a_plugin(sim_node: SimHandle):
    async def stop_foo(node):
        await node.plugins[FOO].stop()

    sim_node.call(stop_foo)
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    (no_plugin,) = [f for f in findings(r) if f["code"] == "no-plugin"]
    assert (no_plugin["severity"], no_plugin["subject"]) == ("error", FOO)
    assert no_plugin["message"] == (
        "no plugin socket serves it, yet the kubelet still uses it (1 device(s) held by running containers): "
        "pods that request it cannot start"
    )
    assert sim_node.paths.plugins_dir in no_plugin["hint"]


def test_a_resource_whose_plugin_may_be_a_hung_socket_says_so(sim_node: SimHandle, background):
    # GIVEN foo's plugin gone and a socket in the plugins dir that accepts and never answers (a plugin hung)
    async def stop_foo(node):
        await node.plugins[FOO].stop()

    sim_node.call(stop_foo)
    background(hung_server(f"{sim_node.paths.plugins_dir}/hung.sock"))
    # WHEN doctor runs
    r = doctor(sim_node.root, "-o", "json", timeout=0.5)
    # THEN foo has no *answering* plugin, and the hint names the socket that may be its plugin, hung
    (no_plugin,) = [f for f in findings(r) if f["code"] == "no-plugin"]
    assert no_plugin["message"].startswith("no answering plugin socket serves it, yet the kubelet still uses it")
    assert no_plugin["hint"].startswith("hung.sock did not answer: it may be this resource's plugin, hung; ")


# --- the plugin and the kubelet --------------------------------------------------------------------------

LAG = "example.com/lagging"


async def kubelet_offers(sim: SimHandle, resource: str) -> set[str]:
    async with PodResourcesClient(sim.paths.pod_resources, 2.0) as client:
        return {i for d in (await client.allocatable()).devices if d.resource == resource for i in d.ids}


async def test_a_plugin_whose_updates_miss_the_kubelets_stream_disagrees_with_it(sim_node: SimHandle):
    d = sim_node.paths.plugins_dir
    async with newest_stream_only_plugin(f"{d}/lagging.sock", [Device("lag-0"), Device("lag-1")]) as plugin:
        await register(sim_node.paths.kubelet_socket, "lagging.sock", LAG, PluginOptions())
        deadline = time.monotonic() + 10
        while await kubelet_offers(sim_node, LAG) != {"lag-0", "lag-1"}:
            assert time.monotonic() < deadline, "the simulated kubelet never listed the plugin's devices"
            await asyncio.sleep(0.05)
        # Someone else looks at the plugin: from now on its updates go to that stream only.
        async with DevicePluginClient(f"{d}/lagging.sock", 2.0) as client:
            assert len(await client.first_list()) == 2
        plugin.update([Device("lag-0"), Device("lag-1", "Unhealthy")])
        start = time.monotonic()
        r = await run_devctl_async("doctor", "-o", "json", root=sim_node.root)
        took = time.monotonic() - start
        assert await kubelet_offers(sim_node, LAG) == {"lag-0", "lag-1"}  # the kubelet never heard
    assert r.exit_code == 1, r.stderr
    (found,) = [f for f in findings(r) if f["code"] == "kubelet-plugin-disagree"]
    assert (found["severity"], found["subject"]) == ("error", LAG)
    assert found["message"] == (
        "the kubelet offers 1 device(s) its plugin does not list as healthy: lag-1 (still so 1s later)"
    )
    assert "one ListAndWatch stream only" in found["hint"] and f"{d}/lagging.sock" in found["hint"]
    assert took >= 1.0  # it did look twice


def disagreeing(healthy: list[str], offered: list[str]) -> NodeSnapshot:
    probe = PluginProbe(
        "/n/var/lib/kubelet/device-plugins/x.sock",
        PluginStatus.SERVING,
        "example.com/x",
        PluginOptions(),
        tuple(Device(i, "Healthy" if i in healthy else "Unhealthy") for i in ["x-0", "x-1", "x-2"]),
    )
    allocatable = AllocatableResources(devices=tuple(ContainerDevices("example.com/x", (i,)) for i in offered))
    return bare_snapshot(
        kubelet_socket_present=True,
        kubelet_socket_status=SocketStatus.LISTENING,
        plugins=(probe,),
        allocatable=allocatable,
        pods=(),
    )


def test_a_disagreement_counts_only_when_it_lasts():
    first = disagreeing(["x-0", "x-1"], ["x-0", "x-1", "x-2"])
    agreed = disagreeing(["x-0", "x-1"], ["x-0", "x-1"])  # the kubelet's update arrived in between
    assert "kubelet-plugin-disagree" not in [f.code for f in diagnose(first, agreed)]
    (lasting,) = [f for f in diagnose(first, first) if f.code == "kubelet-plugin-disagree"]
    assert lasting.severity == "error"
    # Healthy at the plugin, withheld by the kubelet: the other direction.
    withheld = disagreeing(["x-0", "x-1", "x-2"], ["x-0"])
    (other,) = [f for f in diagnose(withheld, withheld) if f.code == "kubelet-plugin-disagree"]
    assert other.message.startswith("the plugin lists 2 healthy device(s) the kubelet does not offer: x-1, x-2")
    # A snapshot file is one reading: said, not judged.
    (once,) = [f for f in diagnose(first) if f.code == "kubelet-plugin-disagree"]
    assert once.severity == "warning" and "cannot tell whether it lasts" in once.message


# --- the kubelet's own sockets -------------------------------------------------------------------------------


def test_sockets_the_kubelet_left_behind_are_stale_not_present(short_root: Path):
    paths = resolve_paths(root=str(short_root), env={})
    for directory in (paths.plugins_dir, os.path.dirname(paths.pod_resources)):
        os.makedirs(directory)
    stale_socket(paths.kubelet_socket)  # a kubelet that exited: it removes neither
    stale_socket(paths.pod_resources)
    r = doctor(short_root, "-o", "json")
    assert r.exit_code == 3  # nothing answered
    by_code = {f["code"]: f for f in findings(r)}
    kubelet, pod_resources = by_code["kubelet-socket-stale"], by_code["pod-resources-stale"]
    assert (kubelet["severity"], kubelet["subject"]) == ("error", paths.kubelet_socket)
    assert (pod_resources["severity"], pod_resources["subject"]) == ("error", paths.pod_resources)
    assert "kubelet-socket-missing" not in by_code
    for f in (kubelet, pod_resources):
        assert "the kubelet leaves its sockets on disk when it exits" in f["hint"]
    assert [e["kind"] for e in r.json["errors"] if e["source"] == "pod-resources"] == ["stale"]
    plugins = devctl(short_root, "plugins", "-o", "json").json
    assert plugins["kubelet_socket"] == {"path": paths.kubelet_socket, "present": True, "status": "stale"}
    table = devctl(short_root, "plugins").stdout
    assert "kubelet socket: present but stale (kubelet.sock)" in table


def test_a_live_kubelet_socket_is_listening(sim_node: SimHandle):
    plugins = devctl(sim_node.root, "plugins", "-o", "json").json
    assert plugins["kubelet_socket"]["status"] == "listening"


# --- devices ----------------------------------------------------------------------------------------------


def test_a_device_that_goes_bad_or_away_under_a_running_container(sim_node: SimHandle):
    sim_node.set_health(GPU, "GPU-0", "Unhealthy")
    sim_node.remove_device(GPU, "GPU-1")  # doctor asks the plugin itself: no wait for the kubelet
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    by_code = {f["code"]: f for f in findings(r)}
    assert codes(r)[:2] == [
        ("error", "unhealthy-allocated", f"{GPU}/GPU-0"),
        ("error", "device-missing", f"{GPU}/GPU-1"),
    ]
    # the message says neither the subject nor its own code again (issue 10, item 3)
    assert by_code["unhealthy-allocated"]["message"] == (
        "held by ml/train-0/trainer while its plugin reports it Unhealthy"
    )
    assert by_code["device-missing"]["message"] == "held by ml/train-0/trainer, but its plugin no longer lists it"
    # every unhealthy device counted, as ls counts them, the held one named as such
    assert by_code["unhealthy-devices"]["message"] == (
        "2 of 7 device(s) unhealthy: GPU-0, GPU-5 (1 of them still held: unhealthy-allocated)"
    )
    ls = devctl(sim_node.root, "ls", GPU, "-o", "json").json["resources"][0]
    assert ls["unhealthy"] == 2


# --- the checkpoint ---------------------------------------------------------------------------------------


def test_a_changed_checkpoint_is_a_checksum_error(sim_node: SimHandle):
    path = Path(sim_node.paths.checkpoint)
    raw = path.read_bytes()
    assert raw.count(b'"GPU-7"') == 1  # only in RegisteredDevices: no container holds it
    path.write_bytes(raw.replace(b'"GPU-7"', b'"GPU-8"'))
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    (mismatch,) = [f for f in others(r) if f["severity"] == "error"]
    assert (mismatch["code"], mismatch["subject"]) == ("checksum-mismatch", str(path))
    stored = json.loads(raw)["Checksum"]
    assert mismatch["message"].startswith(f"stored checksum {stored}, computed ")
    assert mismatch["message"].endswith("the kubelet will refuse the file at its next start and start empty")


def test_a_checkpoint_that_is_not_json_is_unreadable(sim_node: SimHandle):
    Path(sim_node.paths.checkpoint).write_text('{"Data": {"PodDeviceEntries": [{"PodUID": ')
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    (bad,) = [f for f in others(r) if f["severity"] == "error"]
    assert (bad["code"], bad["subject"]) == ("checkpoint-unreadable", sim_node.paths.checkpoint)
    assert bad["message"] == r.json["errors"][0]["message"]
    assert "drain the node" in bad["hint"]


def test_entries_of_gone_pods_and_an_undecodable_allocation(sim_node: SimHandle):
    def add_entries(doc):
        entries = doc["Data"]["PodDeviceEntries"]
        entries.append(
            {"PodUID": "0ld-p0d", "ContainerName": "cuda", "ResourceName": GPU,
             "DeviceIDs": {"1": ["GPU-7"]}, "AllocResp": ""}
        )  # fmt: skip
        entries.append(
            {**entries[0], "AllocResp": base64.b64encode(GARBAGE).decode()}
        )  # train-0's own entry, with an allocation the kubelet cannot decode
        seal(doc)

    edit_checkpoint(sim_node, add_entries)
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1, r.stdout  # warnings only but the planted DRA error: the kubelet copes with both
    by_code = {f["code"]: f for f in findings(r)}
    stale = by_code["stale-allocation"]
    assert (stale["severity"], stale["subject"]) == ("warning", "0ld-p0d/cuda")
    assert stale["message"] == f"pod 0ld-p0d no longer runs, but the checkpoint still gives it {GPU} GPU-7"
    assert "next allocation of nvidia.com/gpu" in stale["hint"]
    undecodable = by_code["alloc-undecodable"]
    assert (undecodable["severity"], undecodable["subject"]) == ("warning", "ml/train-0/trainer")
    assert undecodable["message"].startswith(f"the allocation of {GPU} cannot be decoded: ")
    assert "skips this entry" in undecodable["hint"]


def test_an_allocation_that_is_not_base64_loses_the_whole_file(sim_node: SimHandle):
    def break_entry(doc):
        doc["Data"]["PodDeviceEntries"][0]["AllocResp"] = "not base64!"

    edit_checkpoint(sim_node, break_entry)
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    (bad,) = [f for f in others(r) if f["severity"] == "error"]
    assert bad["code"] == "checkpoint-unreadable"
    assert bad["message"].endswith("the kubelet cannot decode the file and will start empty")
    assert "AllocResp is not base64" in bad["message"]
    assert "alloc-undecodable" not in [f["code"] for f in findings(r)]


def test_an_old_format_checkpoint(sim_node: SimHandle):
    def downgrade(doc):
        data = {
            "PodDeviceEntries": [
                {"PodUID": "uid-old", "ContainerName": "cuda", "ResourceName": GPU,
                 "DeviceIDs": ["GPU-7"], "AllocResp": ""}
            ],
            "RegisteredDevices": doc["Data"]["RegisteredDevices"],
        }  # fmt: skip
        doc.clear()
        doc.update({"Data": data})
        seal(doc)

    path = edit_checkpoint(sim_node, downgrade)
    r = doctor(sim_node.root, "-o", "json")
    assert r.exit_code == 1
    assert [c for c in codes(r) if c[1] in ("checkpoint-old-format", "stale-allocation")] == [
        ("warning", "checkpoint-old-format", str(path)),
        ("warning", "stale-allocation", "uid-old/cuda"),
    ]


# --- the kubelet and the host ------------------------------------------------------------------------------


def test_an_empty_root_is_a_kubelet_that_is_not_there_exit_3(short_root: Path):
    r = doctor(short_root, "-o", "json")
    assert r.exit_code == 3
    paths = resolve_paths(root=str(short_root), env={})
    assert codes(r) == [
        ("error", "kubelet-socket-missing", paths.kubelet_socket),
        ("error", "pod-resources-unreachable", paths.pod_resources),
        ("warning", "source-unreadable", "sysfs"),
    ]
    kubelet, pod_resources, _ = findings(r)
    assert kubelet["message"] == f"the device-plugins directory {paths.plugins_dir} does not exist"
    assert "systemctl status kubelet" in kubelet["hint"] and "--root" in kubelet["hint"]
    assert pod_resources["message"] == f"{paths.pod_resources}: no such socket"
    assert {e["source"] for e in r.json["errors"]} == {"plugins-dir", "pod-resources", "checkpoint", "sysfs"}
    table = doctor(short_root)
    assert table.exit_code == 3 and table.stderr == ""
    assert [line.split()[1] for line in finding_rows(table.stdout.splitlines()[1:])] == [
        "kubelet-socket-missing",
        "pod-resources-unreachable",
        "source-unreadable",
    ]


def test_a_v1alpha1_kubelet_limits_the_checks(short_root: Path):
    scenario = dataclasses.replace(default_scenario(), kubelet=KubeletOptions(api="v1alpha1"))
    with running_sim(short_root, scenario) as node:
        r = doctor(node.root, "-o", "json")
    assert r.exit_code == 1
    (limited,) = [f for f in findings(r) if f["code"] == "pod-resources-limited"]
    assert (limited["severity"], limited["subject"]) == ("warning", node.paths.pod_resources)
    assert "v1alpha1 only" in limited["message"]


def test_every_allocatable_cpu_held_exclusively(short_root: Path):
    scenario = parse_scenario(
        {
            "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "1Gi"}],
            "reserved_cpus": "0-1",
            "pods": [{"name": "greedy", "containers": [{"name": "c", "cpus": "2-3"}]}],
        }
    )
    with running_sim(short_root, scenario) as node:
        r = doctor(node.root, "-o", "json")
    assert r.exit_code == 0
    assert findings(r) == [
        {
            "severity": "warning",
            "code": "no-shared-cpus",
            "subject": "shared-pool",
            "message": "containers hold all 2 allocatable CPUs exclusively: every other container shares only "
            "the reserved CPUs",
            "hint": findings(r)[0]["hint"],
        }
    ]


def test_without_rights_doctor_gives_no_clean_bill_and_exits_3(sim_node: SimHandle):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    os.chmod(sim_node.root, 0o755)  # the directories are open; the kubelet's sockets and checkpoint are root's only
    p = run_devctl("doctor", "-o", "json", root=sim_node.root, as_nobody=True)
    assert p.exit_code == 3, p.stderr  # devctl could not look: no source, never a quiet 0
    (line,) = p.stderr.splitlines()
    assert "permission denied" in line and "run as root (e.g. kubectl debug node/NAME" in line
    found = json.loads(p.stdout)["findings"]
    denied = {f["subject"] for f in found if f["code"] == "permission-denied"}
    d = sim_node.paths.plugins_dir
    assert {
        sim_node.paths.kubelet_socket,
        sim_node.paths.pod_resources,
        sim_node.paths.checkpoint,
        f"{d}/nvidia-gpu.sock",
    } <= denied
    # Each check it could not run is an error, and nothing it could not see is called fine.
    assert all(f["severity"] == "error" for f in found if f["code"] == "permission-denied")
    assert all("run devctl as root" in f["hint"] for f in found if f["code"] == "permission-denied")
    assert not {"unhealthy-devices", "kubelet-socket-missing", "no-plugin"} & {f["code"] for f in found}
    table = run_devctl("doctor", root=sim_node.root, as_nobody=True)
    assert table.exit_code == 3 and "No problems found" not in table.stderr
    assert len(table.stderr.splitlines()) == 1


# --- on a snapshot ----------------------------------------------------------------------------------------


def bare_snapshot(**fields) -> NodeSnapshot:
    return NodeSnapshot(taken_at="2026-01-02T03:04:05.678Z", paths=resolve_paths(root="/n", env={}), **fields)


def test_the_rate_limit_is_someone_elses_client():
    message = "pod-resources /n/var/lib/kubelet/pod-resources/kubelet.sock List: rejected by the kubelet's rate limit"
    error = SourceError(POD_RESOURCES, message, ErrorKind.RATE_LIMITED)
    snapshot = bare_snapshot(kubelet_socket_present=True, errors=(error,))
    (finding,) = diagnose(snapshot)
    assert (finding.severity, finding.code) == ("warning", "pod-resources-rate-limited")
    assert finding.message.startswith(message)
    assert "slow it down" in finding.hint


def test_fail_on_orders_severities():
    warning = Finding("warning", "x", "s", "m", "h")
    assert not fails_on([warning]) and fails_on([warning], "warning") and fails_on([warning], "info")
    assert not fails_on([Finding("info", "x", "s", "m", "h")], "warning")
    assert not fails_on([])


def test_a_long_list_of_devices_is_cut_short():
    probe = PluginProbe(
        socket="/n/var/lib/kubelet/device-plugins/x.sock",
        status=PluginStatus.SERVING,
        resource="example.com/x",
        options=PluginOptions(),
        devices=tuple(Device(f"x-{i}", "Unhealthy") for i in range(10)),
    )
    found = diagnose(bare_snapshot(kubelet_socket_present=True, plugins=(probe,)))
    assert [(f.severity, f.code, f.subject, f.message) for f in found] == [
        (
            "warning",
            "unhealthy-devices",
            "example.com/x",
            "10 of 10 device(s) unhealthy: " + ", ".join(f"x-{i}" for i in range(8)) + " and 2 more",
        ),
    ]


def test_severity_is_coloured_only_when_asked():
    from devctl.render.table import TableStyle, findings_table

    rows = [Finding("error", "stale-socket", "/s", "m", "h"), Finding("warning", "x", "s", "m", "h")]
    coloured = findings_table(rows, TableStyle(color=True)).splitlines()
    assert coloured[1].startswith("\033[31merror\033[0m") and coloured[4].startswith("\033[33mwarning\033[0m")
    assert "\033[" not in findings_table(rows, TableStyle())


def test_the_exporter_counts_a_disagreement_as_doctor_does_the_refresh_before_as_its_second_reading():
    """devctl_doctor_findings counts what `devctl doctor` finds: a lasting disagreement is an error there too,
    and one gone by the next refresh (an update in flight) is not counted."""
    from devctl.exporter.metrics import prepare

    def counted(snapshot: NodeSnapshot, before: NodeSnapshot | None) -> set[tuple[str, str, int]]:
        refresh = prepare(snapshot, {}, {}, 0.0, None, before)
        return {f for f in refresh.findings if f[1] == "kubelet-plugin-disagree"}

    first = disagreeing(["x-0", "x-1"], ["x-0", "x-1", "x-2"])
    agreed = disagreeing(["x-0", "x-1"], ["x-0", "x-1"])
    assert counted(first, first) == {("error", "kubelet-plugin-disagree", 1)}
    assert counted(first, agreed) == set()
    assert counted(first, None) == {("warning", "kubelet-plugin-disagree", 1)}  # the first refresh: one reading
