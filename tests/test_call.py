"""``devctl call`` as a person runs it: one RPC against the simulated node's real plugins, and broken ones.

Commands run in-process (typer's CliRunner) in a worker thread with a bounded
wait, so a call that hangs fails its test instead of the suite. The plugins'
own ``rpc_log`` says which RPCs really reached them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from badservers import hung_server, malformed_plugin, stale_socket
from helpers import devctl, invoke, run_devctl

from devctl.lab.sim.thread import SimHandle

GPU, NIC, FOO = "nvidia.com/gpu", "intel.com/sriov_netdevice", "hardware-vendor.example/foo"


def rpc_log(sim: SimHandle, resource: str) -> list[tuple[str, tuple[str, ...]]]:
    """The RPCs the simulated node's plugin of ``resource`` served so far, oldest first."""

    async def read(node):
        return [(r.rpc, r.device_ids) for r in node.plugins[resource].rpc_log]

    return sim.call(read)


def socket_of(sim: SimHandle, name: str) -> str:
    return f"{sim.paths.plugins_dir}/{name}"


# --- the read-only RPCs -------------------------------------------------------------------------------


def test_options_by_resource(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", GPU, "options", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert list(doc) == ["socket", "resource", "rpc", "request", "reply", "latency_ms"]
    assert (doc["socket"], doc["resource"], doc["rpc"]) == (
        socket_of(sim_node, "nvidia-gpu.sock"),
        GPU,
        "GetDevicePluginOptions",
    )
    assert doc["request"] == {}
    assert doc["reply"] == {"pre_start_required": False, "get_preferred_allocation_available": True}
    assert doc["latency_ms"] > 0
    table = devctl(sim_node.root, "call", NIC, "options")
    assert table.exit_code == 0 and table.stderr == ""
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["PRE-START-REQUIRED", "PREFERRED-ALLOCATION"],
        ["yes", "no"],
    ]


def test_list_by_socket_name_and_path(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", "--socket", "nvidia-gpu.sock", "list", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert (doc["socket"], doc["resource"], doc["rpc"]) == (
        socket_of(sim_node, "nvidia-gpu.sock"),
        None,
        "ListAndWatch",
    )
    devices = doc["reply"]["devices"]
    assert [d["id"] for d in devices] == [f"GPU-{i}" for i in range(8)]
    assert devices[5] == {"id": "GPU-5", "health": "Unhealthy", "numa_nodes": [1]}
    assert devices[0] == {"id": "GPU-0", "health": "Healthy", "numa_nodes": [0]}
    table = devctl(sim_node.root, "call", "--socket", socket_of(sim_node, "foo.sock"), "list")
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["ID", "HEALTH", "NUMA"],
        ["foo-0", "Healthy", "<none>"],
        ["foo-1", "Healthy", "<none>"],
    ]
    as_yaml = yaml.safe_load(devctl(sim_node.root, "call", FOO, "list", "-o", "yaml").stdout)
    as_json = devctl(sim_node.root, "call", FOO, "list", "-o", "json").json
    assert as_yaml.pop("latency_ms") > 0 and as_json.pop("latency_ms") > 0  # differs per call
    assert as_yaml == as_json


def test_each_call_is_the_one_rpc_asked(sim_node: SimHandle):
    before = len(rpc_log(sim_node, FOO))
    assert devctl(sim_node.root, "call", "--socket", "foo.sock", "list").exit_code == 0
    assert devctl(sim_node.root, "call", "--socket", "foo.sock", "options").exit_code == 0
    assert [rpc for rpc, _ in rpc_log(sim_node, FOO)[before:]] == ["ListAndWatch", "GetDevicePluginOptions"]


