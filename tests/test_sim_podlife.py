"""Pods that come and go on the simulated node: delete-pod unprepares DRA claims and frees devices; add-pod admits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import run_devctl_async

from devctl.lab.sim.control import request
from devctl.lab.sim.node import SimNode
from devctl.lab.sim.scenario import default_scenario
from devctl.node.checkpoint import read_checkpoint
from devctl.node.dra_checkpoint import read_dra_checkpoint

WAIT = 10.0
DRIVER = "gpu.example.com"


@pytest.fixture
async def node(short_root: Path) -> AsyncIterator[SimNode]:
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(WAIT)
        yield n


def cdi_specs(node: SimNode) -> set[str]:
    """The claims' CDI specs (the time-sliced GPU's, the plugin's own, stays whatever happens to a pod)."""
    return {p.name for p in (node.root / "var" / "run" / "cdi").iterdir() if p.name.startswith(f"k8s.{DRIVER}-")}


def claims(node: SimNode) -> set[str]:
    return {c.name for c in read_dra_checkpoint(f"{node.paths.kubelet_dir}/dra_manager_state").claims}


async def test_delete_pod_unprepares_once_removes_the_cdi_file_and_frees_devices(node: SimNode) -> None:
    driver = node.dra_drivers[DRIVER]
    (uid,) = [u for u, names in driver.prepared.items() if names == ("gpu-2", "gpu-3")]
    before = len(read_checkpoint(node.paths.checkpoint).entries)
    # WHEN ml/train-1 (a claim and two device-plugin GPUs) is deleted from another shell
    result = await run_devctl_async("sim", "delete-pod", "ml/train-1", root=node.root)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("deleted pod ml/train-1 (")
    # THEN its claim was unprepared once, its CDI file is gone, the claim left the checkpoint
    assert [r.detail.split()[1] for r in driver.rpc_log if r.rpc == "NodeUnprepareResources"] == ["ml/train-1-gpus"]
    assert f"k8s.{DRIVER}-claim_{uid}.yaml" not in cdi_specs(node) and len(cdi_specs(node)) == 1
    assert claims(node) == {"embed-gpu"}
    # and its device-plugin devices are free again, the device-manager checkpoint written
    assert len(read_checkpoint(node.paths.checkpoint).entries) == before - 1
    assert "ml/train-1" not in (await request(str(node.root), {"op": "info"}, WAIT))["pods"]
    # WHEN it is added back from a file in the scenario's pod format
    pod = node.root / "pod.yaml"
    pod.write_text(
        "namespace: ml\nname: train-1\n"
        "containers:\n  - name: trainer\n    requests: {nvidia.com/gpu: 2}\n    cpus: '16-21'\n"
    )
    added = await run_devctl_async("sim", "add-pod", str(pod), root=node.root)
    # THEN it is admitted again: its claim prepared again, its GPUs allocated
    assert added.exit_code == 0, added.stderr
    assert claims(node) == {"embed-gpu", "train-1-gpus"} and len(cdi_specs(node)) == 2
    assert len(read_checkpoint(node.paths.checkpoint).entries) == before


async def test_with_its_driver_gone_the_claim_stays_and_the_pod_cannot_finish(node: SimNode) -> None:
    # GIVEN the DRA driver killed while its claims are prepared
    await node.dra_drivers.pop(DRIVER).stop()
    await node.dra_manager.wait_until(lambda: DRIVER not in node.dra_manager.drivers, WAIT)
    # WHEN a pod with a claim is deleted
    result = await run_devctl_async("sim", "delete-pod", "inference/embed-0", root=node.root)
    # THEN it cannot finish terminating: one line saying why, the claim stays, the pod still runs
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "devctl: pod inference/embed-0 cannot finish terminating: claim inference/embed-gpu: "
        f"DRA driver {DRIVER} is not registered; the claim stays"
    )
    assert "embed-gpu" in claims(node)
    assert "inference/embed-0" in (await request(str(node.root), {"op": "info"}, WAIT))["pods"]


async def test_bad_pod_requests_are_one_line(node: SimNode) -> None:
    missing = await run_devctl_async("sim", "delete-pod", "ml/nope", root=node.root)
    assert missing.exit_code == 1 and "no pod ml/nope runs on the simulated node" in missing.stderr
    pod = node.root / "pod.yaml"
    pod.write_text("namespace: ml\nname: train-0\ncontainers: [{name: x}]\n")
    again = await run_devctl_async("sim", "add-pod", str(pod), root=node.root)
    assert again.exit_code == 1 and "pod ml/train-0 already runs" in again.stderr
    pod.write_text("namespace: ml\nname: new\ncontainers: [{name: x, cpus: '2-3'}]\n")
    cpus = await run_devctl_async("sim", "add-pod", str(pod), root=node.root)
    assert cpus.exit_code == 1 and "exclusive CPUs [2, 3] are held by a running pod" in cpus.stderr
    pod.write_text("namespace: ml\nname: new\ncontainers: [{name: x, colour: red}]\n")
    bad = await run_devctl_async("sim", "add-pod", str(pod), root=node.root)
    assert bad.exit_code == 1 and "unknown field 'colour'" in bad.stderr


