"""Analysis on hand-built snapshots: the numbers a person reads off `ls`, `devices`, `pods`, `topo`, `checkpoint`."""

from __future__ import annotations

import pytest

from devctl import analyze
from devctl.model import (
    AllocatableResources,
    Allocation,
    Checkpoint,
    CheckpointEntry,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    Device,
    ErrorKind,
    HostTopology,
    NodePaths,
    NodeSnapshot,
    NumaNode,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodIdentity,
    PodResources,
    SocketStatus,
    SourceError,
)
from devctl.model.serial import to_plain

GPU = "nvidia.com/gpu"
NIC = "example.com/nic"
PATHS = NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs")
OPTS = PluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


def gpus() -> tuple[Device, ...]:
    """Eight GPUs, four per NUMA node; GPU-7 unhealthy."""
    return tuple(Device(f"GPU-{i}", "Unhealthy" if i == 7 else "Healthy", (0,) if i < 4 else (1,)) for i in range(8))


def holding(ns: str, pod: str, container: str, resource: str, ids: list[str], numa: int | None = 0, **kw):
    """A pod as List reports it: one ContainerDevices entry per device per NUMA node."""
    entries = tuple(ContainerDevices(resource, (i,), (numa,) if numa is not None else ()) for i in ids)
    return PodResources(ns, pod, (ContainerResources(container, entries, **kw),))


def snap(**kw) -> NodeSnapshot:
    return NodeSnapshot(taken_at="2026-01-01T00:00:00.000Z", paths=PATHS, **kw)


def gpu_node(**kw) -> NodeSnapshot:
    """The contract's example: capacity 8, allocatable 7, allocated 3, free 4, unhealthy 1."""
    pods = (
        holding("ml", "train-0", "main", GPU, ["GPU-0", "GPU-1"], cpu_ids=(2, 3)),
        holding("ml", "infer-0", "srv", GPU, ["GPU-4"], numa=1, cpu_ids=(20,)),
    )
    defaults = dict(
        pods=pods,
        allocatable=AllocatableResources(
            devices=tuple(ContainerDevices(GPU, (d.id,), d.numa_nodes) for d in gpus() if d.healthy),
            cpu_ids=tuple(range(2, 32)),
        ),
        plugins=(PluginProbe("/r/k/device-plugins/gpu.sock", PluginStatus.SERVING, GPU, OPTS, gpus(), 0.5),),
        topology=HostTopology(
            numa_nodes=(NumaNode(0, tuple(range(16)), 64 << 30), NumaNode(1, tuple(range(16, 32)), 64 << 30))
        ),
    )
    defaults.update(kw)
    return snap(**defaults)


# --- ls ------------------------------------------------------------------------------------------


def test_resource_counts_follow_the_contract_example():
    (row,) = analyze.resources_view(gpu_node())
    assert to_plain(row) == {
        "name": GPU,
        "socket": "/r/k/device-plugins/gpu.sock",
        "status": "serving",
        "capacity": 8,
        "allocatable": 7,
        "allocated": 3,
        "free": 4,
        "unhealthy": 1,
        "numa_nodes": [0, 1],
        "options": {"pre_start_required": False, "get_preferred_allocation_available": True},
        "capacity_min": None,
        "kind": "device-plugin",
    }


def test_a_resource_only_the_kubelet_knows_has_no_plugin_and_the_kubelets_counts():
    # The plugin is gone: the kubelet's allocatable list is empty (all unhealthy),
    # a container still holds GPU-0, the checkpoint remembers two registered devices.
    node = gpu_node(
        plugins=(),
        allocatable=AllocatableResources(),
        checkpoint=Checkpoint("/cp", "v2", True, 1, 1, {GPU: ("GPU-0", "GPU-1")}),
    )
    (row,) = analyze.resources_view(node)
    assert (row.status, row.socket, row.options) == ("no-plugin", None, None)
    # No plugin lists the devices: the kubelet may keep more than the 3 anyone names.
    assert (row.capacity, row.capacity_min) == (None, 3)
    assert (row.allocatable, row.allocated, row.free, row.unhealthy) == (0, 3, 0, None)


