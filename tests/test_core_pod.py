"""core/pod: the one use-case behind `devctl get`, on a live (simulated) node and on a `--from` snapshot.

What a face gets: the pod merged with its devices' health laid over, the plugin devices' health map (or None when
not read), and one typed error per failure: NoSuchPod carrying where pods of that name run, RpcFailure carrying
the one line to show.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from devctl.core.collect import collect
from devctl.core.failures import NoSuchPod, PodNotFound, RpcFailure
from devctl.core.paths import not_a_node, resolve_paths
from devctl.core.pod import PodReading, pod_from_snapshot, read_pod
from devctl.model import (
    PLUGINS_DIR_SOURCE,
    POD_RESOURCES,
    ContainerDevices,
    ContainerResources,
    ErrorKind,
    NodeSnapshot,
    PodResources,
    SourceError,
)

GPU = "nvidia.com/gpu"
ANSWER = 10.0  # every server answers: far above a loaded CI's delays


async def bounded(coro, seconds: float = 30):
    return await asyncio.wait_for(coro, seconds)


def claim_devices(reading: PodReading) -> dict[str, str | None]:
    (claim,) = reading.pod.containers[0].dynamic_resources
    return {d.device: d.health for d in claim.devices}


async def test_a_pod_found_carries_its_claims_and_plugin_devices_health(sim_node) -> None:
    # GIVEN the simulated node, where ml/train-1 holds two plugin GPUs and the DRA claim of gpu-2 and gpu-3
    # (gpu-3 unhealthy), and one of its plugin GPUs turns Unhealthy
    first = await bounded(read_pod(sim_node.paths, ANSWER, "train-1", "ml", health=True))
    (held,) = [d for d in first.pod.containers[0].devices if d.resource == GPU]
    sick = held.ids[0]
    sim_node.set_health(GPU, sick, "Unhealthy")
    # WHEN the pod is read with its health
    reading = await bounded(read_pod(sim_node.paths, ANSWER, "train-1", "ml", health=True))
    # THEN its claim devices carry their drivers' health, its plugin devices the plugin's word
    assert (reading.pod.namespace, reading.pod.name) == ("ml", "train-1")
    assert claim_devices(reading) == {"gpu-2": "Healthy", "gpu-3": "Unhealthy"}
    assert reading.health is not None
    assert reading.health[GPU][sick] == "Unhealthy"
    assert all(reading.health[GPU][i] == "Healthy" for i in held.ids if i != sick)


async def test_without_health_a_pod_of_plugin_devices_only_reads_no_plugin(sim_node) -> None:
    # ml/train-0 holds plugin devices and no claim: -o json shows no HEALTHY, so no plugin list is read
    reading = await bounded(read_pod(sim_node.paths, ANSWER, "train-0", "ml", health=False))
    assert reading.health is None
    assert {d.resource for c in reading.pod.containers for d in c.devices} >= {GPU}
    with_health = await bounded(read_pod(sim_node.paths, ANSWER, "train-0", "ml", health=True))
    assert with_health.health is not None and GPU in with_health.health


async def test_a_pod_not_found_says_where_pods_of_that_name_run(sim_node) -> None:
    # `devctl get train-0` in the default namespace: the error carries the node's List, where it runs in ml
    with pytest.raises(NoSuchPod) as caught:
        await bounded(read_pod(sim_node.paths, ANSWER, "train-0", "default", health=True))
    e = caught.value
    assert isinstance(e, PodNotFound)  # a face that catches the old class still catches it
    assert (e.name, e.namespace) == ("train-0", "default")
    assert str(e) == "pod train-0 in namespace default not found"
    assert e.snapshot.pods is not None
    assert {p.namespace for p in e.snapshot.pods if p.name == "train-0"} == {"ml"}


async def test_a_root_that_is_no_node_is_one_rpc_failure_saying_so(short_root: Path) -> None:
    paths = resolve_paths(root=str(short_root), env={})  # an empty directory: no kubelet, no device-plugins dir
    with pytest.raises(RpcFailure) as caught:
        await bounded(read_pod(paths, ANSWER, "train-0", "ml", health=True))
    assert caught.value.kind == ErrorKind.MISSING
    assert caught.value.message == not_a_node(paths)


async def test_a_node_whose_kubelet_is_down_is_its_socket_failure(short_root: Path) -> None:
    paths = resolve_paths(root=str(short_root), env={})
    os.makedirs(paths.plugins_dir)  # a node, its pod-resources socket missing: the socket's own failure
    with pytest.raises(RpcFailure) as caught:
        await bounded(read_pod(paths, ANSWER, "train-0", "ml", health=True))
    assert caught.value.kind == ErrorKind.MISSING
    assert caught.value.message != not_a_node(paths)
    assert paths.pod_resources in caught.value.message


# --- --from FILE ---------------------------------------------------------------------------------------------


async def test_from_a_snapshot_a_pod_carries_what_the_snapshot_tells(sim_node) -> None:
    snap = await bounded(collect(sim_node.paths, ANSWER))
    reading = pod_from_snapshot(snap, "train-1", "ml")
    assert claim_devices(reading) == {"gpu-2": "Healthy", "gpu-3": "Unhealthy"}
    (held,) = [d for d in reading.pod.containers[0].devices if d.resource == GPU]
    assert reading.health is not None and set(reading.health[GPU]) >= set(held.ids)
    with pytest.raises(NoSuchPod) as caught:
        pod_from_snapshot(snap, "train-1", "default")
    assert caught.value.snapshot is snap


def snapshot(tmp_path: Path, pods=None, errors=()) -> NodeSnapshot:
    return NodeSnapshot("2024-01-01T00:00:00Z", resolve_paths(root=str(tmp_path), env={}), pods=pods, errors=errors)


def test_from_a_snapshot_the_pod_is_merged_and_without_devices_no_health(tmp_path: Path) -> None:
    pod = PodResources("ml", "cpu-0", (ContainerResources("main", (), (2, 3)),))
    reading = pod_from_snapshot(snapshot(tmp_path, pods=(pod,)), "cpu-0", "ml")
    assert reading == PodReading(pod, None)
    gpu = PodResources("ml", "gpu-0", (ContainerResources("main", (ContainerDevices(GPU, ("GPU-0",), (0,)),)),))
    reading = pod_from_snapshot(snapshot(tmp_path, pods=(gpu,)), "gpu-0", "ml")
    assert reading.health is not None and reading.health[GPU]["GPU-0"] == "Unknown"  # no plugin list: unknown


def test_a_snapshot_without_pod_resources_says_why_as_on_the_node(tmp_path: Path) -> None:
    # no pod-resources and no error for it: the snapshot holds none
    with pytest.raises(RpcFailure) as caught:
        pod_from_snapshot(snapshot(tmp_path), "train-0", "ml")
    assert caught.value.message == "the snapshot holds no pod-resources"
    # refused on the node: its own message and kind (the face adds "run as root")
    refused = SourceError(POD_RESOURCES, "/x/kubelet.sock: permission denied", ErrorKind.PERMISSION_DENIED)
    with pytest.raises(RpcFailure) as caught:
        pod_from_snapshot(snapshot(tmp_path, errors=(refused,)), "train-0", "ml")
    assert (caught.value.message, caught.value.kind) == (refused.message, ErrorKind.PERMISSION_DENIED)
    # missing, on a root without a device-plugins dir: is this a node?
    missing = SourceError(POD_RESOURCES, "/x/kubelet.sock: no such socket", ErrorKind.MISSING)
    no_dir = SourceError(PLUGINS_DIR_SOURCE, "/x/device-plugins: missing", ErrorKind.MISSING)
    snap = snapshot(tmp_path, errors=(missing, no_dir))
    with pytest.raises(RpcFailure) as caught:
        pod_from_snapshot(snap, "train-0", "ml")
    assert caught.value.message == not_a_node(snap.paths)
    # missing on a node that has its device-plugins dir: the socket's own message
    with pytest.raises(RpcFailure) as caught:
        pod_from_snapshot(snapshot(tmp_path, errors=(missing,)), "train-0", "ml")
    assert caught.value.message == missing.message