async def test_a_dra_cdi_name_resolves_to_a_pci_function_and_its_numa_node(node: SimNode) -> None:
    """CDI name -> spec file -> device node major:minor -> /sys/dev/char link -> PCI function -> numa_node."""
    numa = {d.name: d.numa_nodes[0] for d in node.scenario.dra.drivers[0].devices}
    resolved = _resolve(node.root, Path(node.paths.sysfs), node.dra_drivers[DRIVER].prepared)
    assert resolved == {name: numa[name] for names in node.dra_drivers[DRIVER].prepared.values() for name in names}
    assert len(resolved) == 3


def _resolve(root: Path, sysfs: Path, prepared: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Each prepared device's NUMA node, found only through its CDI spec and sysfs, as a reader on a host does."""
    import os

    import yaml

    out = {}
    for uid in prepared:
        spec = yaml.safe_load((root / "var" / "run" / "cdi" / f"k8s.{DRIVER}-claim_{uid}.yaml").read_text())
        for device in spec["devices"]:
            (dev,) = device["containerEdits"]["deviceNodes"]
            function = Path(os.path.realpath(sysfs / "dev" / "char" / f"{dev['major']}:{dev['minor']}"))
            assert function.parent.name.startswith("pci0000:") and function.name.startswith(("0000:d0:", "0000:e0:"))
            assert os.readlink(function / "driver").endswith("bus/pci/drivers/gpu")
            out[device["name"].removeprefix(f"{uid}-")] = int((function / "numa_node").read_text())
    return out


async def test_a_device_plugin_registered_through_plugins_registry_goes_to_the_device_manager(node: SimNode) -> None:
    """The watcher hands a DevicePlugin to the device manager: dialled for its options, then followed."""
    from test_sim_dra import registration

    from devctl.api.pluginregistration.v1 import api_pb2 as reg
    from devctl.lab.plugin.server import DevicePluginServer
    from devctl.lab.plugin.spec import PluginSpec
    from devctl.model import Device

    spec = PluginSpec(resource="example.com/watched", devices=(Device("w-0"), Device("w-1")), socket="watched.sock")
    registry = Path(node.paths.plugins_registry)
    async with DevicePluginServer(spec, str(registry), register=False) as plugin:
        # the endpoint as the kubelet sees it on the node: a host path, read under the node root
        endpoint = "/" + str(Path(plugin.socket_path).relative_to(node.root))
        info = reg.PluginInfo(
            type="DevicePlugin", name=spec.resource, endpoint=endpoint, supported_versions=["v1beta1"]
        )
        async with registration(registry / "watched-reg.sock", info) as fake:
            status = await asyncio.wait_for(fake.status.get(), WAIT)
            assert status.plugin_registered, status.error
            dm = node.device_manager
            await dm.wait_until(lambda: dm.connected(spec.resource), WAIT)
            state = dm.resource(spec.resource)
            assert state is not None and state.capacity == 2


async def test_after_a_kubelet_restart_the_claims_come_back_from_the_checkpoint(node: SimNode) -> None:
    from devctl.lab.sim.dranode import wait_drivers
    from devctl.node.podresources import PodResourcesClient

    await node.restart_kubelet()
    await wait_drivers(node.dra_manager, node.scenario.dra, WAIT)
    async with PodResourcesClient(node.paths.pod_resources, timeout=WAIT) as client:
        pods = {f"{p.namespace}/{p.name}": p for p in await client.list()}
    (claim,) = pods["ml/train-1"].containers[0].dynamic_resources
    assert [d.device for d in claim.devices] == ["gpu-2", "gpu-3"]
    # and the re-created DRA manager can unprepare what the old one prepared
    result = await run_devctl_async("sim", "delete-pod", "ml/train-1", root=node.root)
    assert result.exit_code == 0, result.stderr
    assert claims(node) == {"embed-gpu"}


async def test_a_pod_deleted_and_added_again_is_created_anew_for_the_runtime(node: SimNode) -> None:
    """The scenario derives a pod's UID from its name, so ml/train-0 deleted and added back has the same UID: the
    CRI must say it was created when it came back, or `devctl events` would name it the holder of a kernel line
    written while it did not exist."""
    from datetime import datetime, timezone

    from devctl.node.cri_times import read_pod_times

    async def train0_created() -> datetime | None:
        pod = (await read_pod_times(node.workload.runtime.socket_path, WAIT)).get(("ml", "train-0"))
        created = [datetime.fromisoformat(s.created_at) for s in pod.sandboxes if s.created_at] if pod else []
        return min(created, default=None)

    before = await train0_created()
    assert before is not None and before < datetime.now(timezone.utc)  # a scenario pod: created before the start
    assert (await run_devctl_async("sim", "delete-pod", "ml/train-0", root=node.root)).exit_code == 0
    gone_at = datetime.now(timezone.utc)
    pod = node.root / "pod.yaml"
    pod.write_text("namespace: ml\nname: train-0\ncontainers:\n  - name: trainer\n    requests: {nvidia.com/gpu: 1}\n")
    assert (await run_devctl_async("sim", "add-pod", str(pod), root=node.root)).exit_code == 0
    after = await train0_created()
    assert after is not None and after >= gone_at > before
