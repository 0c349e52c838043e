"""Physical devices (analyze/physical, issue 33 item 1): which logical devices are one PCI function, who holds them.

Snapshots are built by hand as in tests/test_analyze.py: a device plugin's list, pods holding devices,
the host's PCI functions, and CDI specs whose device nodes node/cdi traced to PCI functions.
"""

from __future__ import annotations

import dataclasses
import time

from devctl.analyze.physical import MAX_FUNCTIONS, MAX_LOGICAL, findings, physical_view
from devctl.model import (
    Allocation,
    CdiDevice,
    CdiDeviceNode,
    CdiEdits,
    CdiSpec,
    CdiState,
    Checkpoint,
    CheckpointEntry,
    ContainerDevices,
    ContainerResources,
    Device,
    DeviceNode,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    PciDevice,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
    Severity,
)

GPU = "nvidia.com/gpu"
VF = "intel.com/sriov"
MIG = "nvidia.com/mig-1g.10gb"
PATHS = NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs")
OPTS = PluginOptions()
GPU0, GPU1 = "0000:17:00.0", "0000:31:00.0"


def gpu_function(address: str, numa: int = 0) -> PciDevice:
    return PciDevice(address, numa, "0x10de", "0x20b5", "0x030200", "nvidia", "NVIDIA Corporation", "A100 80GB")


def plugin(resource: str, ids: list[str]) -> PluginProbe:
    return PluginProbe(f"/r/k/device-plugins/{resource.replace('/', '-')}.sock", PluginStatus.SERVING, resource,
                       OPTS, tuple(Device(i) for i in ids), 0.5)  # fmt: skip


def pod(ns: str, name: str, container: str, resource: str, ids: list[str]) -> PodResources:
    return PodResources(ns, name, (ContainerResources(container, (ContainerDevices(resource, tuple(ids)),)),))


def node(path: str, pci: str | None, major: int = 195, minor: int = 0) -> CdiDeviceNode:
    return CdiDeviceNode(path, path, major, minor, pci)


def nvidia_spec(devices: dict[str, tuple[CdiDeviceNode, ...]], kind: str = GPU) -> CdiSpec:
    """A CDI spec as the NVIDIA toolkit writes it: ``/dev/nvidiactl`` for all, each device its own nodes."""
    ctl = CdiEdits(device_nodes=(node("/dev/nvidiactl", None, 195, 255),))
    devs = tuple(CdiDevice(name, CdiEdits(device_nodes=nodes)) for name, nodes in devices.items())
    return CdiSpec(f"/etc/cdi/{kind.replace('/', '-')}.yaml", 0, kind, "0.6.0", ctl, devs)


def snap(**kw) -> NodeSnapshot:
    return NodeSnapshot(taken_at="2026-01-01T00:00:00.000Z", paths=PATHS, **kw)


def replica_node(pods: tuple[PodResources, ...], functions: tuple[PciDevice, ...] = (gpu_function(GPU0),)):
    """GPU-0 time-sliced into four replicas; the CDI spec names GPU-0 (the bare ID) with /dev/nvidia0."""
    return snap(
        plugins=(plugin(GPU, [f"GPU-0::{n}" for n in range(4)]),),
        pods=pods,
        topology=HostTopology(pci_devices=functions),
        cdi=CdiState(("/etc/cdi",), (nvidia_spec({"GPU-0": (node("/dev/nvidia0", GPU0),)}),)),
    )


def test_replicas_held_by_two_pods_are_one_gpu_and_an_info_naming_both_pods():
    view = physical_view(
        replica_node((pod("ml", "a", "main", GPU, ["GPU-0::0"]), pod("ml", "b", "main", GPU, ["GPU-0::2"])))
    )
    assert [d.pci for d in view.devices] == [GPU0]
    gpu = view.devices[0]
    assert (gpu.class_, gpu.vendor_id, gpu.model, gpu.numa_node) == ("gpu", "0x10de", "A100 80GB", 0)
    assert [d.id for d in gpu.logical] == ["GPU-0::0", "GPU-0::1", "GPU-0::2", "GPU-0::3"]
    assert {d.id: [(h.namespace, h.pod, h.container) for h in d.holders or ()] for d in gpu.logical}["GPU-0::2"] == [
        ("ml", "b", "main")
    ]
    assert view.unresolved == ()
    found = findings(view)
    assert [(f.severity, f.code, f.subject) for f in found] == [(Severity.INFO, "physical-shared", GPU0)]
    assert "ml/a" in found[0].message and "ml/b" in found[0].message