def test_a_stale_socket_of_a_known_resource_is_shown_with_its_status():
    node = gpu_node(
        plugins=(PluginProbe("/r/k/device-plugins/gpu.sock", PluginStatus.STALE, GPU, error="stale socket"),)
    )
    (row,) = analyze.resources_view(node)
    assert (row.status, row.socket) == ("stale", "/r/k/device-plugins/gpu.sock")
    # The kubelet's word: 7 healthy; the unhealthy GPU-7 is in no list but the plugin's.
    assert (row.capacity, row.capacity_min, row.allocatable, row.allocated) == (None, 7, 7, 3)


def test_resources_filter_by_name_and_sort():
    node = gpu_node(pods=(*gpu_node().pods, holding("net", "r", "c", NIC, ["nic-0"])))
    assert [r.name for r in analyze.resources_view(node)] == [NIC, GPU]
    assert [r.name for r in analyze.resources_view(node, [GPU])] == [GPU]


def test_a_socket_of_unknown_resource_is_not_a_resource_row():
    node = gpu_node(plugins=(*gpu_node().plugins, PluginProbe("/x.sock", PluginStatus.SERVING, None, OPTS, gpus())))
    assert [r.name for r in analyze.resources_view(node)] == [GPU]


# --- devices -------------------------------------------------------------------------------------


def test_device_states_and_holders():
    node = gpu_node(pods=(*gpu_node().pods, holding("ml", "old", "main", GPU, ["GPU-7"], numa=1)))
    rows = {d.id: d for d in analyze.devices_view(node)}
    assert len(rows) == 8
    assert rows["GPU-0"].state == "allocated"
    assert to_plain(rows["GPU-0"].allocated_to) == [{"namespace": "ml", "pod": "train-0", "container": "main"}]
    assert rows["GPU-2"].state == "free" and rows["GPU-2"].allocated_to == ()
    assert (rows["GPU-7"].health, rows["GPU-7"].state) == ("Unhealthy", "unhealthy-allocated")
    assert rows["GPU-5"].numa_nodes == (1,)


def test_a_held_device_the_plugin_no_longer_lists_is_shown_outside_its_capacity():
    node = gpu_node(pods=(*gpu_node().pods, holding("ml", "old", "main", GPU, ["GPU-9"], numa=1)))
    rows = {d.id: d for d in analyze.devices_view(node)}
    assert (rows["GPU-9"].health, rows["GPU-9"].state, rows["GPU-9"].numa_nodes) == (
        "Missing",
        "unhealthy-allocated",
        (1,),
    )
    (row,) = analyze.resources_view(node)
    assert (row.capacity, row.allocatable, row.allocated, row.free, row.unhealthy) == (8, 7, 4, 4, 1)
    assert analyze.topology_view(node).numa_nodes[1].devices[GPU].total == 4


def test_a_device_unhealthy_and_free():
    rows = {d.id: d for d in analyze.devices_view(gpu_node())}
    assert rows["GPU-7"].state == "unhealthy"


def test_devices_without_any_health_source_are_unknown_not_unhealthy():
    node = snap(pods=(holding("a", "p", "c", GPU, ["GPU-0"]),))
    (row,) = analyze.devices_view(node)
    assert (row.health, row.state) == ("Unknown", "allocated")
    (res,) = analyze.resources_view(node)
    assert (res.capacity, res.capacity_min, res.allocatable, res.allocated, res.free, res.unhealthy) == (
        None,
        1,
        None,
        1,
        None,
        None,
    )


# --- pods ----------------------------------------------------------------------------------------


