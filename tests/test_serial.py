"""A snapshot written on one node must read back exactly anywhere (devctl snapshot / --from)."""

from __future__ import annotations

import json

import pytest
from helpers import run_devctl

from devctl.model import (
    AllocatableResources,
    Allocation,
    Checkpoint,
    CheckpointEntry,
    ClaimDevice,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    Device,
    DeviceNode,
    DynamicResource,
    HostTopology,
    Hugepages,
    Mount,
    NodeSnapshot,
    NumaNode,
    PciDevice,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    PodResources,
    RegistryInfo,
    SourceError,
)
from devctl.model.serial import PlainError, from_plain, to_plain
from devctl.node.paths import resolve_paths


def full_snapshot() -> NodeSnapshot:
    gpu = ContainerDevices("nvidia.com/gpu", ("GPU-0",), (0,))
    return NodeSnapshot(
        taken_at="2026-01-02T03:04:05.678Z",
        paths=resolve_paths(root="/r", env={}),
        kubelet_socket_present=True,
        pods=(
            PodResources(
                "ml",
                "train-0",
                (
                    ContainerResources(
                        "main",
                        (gpu,),
                        (2, 3),
                        (ContainerMemory("memory", 1 << 30, (0,)),),
                        (DynamicResource("c", "ml", (ClaimDevice("d", "p", "dev", ("v.com/c=x",)),)),),
                    ),
                ),
            ),
        ),
        allocatable=AllocatableResources((gpu,), (2, 3, 4), (ContainerMemory("hugepages-2Mi", 4 << 20, (1,)),)),
        plugins=(
            PluginProbe(
                "/p/a.sock",
                PluginStatus.SERVING,
                "nvidia.com/gpu",
                PluginOptions(True, False),
                (Device("GPU-0", "Healthy", (0, 1)),),
                0.5,
                None,
                RegistryInfo("DevicePlugin", "n", "/e", ("v1beta1",)),
            ),
            PluginProbe("/p/b.sock", PluginStatus.STALE, error="stale socket"),
        ),
        checkpoint=Checkpoint(
            "/p/kubelet_internal_checkpoint",
            "v2",
            False,
            1,
            2,
            {"nvidia.com/gpu": ("GPU-0",)},
            (
                CheckpointEntry(
                    "uid",
                    "main",
                    "nvidia.com/gpu",
                    {"0": ("GPU-0",)},
                    Allocation(
                        {"A": "1"},
                        (Mount("/c", "/h", True),),
                        (DeviceNode("/dev/x", "/dev/x", "rw"),),
                        {"k": "v"},
                        ("v.com/c=x",),
                    ),
                ),
            ),
        ),
        topology=HostTopology(
            (NumaNode(0, (0, 1), 1 << 30, (Hugepages(2048, 4, 2),)),),
            (PciDevice("0000:3b:00.0", 0, "0x10de", "0x20b0", "0x030200", "nvidia"),),
        ),
        pod_identities=(PodIdentity("uid", "ml", "train-0"),),
        errors=(SourceError("/p/b.sock", "stale socket"),),
    )


def test_snapshot_round_trips_through_json():
    snap = full_snapshot()
    text = json.dumps(to_plain(snap))
    assert from_plain(NodeSnapshot, json.loads(text)) == snap


def test_unknown_fields_from_a_newer_devctl_are_ignored():
    data = to_plain(full_snapshot())
    data["something_new"] = 1
    data["plugins"][0]["added_later"] = True
    assert from_plain(NodeSnapshot, data) == full_snapshot()


# --- files that are not what `devctl snapshot` wrote ------------------------------------------------


def damaged(edit) -> dict:
    data = to_plain(full_snapshot())
    edit(data)
    return data


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["plugins"][0]["devices"][0].update(numa_nodes="x"),
            'plugins[0].devices[0].numa_nodes: expected a list of integers, got "x"',
        ),
        (
            lambda d: d["plugins"][0]["devices"][0].update(numa_nodes=[0, "1"]),
            'plugins[0].devices[0].numa_nodes[1]: expected an integer, got "1"',
        ),
        (
            lambda d: d["plugins"][0]["devices"][0].update(numa_nodes=[True]),
            "plugins[0].devices[0].numa_nodes[0]: expected an integer, got true",
        ),
        (lambda d: d.update(paths=7), "paths: expected an object, got 7"),
        (lambda d: d.update(plugins={}), "plugins: expected a list of objects, got an object"),
        (
            lambda d: d["plugins"][1].update(status="sleeping"),
            # one vocabulary of a socket's state (base.errors.SocketStatus) for plugins' and the kubelet's sockets
            'plugins[1].status: expected one of "serving", "listening", "unreachable", "missing", "not-a-socket", '
            '"stale", "timeout", "permission-denied", "no-plugin", "other", got "sleeping"',
        ),
        (lambda d: d["errors"][0].update(kind=[]), "errors[0].kind: expected one of"),
        (
            lambda d: d["checkpoint"]["registered_devices"].update({"x.com/y": [1]}),
            'checkpoint.registered_devices["x.com/y"][0]: expected a string, got 1',
        ),
        (
            lambda d: d["pods"][0]["containers"][0]["devices"][0].update(ids=None),
            "pods[0].containers[0].devices[0].ids: expected a list of strings, got null",
        ),
        (lambda d: d["plugins"][0].update(latency_ms="fast"), 'plugins[0].latency_ms: expected a number, got "fast"'),
        (lambda d: d["paths"].pop("root"), "paths.root: missing"),
        (lambda d: d["topology"]["numa_nodes"][0].update(id=0.5), "topology.numa_nodes[0].id: expected an integer"),
        (
            lambda d: d["topology"]["numa_nodes"][0].update(id="\x1b[2J" * 30),
            r'topology.numa_nodes[0].id: expected an integer, got "\u001b[2J\u001b[2J\u001b[2J\u001b[2J...',
        ),
    ],
)
def test_a_wrong_value_anywhere_is_an_error_with_its_path(edit, message):
    with pytest.raises(PlainError) as err:
        from_plain(NodeSnapshot, damaged(edit))
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)


def test_a_string_is_not_taken_for_a_wrong_value_nor_a_number_for_a_bool():
    ok = damaged(lambda d: d["plugins"][0].update(latency_ms=3))
    assert from_plain(NodeSnapshot, ok).plugins[0].latency_ms == 3.0
    with pytest.raises(PlainError, match=r"^kubelet_socket_present: expected a boolean, got 1$"):
        from_plain(NodeSnapshot, damaged(lambda d: d.update(kubelet_socket_present=1)))
    with pytest.raises(PlainError, match=r"^expected an object, got a list$"):
        from_plain(NodeSnapshot, [])


def test_a_damaged_from_file_is_exit_3_with_the_path_of_the_bad_value(tmp_path):
    data = damaged(lambda d: d["plugins"][0]["devices"][0].update(numa_nodes="x"))
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"kind": "devctl-snapshot/v1", **data}))
    for command in (["ls"], ["devices"], ["plugins", "-o", "json"], ["topo"]):
        r = run_devctl("--from", str(path), *command)
        assert (r.exit_code, r.stdout) == (3, ""), command
        assert r.stderr.splitlines() == [
            f"devctl: --from {path}: damaged snapshot: plugins[0].devices[0].numa_nodes: expected a list of integers,"
            ' got "x"'
        ]