def test_one_pod_on_replicas_is_no_sharing_finding():
    view = physical_view(replica_node((pod("ml", "a", "main", GPU, ["GPU-0::0"]),)))
    assert findings(view) == []


def test_one_container_given_two_replicas_of_one_gpu_is_a_warning():
    view = physical_view(replica_node((pod("ml", "a", "main", GPU, ["GPU-0::0", "GPU-0::1"]),)))
    found = findings(view)
    assert [(f.severity, f.code, f.subject) for f in found] == [
        (Severity.WARNING, "physical-replicas-in-container", "ml/a/main")
    ]
    assert "GPU-0::0" in found[0].message and "GPU-0::1" in found[0].message and GPU0 in found[0].message


def test_a_replica_resolved_through_a_sibling_carries_the_others():
    """Only GPU-0::1's allocation names a CDI device; the other replicas are the same GPU by NVIDIA's scheme."""
    spec = nvidia_spec({"gpu0": (node("/dev/nvidia0", GPU0),)})
    entry = CheckpointEntry("uid-a", "main", GPU, {"0": ("GPU-0::1",)}, Allocation(cdi_devices=(f"{GPU}=gpu0",)))
    s = snap(
        plugins=(plugin(GPU, [f"GPU-0::{n}" for n in range(3)]),),
        topology=HostTopology(pci_devices=(gpu_function(GPU0),)),
        cdi=CdiState(("/etc/cdi",), (spec,)),
        checkpoint=Checkpoint("/r/k/cp", "v2", True, 1, 1, {}, (entry,)),
    )
    view = physical_view(s)
    assert [(d.pci, len(d.logical)) for d in view.devices] == [(GPU0, 3)]


def test_a_device_node_whose_function_left_sysfs_is_an_error():
    """The spec's /dev/nvidia1 traces (dev/char) to 0000:31:00.0, which the host's PCI functions no longer list."""
    s = snap(
        plugins=(plugin(GPU, ["GPU-0", "GPU-1"]),),
        pods=(pod("ml", "a", "main", GPU, ["GPU-1"]),),
        topology=HostTopology(pci_devices=(gpu_function(GPU0),)),
        cdi=CdiState(("/etc/cdi",), (nvidia_spec({"GPU-0": (node("/dev/nvidia0", GPU0),), "GPU-1": (
            node("/dev/nvidia1", GPU1, minor=1),)}),)),
    )  # fmt: skip
    view = physical_view(s)
    assert view.gone == (GPU1,)
    gone = next(d for d in view.devices if d.pci == GPU1)
    assert (gone.class_, gone.vendor_id, gone.numa_node) == (None, None, None)  # unknown, not 0
    found = findings(view)
    assert [(f.severity, f.code, f.subject) for f in found] == [(Severity.ERROR, "physical-gone", f"{GPU}/GPU-1")]
    assert GPU1 in found[0].message


def test_no_sysfs_read_says_nothing_is_gone():
    s = snap(
        plugins=(plugin(GPU, ["GPU-1"]),),
        cdi=CdiState(("/etc/cdi",), (nvidia_spec({"GPU-1": (node("/dev/nvidia1", GPU1, minor=1),)}),)),
    )
    view = physical_view(s)
    assert [d.pci for d in view.devices] == [GPU1] and view.gone == () and findings(view) == []


def test_an_id_that_is_a_pci_address_is_its_function():
    """SR-IOV VFs are listed by their address; lspci's short spelling is the same function."""
    vf = PciDevice("0000:3b:02.0", 1, "0x8086", "0x1889", "0x020000", "iavf")
    s = snap(
        plugins=(plugin(VF, ["0000:3b:02.0", "3b:02.1"]),),
        topology=HostTopology(pci_devices=(vf, PciDevice("0000:3b:02.1", 1, "0x8086", "0x1889", "0x020000"))),
    )
    view = physical_view(s)
    assert [(d.pci, d.class_, d.numa_node, [x.id for x in d.logical]) for d in view.devices] == [
        ("0000:3b:02.0", "nic", 1, ["0000:3b:02.0"]),
        ("0000:3b:02.1", "nic", 1, ["3b:02.1"]),
    ]


def test_a_replica_naming_no_device_is_unresolved_in_one_line_and_the_rest_still_shown():
    s = dataclasses.replace(replica_node(()), plugins=(plugin(GPU, ["GPU-0::0", "GPU-9::0"]),))
    view = physical_view(s)
    assert [(d.pci, [x.id for x in d.logical]) for d in view.devices] == [(GPU0, ["GPU-0::0"])]
    assert [u.logical.id for u in view.unresolved] == ["GPU-9::0"]
    line = view.unresolved[0].line()
    assert "\n" not in line and line.startswith(f"{GPU} GPU-9::0: ") and "GPU-9" in line


