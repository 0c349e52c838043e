"""Doctor's physical findings (analyze/doctor_physical, issue 33 item 1): shared through replicas on the default
simulated node; "gone" only when sysfs could tell.

Snapshots by hand as in tests/test_physical.py: GPU-0 time-sliced into replicas, its CDI spec naming
/dev/nvidia0, which node/cdi traced to 0000:17:00.0.
"""

from __future__ import annotations

from helpers import devctl

from devctl.analyze.doctor import diagnose
from devctl.model import (
    CdiDevice,
    CdiDeviceNode,
    CdiEdits,
    CdiSpec,
    CdiState,
    ContainerDevices,
    ContainerResources,
    Device,
    ErrorKind,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    PciDevice,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
    Source,
    SourceError,
)

GPU = "nvidia.com/gpu"
GPU0 = "0000:17:00.0"
PATHS = NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs")


def pod(name: str, ids: list[str]) -> PodResources:
    return PodResources("ml", name, (ContainerResources("main", (ContainerDevices(GPU, tuple(ids)),)),))


def replicas(topology: HostTopology | None, *pods: PodResources, errors: tuple[SourceError, ...] = ()):
    probe = PluginProbe("/r/k/device-plugins/gpu.sock", PluginStatus.SERVING, GPU, PluginOptions(),
                        tuple(Device(f"GPU-0::{n}") for n in range(4)), 0.5)  # fmt: skip
    nodes = (CdiDeviceNode("/dev/nvidia0", "/dev/nvidia0", 195, 0, GPU0),)
    spec = CdiSpec(
        "/etc/cdi/nvidia.yaml", 0, GPU, "0.6.0", CdiEdits(), (CdiDevice("GPU-0", CdiEdits(device_nodes=nodes)),)
    )
    return NodeSnapshot(
        taken_at="2026-01-01T00:00:00.000Z",
        paths=PATHS,
        plugins=(probe,),
        pods=pods,
        topology=topology,
        cdi=CdiState(("/etc/cdi",), (spec,)),
        errors=errors,
    )


def physical(snapshot: NodeSnapshot) -> list[tuple[str, str, str]]:
    return [(f.severity.value, f.code, f.subject) for f in diagnose(snapshot) if f.code.startswith("physical-")]


def test_the_default_node_shows_two_pods_sharing_one_gpu(sim_node):
    r = devctl(sim_node.root, "doctor", "-o", "json")
    shared = [f for f in r.json["findings"] if f["code"] == "physical-shared"]
    assert [(f["severity"], f["subject"]) for f in shared] == [("info", "0000:cc:00.0")]
    assert "chat/bot-0, chat/bot-1" in shared[0]["message"]
    # the rest of doctor's story stands: nothing physical is an error or a warning there
    assert not [f for f in r.json["findings"] if f["code"].startswith("physical-") and f["severity"] != "info"]


def test_shared_and_doubled_from_a_snapshot():
    listed = HostTopology(pci_devices=(PciDevice(GPU0, 0, "0x10de", "0x20b5", "0x030200", "nvidia"),))
    assert physical(replicas(listed, pod("a", ["GPU-0::0"]), pod("b", ["GPU-0::1", "GPU-0::2"]))) == [
        ("warning", "physical-replicas-in-container", "ml/b/main"),
        ("info", "physical-shared", GPU0),
    ]
    assert physical(replicas(listed, pod("a", ["GPU-0::0"]))) == []  # one pod alone shares nothing


def test_gone_only_when_sysfs_could_tell():
    other = HostTopology(pci_devices=(PciDevice("0000:31:00.0", 0, "0x10de", "0x20b5", "0x030200", "nvidia"),))
    held = pod("a", ["GPU-0::0"])
    gone = [("error", "physical-gone", f"{GPU}/GPU-0::{n}") for n in range(4)]
    assert physical(replicas(other, held)) == gone  # sysfs lists PCI functions, and not 0000:17:00.0
    assert physical(replicas(None, held)) == []  # sysfs not read: nothing is gone
    assert physical(replicas(HostTopology(), held)) == []  # a tree without bus/pci is no evidence
    failed = (SourceError(Source.SYSFS, "/r/sys/bus/pci/devices: permission denied", ErrorKind.PERMISSION_DENIED),)
    assert physical(replicas(other, held, errors=failed)) == []