def test_preferred_asks_what_the_kubelet_would(sim_node: SimHandle):
    r = devctl(
        sim_node.root,
        "call", GPU, "preferred",
        "--available", "GPU-0,GPU-4", "--available", "GPU-6", "GPU-7",
        "--must-include", "GPU-7", "--size", "2",
        "-o", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert doc["request"] == {"available": ["GPU-7", "GPU-0", "GPU-4", "GPU-6"], "must_include": ["GPU-7"], "size": 2}
    # GPU-7 first (must include), then one more on its NUMA node 1; GPU-0 is on node 0.
    assert doc["reply"] == {"device_ids": ["GPU-7", "GPU-4"]}
    assert rpc_log(sim_node, GPU)[-1] == ("GetPreferredAllocation", ("GPU-7", "GPU-4"))
    table = devctl(sim_node.root, "call", GPU, "preferred", "--available", "GPU-0,GPU-1,GPU-4", "--size", "2")
    assert table.stdout.splitlines() == ["PREFERRED", "GPU-0", "GPU-1"]


def test_preferred_not_offered_is_the_plugins_answer_exit_1(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", NIC, "preferred", "--available", "0000:af:02.0", "--size", "1")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"devctl: {socket_of(sim_node, 'sriov-netdevice.sock')} GetPreferredAllocation: UNIMPLEMENTED: "
        f"{NIC}: GetPreferredAllocation is not offered"
    ]


# --- the RPCs that may change state -------------------------------------------------------------------


@pytest.mark.parametrize("rpc", ["allocate", "prestart"])
def test_state_changing_rpcs_refuse_without_yes(sim_node: SimHandle, rpc: str):
    before = rpc_log(sim_node, NIC)
    r = devctl(sim_node.root, "call", NIC, rpc, "0000:af:02.0")
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"devctl: {rpc} calls ") and "may change the devices' state" in line and "--yes" in line
    assert rpc_log(sim_node, NIC) == before  # nothing reached the plugin


def test_allocate_with_yes_returns_the_templates_answer(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", GPU, "allocate", "GPU-7", "--yes", "-o", "json")
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert (doc["rpc"], doc["request"]) == ("Allocate", {"device_ids": ["GPU-7"]})
    assert doc["reply"] == {
        "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-7", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
        "mounts": [],
        "devices": [
            {"container_path": "/dev/nvidiactl", "host_path": "/dev/nvidiactl", "permissions": "rw"},
            {"container_path": "/dev/nvidia-uvm", "host_path": "/dev/nvidia-uvm", "permissions": "rw"},
        ],
        "annotations": {},
        "cdi_devices": [
            "nvidia.com/gpu=GPU-7",
            "k8s.device-plugin.nvidia.com/gpu=GPU-7",
        ],  # the request's, each device's
    }
    assert rpc_log(sim_node, GPU)[-1] == ("Allocate", ("GPU-7",))
    table = devctl(sim_node.root, "call", FOO, "allocate", "foo-1", "-y")
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["KIND", "NAME", "VALUE"],
        ["env", "FOO_DEVICES", "foo-1"],
        ["device", "/dev/foo", "/dev/foo-1", "rwm"],
        ["mount", "/var/lib/foo", "/var/lib/foo", "ro"],
    ]


def test_prestart_with_yes(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", NIC, "prestart", "0000:af:02.0", "0000:af:02.1", "--yes")
    assert (r.exit_code, r.stdout) == (0, "PreStartContainer 0000:af:02.0,0000:af:02.1: ok\n")
    assert rpc_log(sim_node, NIC)[-1] == ("PreStartContainer", ("0000:af:02.0", "0000:af:02.1"))
    doc = devctl(sim_node.root, "call", NIC, "prestart", "0000:af:02.2", "--yes", "-o", "json").json
    assert (doc["rpc"], doc["reply"]) == ("PreStartContainer", {})


def test_an_unknown_device_is_the_plugins_refusal_exit_1(sim_node: SimHandle):
    r = devctl(sim_node.root, "call", GPU, "allocate", "GPU-9", "--yes")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"devctl: {socket_of(sim_node, 'nvidia-gpu.sock')} Allocate: INVALID_ARGUMENT: {GPU}: unknown device(s) GPU-9"
    ]


# --- plugins that cannot be reached -------------------------------------------------------------------


def test_a_hung_plugin_is_exit_3_within_the_timeout(sim_node: SimHandle, background):
    background(hung_server(socket_of(sim_node, "hung.sock")))
    for rpc in (["options"], ["list"], ["allocate", "x", "--yes"]):
        start = time.monotonic()
        r = devctl(sim_node.root, "call", "--socket", "hung.sock", *rpc, timeout=0.5)
        elapsed = time.monotonic() - start
        assert r.exit_code == 3, rpc
        assert elapsed < 0.5 + 1, (rpc, elapsed)
        (line,) = r.stderr.splitlines()
        assert line.endswith("no answer after 0.5s (deadline exceeded)") and "hung.sock" in line


