"""collect() against real servers on real unix sockets: every source at once, each failure on its own.

The node is built by hand from the simulator's parts (the plugin server, the
pod-resources server, the checkpoint writer, the sysfs writer) and the
misbehaving servers of tests/badservers.py, so each case sets exactly one fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from badservers import (
    frozen_socket,
    huge_pod_resources,
    hung_server,
    malformed_plugin,
    rate_limited_pod_resources,
    stale_socket,
)
from helpers import BOUND, DEVCTL, IMPORT_ALL, devctl_env

from devctl import analyze
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devctl.core.collect import (
    SnapshotError,
    collect,
    dump_snapshot,
    get_pod,
    infer_resource,
    load_snapshot,
)
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec
from devctl.lab.sim.podresources import PodResourcesServer
from devctl.lab.sim.sysfs import write_topology
from devctl.model import (
    AllocatableResources,
    ContainerDevices,
    ContainerResources,
    Device,
    ErrorKind,
    NumaNode,
    PluginStatus,
    PodResources,
    SocketStatus,
)
from devctl.node.checkpoint import RawEntry, write_checkpoint
from devctl.node.paths import resolve_paths
from devctl.node.podresources import PodNotFound

GPU = "nvidia.com/gpu"
NIC = "example.com/nic"
NO_IDENTITIES = analyze.ALL_SOURCES - {analyze.IDENTITIES}
TIMEOUT = 0.5  # collect's deadline where servers never answer
ANSWER = 5.0  # collect's deadline where every server answers: far above a loaded CI's delays


class State:
    def __init__(self, pods=(), allocatable=None):
        self._pods, self._alloc = tuple(pods), allocatable or AllocatableResources()

    def pods(self):
        return self._pods

    def allocatable(self):
        return self._alloc


def gpus(n: int = 4) -> tuple[Device, ...]:
    return tuple(Device(f"GPU-{i}", "Healthy", (i % 2,)) for i in range(n))


POD = PodResources("ml", "train-0", (ContainerResources("main", (ContainerDevices(GPU, ("GPU-0",), (0,)),), (2, 3)),))
ALLOC = AllocatableResources(
    devices=tuple(ContainerDevices(GPU, (d.id,), d.numa_nodes) for d in gpus()), cpu_ids=tuple(range(2, 8))
)


@pytest.fixture
def node(short_root: Path):
    paths = resolve_paths(root=str(short_root), env={})
    os.makedirs(paths.plugins_dir)
    os.makedirs(os.path.dirname(paths.pod_resources))
    return paths


@contextlib.asynccontextmanager
async def plugin(paths, resource: str, devices, socket: str):
    server = DevicePluginServer(PluginSpec(resource, devices, socket), paths.plugins_dir, register=False)
    async with server:
        yield server


@contextlib.asynccontextmanager
async def kubelet(paths, pods=(POD,), allocatable=ALLOC, **kw):
    async with PodResourcesServer(paths.pod_resources, State(pods, allocatable), **kw) as server:
        yield server


def write_node_files(paths) -> None:
    write_checkpoint(
        paths.checkpoint,
        [RawEntry("uid-1", "main", GPU, {"0": ["GPU-0"]}, b"")],
        {GPU: [d.id for d in gpus()]},
    )
    write_topology(Path(paths.sysfs), [NumaNode(0, (0, 1, 2, 3)), NumaNode(1, (4, 5, 6, 7))])


async def bounded(coro, seconds: float = 10):
    return await asyncio.wait_for(coro, seconds)


async def test_every_source_at_once(node):
    write_node_files(node)
    async with kubelet(node), plugin(node, GPU, gpus(), "gpu.sock"):
        snap = await bounded(collect(node, ANSWER, want=NO_IDENTITIES))
    assert snap.errors == ()
    assert [p.name for p in snap.pods] == ["train-0"]
    assert snap.allocatable.cpu_ids == tuple(range(2, 8))
    (probe,) = snap.plugins
    assert (probe.socket, probe.status, probe.resource) == (f"{node.plugins_dir}/gpu.sock", PluginStatus.SERVING, GPU)
    assert [d.id for d in probe.devices] == ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]
    assert probe.latency_ms > 0
    assert snap.checkpoint.checksum_ok and snap.checkpoint.entries[0].pod_uid == "uid-1"
    assert [n.id for n in snap.topology.numa_nodes] == [0, 1]
    assert (snap.kubelet_socket_present, snap.kubelet_socket_status) == (False, SocketStatus.MISSING)


async def test_want_reads_only_what_is_asked(node):
    write_node_files(node)
    snap = await bounded(collect(node, ANSWER, want={analyze.CHECKPOINT}))
    assert snap.checkpoint is not None
    assert (snap.pods, snap.topology, snap.plugins, snap.errors) == (None, None, (), ())


async def test_nothing_there_is_errors_not_exceptions(short_root):
    paths = resolve_paths(root=str(short_root), env={})
    snap = await bounded(collect(paths, ANSWER, want=NO_IDENTITIES - {analyze.TOPOLOGY}))
    by_source = {e.source: e.message for e in snap.errors}
    assert {e.kind for e in snap.errors} == {ErrorKind.MISSING}
    assert by_source[analyze.POD_RESOURCES] == f"{paths.pod_resources}: no such socket"
    assert by_source[analyze.PLUGINS_DIR_SOURCE] == f"{paths.plugins_dir}: no such file"
    assert by_source[analyze.CHECKPOINT] == f"{paths.checkpoint}: no such file"
    assert analyze.sources_read(snap) == frozenset()


async def test_bad_sockets_each_get_a_status_and_a_one_line_error(node):
    d = node.plugins_dir
    stale_socket(f"{d}/stale.sock")
    async with (
        kubelet(node),
        plugin(node, GPU, gpus(), "gpu.sock"),
        hung_server(f"{d}/hung.sock"),
        frozen_socket(f"{d}/frozen.sock"),
        malformed_plugin(f"{d}/garbage.sock"),
    ):
        start = time.monotonic()
        snap = await bounded(collect(node, TIMEOUT, want={analyze.PLUGINS, analyze.POD_RESOURCES}))
        elapsed = time.monotonic() - start
    status = {os.path.basename(p.socket): p.status for p in snap.plugins}
    assert status == {
        "frozen.sock": PluginStatus.TIMEOUT,
        "garbage.sock": PluginStatus.UNREACHABLE,
        "gpu.sock": PluginStatus.SERVING,
        "hung.sock": PluginStatus.TIMEOUT,
        "stale.sock": PluginStatus.STALE,
    }
    kinds = {os.path.basename(p.socket): p.error_kind for p in snap.plugins}
    assert kinds == {
        "frozen.sock": ErrorKind.TIMEOUT,
        "garbage.sock": ErrorKind.WRONG_API,
        "gpu.sock": None,
        "hung.sock": ErrorKind.TIMEOUT,
        "stale.sock": ErrorKind.STALE,
    }
    # Each probe's failure is in the errors too, with the same kind.
    assert sorted(e.kind for e in snap.errors if e.source == "plugin") == sorted(k for k in kinds.values() if k)
    errors = [e.message for e in snap.errors if e.source == "plugin"]
    assert len(errors) == 4 and all("\n" not in m for m in errors)
    assert any(m == f"{d}/stale.sock: stale socket (nothing listens on it)" for m in errors)
    # Concurrent: four misbehaving sockets cost about one deadline each in parallel, not four in a row.
    assert elapsed < 3 * TIMEOUT + 1


async def test_resource_of_a_socket_is_inferred_only_when_unique(node):
    # Two plugins whose devices are both named nic-0..: the kubelet ties nic-* to both
    # resources, so neither socket can be named; the GPU socket still can.
    nics = (Device("nic-0"), Device("nic-1"))
    alloc = AllocatableResources(
        devices=(
            *ALLOC.devices,
            *(ContainerDevices(NIC, (d.id,)) for d in nics),
            *(ContainerDevices("other.com/nic", (d.id,)) for d in nics),
        )
    )
    async with (
        kubelet(node, allocatable=alloc),
        plugin(node, GPU, gpus(), "gpu.sock"),
        plugin(node, NIC, nics, "a.sock"),
        plugin(node, "other.com/nic", (Device("nic-0"),), "b.sock"),
    ):
        snap = await bounded(collect(node, ANSWER, want={analyze.PLUGINS, analyze.POD_RESOURCES}))
    resource = {os.path.basename(p.socket): p.resource for p in snap.plugins}
    # a.sock lists exactly what the kubelet ties to both resources: still ambiguous.
    assert resource == {"gpu.sock": GPU, "a.sock": None, "b.sock": None}


def test_infer_resource():
    known = {GPU: {"GPU-0", "GPU-1"}, NIC: {"n-0", "n-1"}, "b.com/nic": {"n-0"}}
    assert infer_resource(["GPU-0", "GPU-1", "GPU-9"], known) == GPU
    assert infer_resource(["n-0", "n-1"], known) == NIC  # exactly one resource has exactly these
    assert infer_resource(["n-0"], known) == "b.com/nic"
    assert infer_resource(["x"], known) is None
    assert infer_resource([], known) is None
    assert infer_resource(["n-0", "n-1"], {**known, "c.com/nic": {"n-0", "n-1"}}) is None


class Registry(reg_grpc.RegistrationServicer):
    def __init__(self, info: reg.PluginInfo):
        self.info = info

    async def GetInfo(self, request, context):
        return self.info


@contextlib.asynccontextmanager
async def registry_socket(path: str, info: reg.PluginInfo):
    server = grpc.aio.server()
    reg_grpc.add_RegistrationServicer_to_server(Registry(info), server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)


async def test_plugin_watcher_sockets_name_their_resource(node):
    os.makedirs(node.plugins_registry)
    gpu_sock = "/var/lib/kubelet/device-plugins/gpu.sock"  # as the node names it: read under the root
    dp_info = reg.PluginInfo(type="DevicePlugin", name=GPU, endpoint=gpu_sock, supported_versions=["v1beta1"])
    csi_info = reg.PluginInfo(type="CSIPlugin", name="ebs.csi.aws.com", endpoint="/csi.sock")
    async with (
        plugin(node, GPU, (Device("g0"),), "gpu.sock"),
        registry_socket(f"{node.plugins_registry}/gpu-reg.sock", dp_info),
        registry_socket(f"{node.plugins_registry}/csi-reg.sock", csi_info),
    ):
        snap = await bounded(collect(node, ANSWER, want={analyze.PLUGINS}))
    probes = {os.path.basename(p.socket): p for p in snap.plugins}
    # No pod-resources and no checkpoint: only the registry can name gpu.sock.
    assert probes["gpu.sock"].resource == GPU
    reg_probe = probes["gpu-reg.sock"]
    assert (reg_probe.resource, reg_probe.status, reg_probe.registry.endpoint) == (GPU, PluginStatus.SERVING, gpu_sock)
    assert [d.id for d in reg_probe.devices] == ["g0"]
    assert probes["csi-reg.sock"].registry.type == "CSIPlugin" and probes["csi-reg.sock"].resource is None
    assert [r.name for r in analyze.resources_view(snap)] == [GPU]


async def test_v1alpha1_only_kubelet(node):
    async with kubelet(node, api="v1alpha1"):
        snap = await bounded(collect(node, ANSWER, want={analyze.POD_RESOURCES}))
    assert [p.name for p in snap.pods] == ["train-0"]
    assert snap.pods[0].containers[0].cpu_ids == ()  # v1alpha1 has no CPUs
    assert snap.allocatable is None
    (error,) = snap.errors
    assert error.source == analyze.POD_RESOURCES and "v1alpha1 only" in error.message
    assert error.kind == ErrorKind.UNIMPLEMENTED


async def test_a_reply_above_4_mib(node):
    async with huge_pod_resources(node.pod_resources, pods=5000):
        # The size is tested, not the deadline: decoding 5,000 pods takes seconds on a loaded CI.
        snap = await bounded(collect(node, 30.0, want={analyze.POD_RESOURCES}), 40)
    assert len(snap.pods) == 5000 and snap.errors == ()


async def test_a_hung_kubelet_times_out(node):
    async with hung_server(node.pod_resources):
        snap = await bounded(collect(node, TIMEOUT, want={analyze.POD_RESOURCES}))
    assert snap.pods is None and snap.allocatable is None
    assert all("deadline exceeded" in e.message for e in snap.errors) and len(snap.errors) == 2
    assert {e.kind for e in snap.errors} == {ErrorKind.TIMEOUT}


async def test_the_pod_list_alone_never_asks_for_the_allocatable_devices(node):
    # A hung kubelet answers neither call: only the List was made, so only its deadline is met.
    async with hung_server(node.pod_resources):
        snap = await bounded(collect(node, TIMEOUT, want={analyze.POD_LIST}))
    (error,) = snap.errors
    assert (error.source, error.kind) == (analyze.POD_RESOURCES, ErrorKind.TIMEOUT)
    assert "GetAllocatableResources" not in error.message
    # A kubelet without GetAllocatableResources: the pods, and no line about what was not asked for.
    async with kubelet(node, api="v1alpha1"):
        snap = await bounded(collect(node, ANSWER, want={analyze.POD_LIST}))
    assert [p.name for p in snap.pods] == ["train-0"]
    assert snap.allocatable is None and snap.errors == ()
    # Asked beside the whole of pod-resources, the List is a part of it: the allocatable devices are read.
    async with kubelet(node, api="v1alpha1"):
        snap = await bounded(collect(node, ANSWER, want={analyze.POD_LIST, analyze.POD_RESOURCES}))
    assert [e.kind for e in snap.errors] == [ErrorKind.UNIMPLEMENTED]


def write_corrupt_checkpoint(paths) -> None:
    Path(paths.checkpoint).write_text('{"Data": {"PodDeviceEntries": [')


async def test_the_kubelets_sockets_are_dialled_not_stated(node):
    stale_socket(node.kubelet_socket)  # the kubelet exited: its sockets stay on disk
    stale_socket(node.pod_resources)
    snap = await bounded(collect(node, ANSWER, want={analyze.POD_RESOURCES}))
    assert (snap.kubelet_socket_present, snap.kubelet_socket_status) == (True, SocketStatus.STALE)
    assert [(e.source, e.kind) for e in snap.errors] == [(analyze.POD_RESOURCES, ErrorKind.STALE)]
    os.unlink(node.kubelet_socket)
    async with hung_server(node.kubelet_socket):  # a listener is all "listening" means
        snap = await bounded(collect(node, ANSWER, want=set()))
    assert snap.kubelet_socket_status == SocketStatus.LISTENING


async def test_pod_resources_rate_limited_for_the_whole_run(node):
    async with rate_limited_pod_resources(node.pod_resources) as server:
        snap = await bounded(collect(node, ANSWER, want={analyze.POD_RESOURCES}))
    assert (snap.pods, snap.allocatable) == (None, None)
    assert [e.kind for e in snap.errors] == [ErrorKind.RATE_LIMITED, ErrorKind.RATE_LIMITED]
    assert all("rejected by the kubelet's rate limit 5 times in a row" in e.message for e in snap.errors)
    assert server.rejected == 10  # the client backed off and tried again, a few times only


@pytest.fixture
def sim_process(short_root: Path):
    """`devctl sim --root R` as a process of its own: a test may fork while it serves (gRPC forbids
    forking a process whose threads are inside gRPC, as an in-process simulator's are)."""
    proc = subprocess.Popen(
        [*DEVCTL, "sim", "--root", str(short_root)], stdout=subprocess.PIPE, text=True, env=devctl_env()
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(BOUND), "devctl sim did not start"
        assert proc.stdout.readline().strip() == f"export DEVCTL_ROOT={short_root}"
        yield resolve_paths(root=str(short_root), env={})
    finally:
        proc.terminate()
        proc.communicate(timeout=BOUND)


def test_without_rights_every_kubelet_source_is_permission_denied(sim_process, short_root: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    os.chmod(short_root, 0o755)  # the directories are open; the kubelet's sockets and checkpoint are root's only

    # A fresh interpreter, not a fork of this one (a fork after grpc's threads started can crash): it imports
    # everything as root (nobody may not read an interpreter under /root), then drops to nobody and reads.
    code = (
        IMPORT_ALL
        + f"""
import asyncio, json, os
import concurrent.futures.thread
from devctl import analyze
from devctl.core.collect import collect
from devctl.node.paths import resolve_paths
os.setgroups([]); os.setgid(65534); os.setuid(65534)
snap = asyncio.run(collect(resolve_paths(root={str(sim_process.root)!r}, env={{}}), {ANSWER!r}))
kinds = sorted({{(analyze.source_of(e), e.kind.value) for e in snap.errors}})
print(json.dumps([kinds, snap.kubelet_socket_status.value, analyze.refused(snap, analyze.ALL_SOURCES)]))
"""
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=BOUND, env=devctl_env())
    assert run.returncode == 0, run.stderr
    kinds, kubelet, refused = json.loads(run.stdout)
    assert kinds == [
        [analyze.CHECKPOINT, "permission-denied"],
        [analyze.DRA_CHECKPOINT, "permission-denied"],
        [analyze.PLUGINS, "permission-denied"],
        [analyze.POD_RESOURCES, "permission-denied"],
    ]
    assert kubelet == "permission-denied" and refused is True


async def test_a_corrupt_checkpoint_is_one_error(node):
    write_corrupt_checkpoint(node)
    snap = await bounded(collect(node, ANSWER, want={analyze.CHECKPOINT}))
    (error,) = snap.errors
    assert error.source == analyze.CHECKPOINT and error.message.startswith(node.checkpoint)
    assert error.kind == ErrorKind.MALFORMED
    assert "\n" not in error.message


async def test_get_pod_with_get_and_with_list_fallback(node):
    for enabled in (True, False):
        async with kubelet(node, get_enabled=enabled):
            pod = await bounded(get_pod(node, ANSWER, "train-0", "ml"))
            assert pod.containers[0].devices[0].ids == ("GPU-0",)
            with pytest.raises(PodNotFound):
                await bounded(get_pod(node, ANSWER, "nope", "ml"))


async def test_snapshot_round_trip(node, tmp_path):
    write_node_files(node)
    stale_socket(f"{node.plugins_dir}/stale.sock")
    async with kubelet(node), plugin(node, GPU, gpus(), "gpu.sock"):
        snap = await bounded(collect(node, ANSWER, want=NO_IDENTITIES))
    buf = io.StringIO()
    dump_snapshot(snap, buf)
    assert json.loads(buf.getvalue())["kind"] == "devctl-snapshot/v1"
    path = tmp_path / "snap.json"
    path.write_text(buf.getvalue())
    assert load_snapshot(str(path)) == snap


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "no such file"), ("{", "not JSON"), ('{"a": 1}', "not a devctl snapshot"), (b"\xff\xfe", "not a text")],
)
def test_bad_snapshot_files(tmp_path, content, reason):
    path = tmp_path / "s.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(SnapshotError, match=reason):
        load_snapshot(str(path))