def test_device_entries_merge_per_container_and_resource():
    pod = PodResources(
        "ml",
        "p",
        (
            ContainerResources(
                "c",
                (
                    ContainerDevices(GPU, ("GPU-0",), (0,)),
                    ContainerDevices(NIC, ("nic-1",), (1,)),
                    ContainerDevices(GPU, ("GPU-4",), (1,)),
                ),
            ),
        ),
    )
    (view,) = analyze.pods_view(snap(pods=(pod,)))
    assert to_plain(view.containers[0].devices) == [
        {"resource": GPU, "ids": ["GPU-0", "GPU-4"], "numa_nodes": [0, 1]},
        {"resource": NIC, "ids": ["nic-1"], "numa_nodes": [1]},
    ]


def test_pods_filters():
    node = gpu_node(pods=(*gpu_node().pods, holding("net", "r", "c", NIC, ["nic-0"])))
    assert [p.name for p in analyze.pods_view(node)] == ["infer-0", "train-0", "r"]
    assert [p.name for p in analyze.pods_view(node, namespace="net")] == ["r"]
    assert [p.name for p in analyze.pods_view(node, resource=NIC)] == ["r"]
    assert [p.name for p in analyze.pods_view(node, pod="train-0")] == ["train-0"]
    assert analyze.pods_view(node, namespace="nope") == ()
    assert analyze.find_pod(node, "r", "net").containers[0].devices[0].ids == ("nic-0",)
    assert analyze.find_pod(node, "r", "default") is None


# --- topo ----------------------------------------------------------------------------------------


def test_numa_nodes_cpus_and_shared_pool():
    view = analyze.topology_view(gpu_node())
    n0, n1 = view.numa_nodes
    assert n0.cpus == tuple(range(16)) and n0.allocatable_cpus == tuple(range(2, 16))
    assert n0.exclusive_cpus == (2, 3) and n1.exclusive_cpus == (20,)
    assert n0.shared_cpus == tuple(range(4, 16))
    assert view.shared_pool == tuple(c for c in range(2, 32) if c not in (2, 3, 20))
    assert to_plain(n0.devices) == {GPU: {"total": 4, "allocated": 2, "free": 2, "total_min": None}}
    assert to_plain(n1.devices) == {GPU: {"total": 4, "allocated": 1, "free": 2, "total_min": None}}  # GPU-7 unhealthy


def test_alignment_per_container():
    mem0 = (ContainerMemory("memory", 1 << 30, (0,)),)
    node = gpu_node(
        pods=(
            holding("a", "aligned", "c", GPU, ["GPU-0"], cpu_ids=(2, 3), memory=mem0),
            holding("a", "split", "c", GPU, ["GPU-4"], numa=1, cpu_ids=(2,), memory=mem0),
            holding("a", "cpus-only", "c", GPU, [], cpu_ids=(2, 17)),
        )
    )
    rows = {a.pod: a for a in analyze.topology_view(node).alignment}
    assert to_plain(rows["aligned"]) == {
        "namespace": "a",
        "pod": "aligned",
        "container": "c",
        "aligned": True,
        "device_numa": [0],
        "cpu_numa": [0],
        "memory_numa": [0],
    }
    assert rows["split"].aligned is False and rows["split"].device_numa == (1,)
    assert rows["cpus-only"].aligned is False and rows["cpus-only"].cpu_numa == (0, 1)


def test_a_device_on_two_numa_nodes_serves_either_and_counts_on_both():
    dev = (Device("fpga-0", "Healthy", (0, 1)),)
    node = gpu_node(
        pods=(holding("a", "p", "c", "x.io/fpga", ["fpga-0"], numa=None, cpu_ids=(18,)),),
        plugins=(PluginProbe("/f.sock", PluginStatus.SERVING, "x.io/fpga", OPTS, dev),),
    )
    view = analyze.topology_view(node)
    assert [n.devices["x.io/fpga"].total for n in view.numa_nodes] == [1, 1]
    (row,) = view.alignment
    assert (row.aligned, row.device_numa, row.cpu_numa) == (True, (0, 1), (1,))


