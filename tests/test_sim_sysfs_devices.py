"""Device-plugin devices on the simulated node lead to hardware: device node → /sys/dev/char → PCI function → NUMA."""

from __future__ import annotations

import os
from pathlib import Path

import test_sim_node
from helpers import run_devctl_async
from test_sim_node import GPU, VF, WAIT

from devctl.lab.plugin.dra import default_major
from devctl.lab.sim.node import SimNode
from devctl.lab.sim.scenario import default_scenario
from devctl.node.checkpoint import read_checkpoint

FOO = "hardware-vendor.example/foo"
node = test_sim_node.node  # the fixture: the default scenario's node, running


async def devices(node: SimNode) -> dict[tuple[str, str], dict]:
    result = await run_devctl_async("devices", "-o", "json", root=node.root)
    assert result.exit_code == 0, result.stderr
    return {(d["resource"], d["id"]): d for d in result.json["devices"]}


def function(node: SimNode, resource: str, device: str) -> Path:
    """The PCI function behind a device, found as docs/dra.md says: the resource's major, the device's index."""
    spec = node.scenario.resource(resource)
    assert spec is not None
    minor = [d.id for d in spec.devices].index(device)
    link = Path(node.paths.sysfs, "dev", "char", f"{default_major(resource)}:{minor}")
    assert link.is_symlink()
    return Path(os.path.realpath(link))


def nvidia_function(node: SimNode, gpu: str) -> Path:
    """The PCI function behind an NVIDIA GPU of the sim: its /dev/nvidiaN is 195:N, N its index (docs/scenarios.md)."""
    spec = node.scenario.resource(GPU)
    assert spec is not None
    link = Path(node.paths.sysfs, "dev", "char", f"195:{[d.id for d in spec.devices].index(gpu)}")
    assert link.is_symlink()
    return Path(os.path.realpath(link))


def under_sys_devices(node: SimNode, pci: Path) -> bool:
    """Under /sys/devices, below a host bridge (``pciDDDD:BB``), however many switches lie between."""
    devices = Path(node.paths.sysfs).resolve() / "devices"
    return pci.is_relative_to(devices) and any(p.name.startswith("pci") for p in pci.relative_to(devices).parents)


def listed_function(node: SimNode, address: str) -> Path:
    """The function ``sys/bus/pci/devices`` lists at ``address``."""
    return Path(os.path.realpath(Path(node.paths.sysfs, "bus", "pci", "devices", address)))


def has_link(node: SimNode, major: int, minor: int) -> bool:
    return Path(node.paths.sysfs, "dev", "char", f"{major}:{minor}").is_symlink()


def left_under(root: Path) -> list[Path]:
    return list(root.rglob("*")) if root.exists() else []


async def test_an_allocated_gpu_resolves_to_a_pci_function_on_its_numa_node(node: SimNode) -> None:
    # GIVEN a GPU the checkpoint says was allocated, named by the NVIDIA plugin's per-device CDI name in the
    # Allocate reply (docs/scenarios.md: its /dev/nvidiaN is 195:N, N the GPU's index)
    checkpoint = read_checkpoint(node.paths.checkpoint)
    entry = next(e for e in checkpoint.entries if e.resource == GPU)
    assert entry.allocation is not None
    cdi_name = next(n for n in entry.allocation.cdi_devices if n.startswith("k8s.device-plugin.nvidia.com/gpu="))
    gpu = cdi_name.split("=", 1)[1]
    # WHEN its character device is followed through /sys/dev/char
    pci = nvidia_function(node, gpu)
    # THEN it is a PCI function under /sys/devices on the NUMA node devctl reports, with ids and a driver
    assert under_sys_devices(node, pci)
    numa = (await devices(node))[(GPU, gpu)]["numa_nodes"]
    assert numa and int((pci / "numa_node").read_text()) == numa[0]
    assert all((pci / name).read_text().startswith("0x") for name in ("vendor", "device", "class"))
    assert os.readlink(pci / "driver").endswith("bus/pci/drivers/nvidia")  # the tree's A100, bound as on a real node


async def test_a_device_node_without_numa_gets_no_pci_function(node: SimNode) -> None:
    # GIVEN foo-0, whose Allocate reply gives it the device node /dev/foo-0 and which has no NUMA node
    entry = next(e for e in read_checkpoint(node.paths.checkpoint).entries if e.resource == FOO)
    assert entry.allocation is not None and [d.host_path for d in entry.allocation.devices] == ["/dev/foo-0"]
    assert (await devices(node))[(FOO, "foo-0")]["numa_nodes"] == []
    # THEN it has no place in the PCI tree (a function of its own would need a host bridge of some node, and
    # the sim once put it beside NUMA 0 and 1 devices on one bridge): no /sys/dev/char link, NUMA stays unknown
    assert not has_link(node, default_major(FOO), 0) and not has_link(node, default_major(FOO), 1)


async def test_an_sriov_vf_links_to_its_own_pci_function(node: SimNode) -> None:
    vf = "0000:af:02.1"
    pci = function(node, VF, vf)
    assert pci.name == vf
    assert pci == listed_function(node, vf)
    assert int((pci / "numa_node").read_text()) == 1
    assert os.readlink(pci / "driver").endswith("bus/pci/drivers/iavf")


async def test_stop_leaves_nothing_under_the_root(short_root: Path) -> None:
    node = SimNode(short_root, default_scenario())
    await node.start()
    await node.ready(WAIT)
    assert has_link(node, default_major(VF), 0)
    await node.stop()
    assert left_under(short_root) == []