async def test_progress_says_what_is_pending_and_shows_what_answered(node):
    from devctl.core.collect import Progress

    d = node.plugins_dir
    seen: list[Progress] = []
    partials = []

    def report(progress: Progress) -> None:
        seen.append(progress)
        if progress.pending - {"plugins"} == {f"{d}/hung.sock"}:
            partials.append(progress.snapshot())

    async with kubelet(node), plugin(node, GPU, gpus(), "gpu.sock"), hung_server(f"{d}/hung.sock"):
        # GIVEN a node with a serving plugin and a hung one; WHEN collect reports its progress
        snap = await bounded(collect(node, TIMEOUT, progress=report))
        plain = await bounded(collect(node, TIMEOUT))
    # THEN at some point only the hung socket was pending, and what had answered by then had the GPU plugin
    assert partials
    partial = partials[0]
    assert [(os.path.basename(p.socket), p.status) for p in partial.plugins] == [("gpu.sock", PluginStatus.SERVING)]
    assert partial.pods is not None
    # ... at the end nothing was pending, and the result is what collect gives without a callback
    assert seen[-1].pending == frozenset()
    assert [(p.socket, p.status) for p in snap.plugins] == [(p.socket, p.status) for p in plain.plugins]
    assert sorted(e.message for e in snap.errors) == sorted(e.message for e in plain.errors)  # sources end in any order