def test_without_sysfs_nodes_come_from_devices_and_alignment_of_cpus_is_unknown():
    node = gpu_node(topology=None)
    view = analyze.topology_view(node)
    assert [n.id for n in view.numa_nodes] == [0, 1]
    assert all(n.cpus == () for n in view.numa_nodes)
    assert {a.aligned for a in view.alignment} == {None}


def test_devices_without_topology_count_under_node_minus_one():
    node = snap(plugins=(PluginProbe("/t.sock", PluginStatus.SERVING, GPU, OPTS, (Device("tegra"),)),))
    (n,) = analyze.topology_view(node).numa_nodes
    assert n.id is None and n.devices[GPU].total == 1


# --- checkpoint ----------------------------------------------------------------------------------


def cp_entry(uid: str, container: str, ids: list[str]) -> CheckpointEntry:
    return CheckpointEntry(uid, container, GPU, {"0": tuple(ids)}, Allocation(envs={"V": ",".join(ids)}))


def test_checkpoint_entries_are_named_and_flagged_stale():
    cp = Checkpoint(
        "/cp",
        "v2",
        True,
        7,
        7,
        {GPU: ("GPU-0",)},
        (
            cp_entry("uid-train", "main", ["GPU-0", "GPU-1"]),  # named by its log dir, live
            cp_entry("uid-infer", "srv", ["GPU-4"]),  # no identity: named by holding GPU-4
            cp_entry("uid-gone", "main", ["GPU-3"]),  # named, but List no longer has it
            cp_entry("uid-ghost", "main", ["GPU-2"]),  # nobody knows it
        ),
    )
    node = gpu_node(
        checkpoint=cp,
        pod_identities=(PodIdentity("uid-train", "ml", "train-0"), PodIdentity("uid-gone", "ml", "gone-0")),
    )
    rows = {e.pod_uid: e for e in analyze.checkpoint_view(node).entries}
    assert to_plain(rows["uid-train"].pod) == {"namespace": "ml", "name": "train-0"}
    assert rows["uid-train"].stale is False
    assert to_plain(rows["uid-infer"].pod) == {"namespace": "ml", "name": "infer-0"}
    assert rows["uid-infer"].stale is False
    assert rows["uid-gone"].stale is True and rows["uid-gone"].pod.name == "gone-0"
    assert rows["uid-ghost"].stale is True and rows["uid-ghost"].pod is None
    assert to_plain(rows["uid-train"].allocation)["envs"] == {"V": "GPU-0,GPU-1"}


def test_without_pod_resources_staleness_comes_from_identities_alone():
    cp = Checkpoint("/cp", "v2", True, 1, 1, {}, (cp_entry("u1", "c", ["a"]), cp_entry("u2", "c", ["b"])))
    node = snap(checkpoint=cp, pod_identities=(PodIdentity("u1", "", ""),))
    rows = {e.pod_uid: e for e in analyze.checkpoint_view(node).entries}
    assert rows["u1"].stale is False and rows["u1"].pod is None  # the UID exists, its name is unknown
    assert rows["u2"].stale is True


def test_an_unreadable_checkpoint_is_an_empty_view():
    view = analyze.checkpoint_view(snap(errors=(SourceError("checkpoint", "/cp: not JSON"),)))
    assert (view.path, view.format, view.checksum_ok, view.entries) == (PATHS.checkpoint, None, None, ())


# --- plugins and sources -------------------------------------------------------------------------