def test_a_mig_device_is_on_its_parent_gpu_through_its_device_nodes():
    """The MIG device's CDI nodes: /dev/nvidia0 (the parent's function) and an nvidia-caps node (no function)."""
    mig = nvidia_spec(
        {"MIG-7f1c": (node("/dev/nvidia0", GPU0), node("/dev/nvidia-caps/nvidia-cap21", None, 237, 21))}, kind=MIG
    )
    entry = CheckpointEntry("uid-a", "main", MIG, {"0": ("MIG-7f1c",)}, Allocation(cdi_devices=(f"{MIG}=MIG-7f1c",)))
    s = snap(
        plugins=(plugin(MIG, ["MIG-7f1c"]),),
        topology=HostTopology(pci_devices=(gpu_function(GPU0),)),
        cdi=CdiState(("/etc/cdi",), (mig,)),
        checkpoint=Checkpoint("/r/k/cp", "v2", True, 1, 1, {}, (entry,)),
    )
    view = physical_view(s)
    assert [(d.pci, [(x.resource, x.id) for x in d.logical]) for d in view.devices] == [(GPU0, [(MIG, "MIG-7f1c")])]


def test_allocation_host_paths_decide_only_when_they_lead_to_one_function():
    """Allocate's device specs belong to the whole request: /dev/nvidia0 and /dev/nvidia1 for two GPUs decide
    neither; one GPU's own reply with /dev/nvidia1 decides it (traced where a spec names that host path)."""
    spec = nvidia_spec({"other": (node("/dev/nvidia0", GPU0), node("/dev/nvidia1", GPU1, minor=1))}, kind="x.com/y")
    both = Allocation(devices=(DeviceNode("/dev/nvidia0", "/dev/nvidia0"), DeviceNode("/dev/nvidia1", "/dev/nvidia1")))
    one = Allocation(
        devices=(DeviceNode("/dev/nvidiactl", "/dev/nvidiactl"), DeviceNode("/dev/nvidia1", "/dev/nvidia1"))
    )
    entries = (
        CheckpointEntry("uid-a", "main", GPU, {"0": ("a", "b")}, both),
        CheckpointEntry("uid-b", "main", GPU, {"0": ("c",)}, one),
    )
    s = snap(
        plugins=(plugin(GPU, ["a", "b", "c"]),),
        topology=HostTopology(pci_devices=(gpu_function(GPU0), gpu_function(GPU1))),
        cdi=CdiState(("/etc/cdi",), (spec,)),
        checkpoint=Checkpoint("/r/k/cp", "v2", True, 1, 1, {}, entries),
    )
    view = physical_view(s)
    assert {d.pci: [x.id for x in d.logical if x.kind == "device-plugin"] for d in view.devices} == {
        GPU0: [],
        GPU1: ["c"],
    }
    assert sorted(u.logical.id for u in view.unresolved) == ["a", "b"]
    assert "2 PCI functions" in view.unresolved[0].reason


def test_512_functions_and_10000_logical_devices_in_bounded_time():
    """Bad input of issue 33: 512 PCI functions; more logical devices than the bound, the excess said."""
    functions = tuple(gpu_function(f"0000:{1 + i // 32:02x}:{i % 32:02x}.0") for i in range(MAX_FUNCTIONS))
    spec = nvidia_spec({f"GPU-{i}": (node(f"/dev/nvidia{i}", f.address, minor=i),) for i, f in enumerate(functions)})
    ids = [f"GPU-{i % MAX_FUNCTIONS}::{i // MAX_FUNCTIONS}" for i in range(MAX_LOGICAL + 50)]
    pods = tuple(pod("ml", f"p{i}", "main", GPU, [ids[i]]) for i in range(0, 2000, 2))
    s = snap(
        plugins=(plugin(GPU, ids),),
        pods=pods,
        topology=HostTopology(pci_devices=functions),
        cdi=CdiState(("/etc/cdi",), (spec,)),
    )
    start = time.monotonic()
    view = physical_view(s)
    found = findings(view)
    assert time.monotonic() - start < 60  # does not hang: well under a second here
    assert len(view.devices) == MAX_FUNCTIONS
    assert sum(len(d.logical) for d in view.devices) == MAX_LOGICAL
    assert view.omitted == (f"50 logical devices left out (at most {MAX_LOGICAL} are joined)",)
    assert view.unresolved == ()
    assert {f.code for f in found} == {"physical-shared"}  # p0 (GPU-0::0) and p512 (GPU-0::1), ...