def test_stale_missing_and_malformed_sockets_are_one_line_exit_3(sim_node: SimHandle, background):
    stale = stale_socket(socket_of(sim_node, "old.sock"))
    background(malformed_plugin(socket_of(sim_node, "bad.sock")))
    cases = {
        "old.sock": f"devctl: {stale}: stale socket (nothing listens on it)",
        "/nowhere/x.sock": "devctl: /nowhere/x.sock: no such socket",
        "bad.sock": f"devctl: {socket_of(sim_node, 'bad.sock')} GetDevicePluginOptions: the reply is not a "
        "DevicePluginOptions (another API on this socket?)",
    }
    for socket, message in cases.items():
        r = devctl(sim_node.root, "call", "--socket", socket, "options")
        assert (r.exit_code, r.stdout, r.stderr.splitlines()) == (3, "", [message]), socket


def test_a_resource_nothing_serves_is_exit_1_as_in_ls(sim_node: SimHandle, tmp_path):
    # issue 10, item 5: a name that does not exist is exit 1 in every command
    r = devctl(sim_node.root, "call", "nope.example/x", "list")
    assert r.exit_code == 1
    d = sim_node.paths.plugins_dir
    assert r.stderr.splitlines() == [
        f"devctl: no serving socket in {d} is known to serve nope.example/x (see devctl plugins)"
    ]
    for typo in ("nvidia.com/gpus", "gpu", "NVIDIA.com/gpu"):
        r = devctl(sim_node.root, "call", typo, "list")
        assert (r.exit_code, r.stderr.splitlines()) == (
            1,
            [f"devctl: no serving socket in {d} is known to serve {typo} (did you mean {GPU}?)"],
        )
    # no kubelet dir at all: said as such, exit 3
    r = devctl(tmp_path, "call", GPU, "list")
    assert (r.exit_code, r.stderr.splitlines()) == (
        3,
        [f"devctl: {tmp_path}/var/lib/kubelet/device-plugins does not exist: is this a node? --root/--kubelet-dir"],
    )


def test_a_resource_behind_sockets_devctl_may_not_open_says_so(sim_node: SimHandle):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    os.chmod(sim_node.root, 0o755)  # the directories are open; the plugins' sockets are root's only
    r = run_devctl("call", GPU, "list", root=sim_node.root, as_nobody=True)
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr.splitlines() == [
        f"devctl: no serving socket in {sim_node.paths.plugins_dir} is known to serve {GPU} "
        # 4 device plugins and the default node's DRA registration socket (counted with them by call)
        "(5 socket(s) there refused devctl: permission denied; run as root)"
    ]


# --- usage --------------------------------------------------------------------------------------------


NEEDS = "preferred needs the candidates (--available ID...) and the request's --size N"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list"], "name the plugin: a RESOURCE (e.g. nvidia.com/gpu) or --socket PATH, before the RPC"),
        ([GPU], "which RPC? one of options, list, preferred, allocate, prestart"),
        ([GPU, "reset"], "unknown RPC 'reset': one of options, list, preferred, allocate, prestart"),
        ([GPU, "list", "GPU-0"], "list takes no device IDs"),
        ([GPU, "allocate", "--yes"], "allocate needs the device IDs to allocate"),
        ([GPU, "options", "--size", "2"], "--available, --must-include and --size belong to preferred"),
        ([GPU, "preferred", "--available", "GPU-0"], NEEDS),
        ([GPU, "preferred", "--size", "1"], NEEDS),
        (["--socket", "x.sock", GPU, "list"], f"give a RESOURCE or --socket, not both ({GPU} and --socket x.sock)"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_exit_2(sim_node: SimHandle, args: list[str], message: str):
    before = rpc_log(sim_node, GPU)
    r = devctl(sim_node.root, "call", *args)
    assert (r.exit_code, r.stdout, r.stderr.splitlines()) == (2, "", [f"devctl: {message}"])
    assert rpc_log(sim_node, GPU) == before


def test_call_refuses_a_snapshot_file(tmp_path: Path):
    r = invoke("--from", str(tmp_path / "s.json"), "call", GPU, "list")
    assert r.exit_code == 2
    assert r.stderr.splitlines() == ["devctl: --from: call talks to a live plugin; a snapshot file has none"]