def test_plugins_view():
    node = gpu_node(
        kubelet_socket_present=True,
        plugins=(
            *gpu_node().plugins,
            PluginProbe("/r/k/device-plugins/a.sock", PluginStatus.TIMEOUT, error="no answer"),
        ),
        kubelet_socket_status=SocketStatus.STALE,
        errors=(SourceError("checkpoint", f"{PATHS.checkpoint}: gone", ErrorKind.MISSING),),
    )
    view = analyze.plugins_view(node)
    assert to_plain(view.kubelet_socket) == {"path": PATHS.kubelet_socket, "present": True, "status": "stale"}
    assert to_plain(view.checkpoint) == {"path": PATHS.checkpoint, "present": False, "checksum_ok": None}
    a, gpu = view.plugins
    assert (a.status, a.devices, a.error, a.error_kind) == ("timeout", None, "no answer", None)
    assert (gpu.resource, gpu.devices, gpu.healthy, gpu.latency_ms) == (GPU, 8, 7, 0.5)


def test_a_corrupt_checkpoint_is_present():
    node = snap(errors=(SourceError("checkpoint", "/cp: not JSON"),))
    assert analyze.plugins_view(node).checkpoint.present is True


def test_sources_read():
    assert analyze.sources_read(snap()) == frozenset()
    assert analyze.sources_read(gpu_node()) == {analyze.POD_RESOURCES, analyze.PLUGINS, analyze.TOPOLOGY}
    stale_only = snap(plugins=(PluginProbe("/s.sock", PluginStatus.STALE),))
    assert analyze.sources_read(stale_only) == {analyze.PLUGINS}  # the directory was read
    unlisted = snap(errors=(SourceError(analyze.PLUGINS_DIR_SOURCE, "/d: permission denied"),))
    assert analyze.sources_read(unlisted) == frozenset()
    # A non-root user lists the directory but may open no socket in it: that read nothing.
    denied = (PluginStatus.PERMISSION_DENIED, PluginStatus.TIMEOUT)
    forbidden = snap(plugins=tuple(PluginProbe(f"/{s.value}.sock", s) for s in denied))
    assert analyze.sources_read(forbidden) == frozenset()


def test_no_rights_on_the_kubelets_side_is_refused():
    denied = SourceError(analyze.POD_RESOURCES, "/p: permission denied", ErrorKind.PERMISSION_DENIED)
    forbidden = snap(
        plugins=(PluginProbe("/a.sock", PluginStatus.PERMISSION_DENIED, error_kind=ErrorKind.PERMISSION_DENIED),),
        topology=HostTopology(),  # sysfs is anyone's to read: no help without the kubelet's sources
        errors=(denied,),
    )
    assert analyze.refused(forbidden, analyze.ALL_SOURCES)
    assert analyze.refused(forbidden, {analyze.TOPOLOGY, analyze.POD_RESOURCES})
    assert not analyze.refused(forbidden, {analyze.TOPOLOGY})  # nothing of the kubelet's was asked for
    # One kubelet source read is an answer; a missing socket is no refusal.
    assert not analyze.refused(gpu_node(errors=(denied,)), analyze.ALL_SOURCES)
    missing = SourceError(analyze.POD_RESOURCES, "/p: no such socket", ErrorKind.MISSING)
    assert not analyze.refused(snap(errors=(missing,)), analyze.ALL_SOURCES)


# --- unknown is not zero -------------------------------------------------------------------------


def test_without_pod_resources_who_holds_what_is_unknown_not_zero():
    failed = SourceError(analyze.POD_RESOURCES, "/p: rejected by the kubelet's rate limit", ErrorKind.RATE_LIMITED)
    node = gpu_node(pods=None, allocatable=None, errors=(failed,))
    (row,) = analyze.resources_view(node)
    # The plugin answers for capacity and health; pod-resources alone knows holders.
    assert (row.capacity, row.allocatable, row.unhealthy) == (8, 7, 1)
    assert (row.allocated, row.free) == (None, None)
    devices = {d.id: d for d in analyze.devices_view(node)}
    assert (devices["GPU-0"].state, devices["GPU-0"].allocated_to) == (None, None)
    assert devices["GPU-7"].health == "Unhealthy"
    counts = analyze.topology_view(node).numa_nodes[0].devices[GPU]
    assert (counts.total, counts.allocated, counts.free) == (4, None, None)


