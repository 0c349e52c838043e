"""A snapshot written on one node must read back exactly anywhere (devctl snapshot / --from)."""

from __future__ import annotations

import json

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
from devctl.node.paths import resolve_paths
from devctl.serial import from_plain, to_plain


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