def test_a_stopped_plugins_capacity_is_at_least_what_the_checkpoint_names():
    # Four GPUs, two unhealthy, then the plugin exits: the checkpoint's RegisteredDevices
    # holds the two healthy ones; the kubelet keeps all four for 5 minutes, none allocatable.
    cp = Checkpoint("/cp", "v2", True, 1, 1, {GPU: ("GPU-0", "GPU-1")})
    node = snap(pods=(), allocatable=AllocatableResources(), checkpoint=cp)
    (row,) = analyze.resources_view(node)
    assert (row.status, row.capacity, row.capacity_min) == ("no-plugin", None, 2)
    assert (row.allocatable, row.allocated, row.free, row.unhealthy) == (0, 0, 0, None)
    counts = analyze.topology_view(node).numa_nodes[0].devices[GPU]
    assert (counts.total, counts.total_min) == (None, 2)
    # Without pod-resources either, the checkpoint says the devices exist, not that they are healthy.
    (row,) = analyze.resources_view(snap(checkpoint=cp))
    assert (row.capacity, row.capacity_min, row.allocatable, row.allocated, row.free) == (None, 2, None, None, None)
    assert {d.health for d in analyze.devices_view(snap(checkpoint=cp))} == {"Unknown"}


# --- scale ---------------------------------------------------------------------------------------

SHARED = 20_000


@pytest.mark.timeout(30)
def test_twenty_thousand_containers_sharing_one_device_id():
    # One device ID held by 20,000 containers (a shared or time-sliced device), and a
    # checkpoint entry for each: the analysis stays linear (it took 38 s for `ls`, and
    # longer for `devices` and `checkpoint`, when each holder was checked against all).
    pods = tuple(holding("ns", f"p{i}", "main", GPU, ["GPU-0"]) for i in range(SHARED))
    entries = tuple(cp_entry(f"uid-{i}", "main", ["GPU-0"]) for i in range(SHARED))
    node = gpu_node(pods=pods, checkpoint=Checkpoint("/cp", "v2", True, 1, 1, {GPU: ("GPU-0",)}, entries))
    (row,) = analyze.resources_view(node)
    assert (row.allocated, row.free) == (1, 6)
    gpu0 = next(d for d in analyze.devices_view(node) if d.id == "GPU-0")
    assert len(gpu0.allocated_to) == SHARED and gpu0.allocated_to[-1].pod == f"p{SHARED - 1}"
    assert analyze.topology_view(node).numa_nodes[0].devices[GPU].allocated == 1
    view = analyze.checkpoint_view(node)
    assert len(view.entries) == SHARED and view.entries[0].pod is None  # 20,000 pods hold it: none is named
    assert len(analyze.pods_view(node)) == SHARED


def shared_device_node(containers: int) -> NodeSnapshot:
    pods = tuple(holding("ns", f"p{i}", "main", GPU, ["GPU-0"]) for i in range(containers))
    entries = tuple(cp_entry(f"uid-{i}", "main", ["GPU-0"]) for i in range(containers))
    return gpu_node(pods=pods, checkpoint=Checkpoint("/cp", "v2", True, 1, 1, {GPU: ("GPU-0",)}, entries))


def calls(fn, node: NodeSnapshot) -> int:
    """How many Python and built-in function calls ``fn(node)`` makes: work, counted, not timed."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(fn, node)
    return pstats.Stats(profile).total_calls


@pytest.mark.parametrize(
    "view",
    [analyze.resources_view, analyze.devices_view, analyze.topology_view, analyze.pods_view, analyze.checkpoint_view],
    ids=lambda v: v.__name__,
)
def test_the_work_of_each_view_grows_linearly_with_the_holders_of_one_device(view):
    small, large = calls(view, shared_device_node(500)), calls(view, shared_device_node(1000))
    assert large <= 2.1 * small, (small, large)
