"""The whole simulated node: its root on disk, a kubelet restart, external plugins, control, and the thread runner."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from namespaces import in_mount_namespace

from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec, counted_devices
from devctl.lab.sim import node as sim_node_module
from devctl.lab.sim.control import SimNotRunning, request
from devctl.lab.sim.node import SimError, SimNode, stop_part
from devctl.lab.sim.scenario import default_scenario
from devctl.model import UNHEALTHY
from devctl.node.checkpoint import read_checkpoint
from devctl.node.identity import read_pod_identities
from devctl.node.podresources import PodResourcesClient
from devctl.node.sysfs import read_topology

WAIT = 10.0
GPU = "nvidia.com/gpu"
VF = "intel.com/sriov_netdevice"


@pytest.fixture
async def node(short_root: Path) -> AsyncIterator[SimNode]:
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(WAIT)
        yield n


def identity(path: str) -> tuple[int, int]:
    """Which file sits at ``path``: a deleted socket's inode number is often reused at once."""
    st = os.stat(path)
    return st.st_ino, st.st_ctime_ns


def layout(root: Path) -> tuple[list[Path], bool]:
    """Every socket left under ``root``, and whether the checkpoint is there."""
    sockets = [p for p in root.rglob("*") if p.is_socket()]
    return sockets, (root / "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint").is_file()


def plant(plugins_dir: str) -> None:
    """A stray file and a directory in the plugins dir: a restart removes the one and keeps the other."""
    Path(plugins_dir, "leftover.txt").write_text("x")
    Path(plugins_dir, "subdir").mkdir()


def planted(plugins_dir: str) -> tuple[bool, bool]:
    return Path(plugins_dir, "leftover.txt").exists(), Path(plugins_dir, "subdir").is_dir()


def count(plugin: DevicePluginServer, rpc: str) -> int:
    return sum(1 for r in plugin.rpc_log if r.rpc == rpc)


async def test_the_root_is_laid_out_like_a_host(node: SimNode) -> None:
    scenario = node.scenario
    topology = read_topology(node.paths.sysfs, use_udev=False)
    assert [(n.id, n.cpus, n.memory_bytes) for n in topology.numa_nodes] == [
        (n.id, n.cpus, n.memory_bytes) for n in scenario.numa_nodes
    ]
    # the scenario's PCI devices, and a function for each of its 4 DRA devices on its NUMA node's bus (d0, e0),
    # none for its 2 foo devices (no NUMA: no place); the VFs are listed functions, and the 8 plugin GPUs are the
    # tree's A100s (lab/sim/nvidia.py), no fake functions of their own
    simulated = {("0000:d0:00.0", 0), ("0000:d0:01.0", 0), ("0000:e0:00.0", 1), ("0000:e0:01.0", 1)}
    assert {(d.address, d.numa_node) for d in topology.pci_devices} == {
        (d.address, d.numa_node) for d in scenario.pci_devices
    } | simulated
    identities, errors = read_pod_identities(node.paths.pod_logs, node.paths.kubelet_dir)
    assert errors == ()
    assert {(i.uid, i.namespace, i.name) for i in identities} == {(p.uid, p.namespace, p.name) for p in scenario.pods}
    assert sorted(os.listdir(node.paths.plugins_dir)) == [
        "foo.sock",
        "kubelet.sock",
        "kubelet_internal_checkpoint",
        "nvidia-gpu-shared.sock",
        "nvidia-gpu.sock",
        "sriov-netdevice.sock",
    ]
    assert stat.S_ISSOCK(os.stat(node.paths.pod_resources).st_mode)
    assert sorted(os.listdir(node.control_dir)) == [
        "dra-gpu.example.com.ctl",
        "foo.sock.ctl",
        "nvidia-gpu-shared.sock.ctl",
        "nvidia-gpu.sock.ctl",
        "sriov-netdevice.sock.ctl",
    ]


async def test_default_scenario_as_pod_resources_shows_it(node: SimNode) -> None:
    async with PodResourcesClient(node.paths.pod_resources, timeout=WAIT) as client:
        pods = {f"{p.namespace}/{p.name}": p for p in await client.list()}
        allocatable = await client.allocatable()
    assert len(pods) == 8
    gpus = {i for d in pods["ml/train-0"].containers[0].devices if d.resource == GPU for i in d.ids}
    assert gpus == {"GPU-0", "GPU-1", "GPU-2", "GPU-3"}
    # serve-0's VF sits on NUMA node 0 while its CPUs and memory are on node 1: the misaligned pod.
    (serve,) = pods["inference/serve-0"].containers
    assert [d.numa_nodes for d in serve.devices] == [(0,)] and serve.memory[0].numa_nodes == (1,)
    assert all(c >= 16 for c in serve.cpu_ids)
    assert pods["inference/embed-0"].containers[0].dynamic_resources
    healthy_gpus = {i for d in allocatable.devices if d.resource == GPU for i in d.ids}
    assert len(healthy_gpus) == 7 and "GPU-5" not in healthy_gpus
    assert len(allocatable.cpu_ids) == 30


async def test_restart_kubelet_is_a_real_restart(node: SimNode) -> None:
    plugins_dir = node.paths.plugins_dir
    before_pods = node.device_manager.pods()
    before_entries = read_checkpoint(node.paths.checkpoint).entries
    kubelet_id = identity(node.paths.kubelet_socket)
    gpu_id = identity(node.plugins[GPU].socket_path)
    allocates = {name: count(p, "Allocate") for name, p in node.plugins.items()}
    prestarts = count(node.plugins[VF], "PreStartContainer")
    plant(plugins_dir)

    await asyncio.wait_for(node.restart_kubelet(), WAIT)
    # Every file but the checkpoint went; directories stay; kubelet.sock is new.
    assert planted(plugins_dir) == (False, True)
    assert identity(node.paths.kubelet_socket) != kubelet_id

    await node.wait_registered(WAIT)
    assert all(p.registrations == 2 for p in node.plugins.values())
    assert identity(node.plugins[GPU].socket_path) != gpu_id  # the plugin served its socket again
    # Running pods keep their devices: the checkpoint came back, and no new Allocate was made ...
    assert node.device_manager.pods() == before_pods
    assert {name: count(p, "Allocate") for name, p in node.plugins.items()} == allocates
    assert read_checkpoint(node.paths.checkpoint).entries == before_entries
    # ... but a plugin that requires it sees PreStartContainer again for each of its containers.
    await node.device_manager.wait_until(lambda: count(node.plugins[VF], "PreStartContainer") == prestarts + 2, WAIT)
    state = node.device_manager.resource(GPU)
    assert state is not None and (state.capacity, state.allocatable) == (8, 7)


async def test_an_external_plugin_is_served_like_the_scenario_ones(node: SimNode) -> None:
    extra = PluginSpec("example.com/extra", counted_devices("example.com/extra", 3), socket="extra.sock")
    async with DevicePluginServer(extra, node.paths.plugins_dir) as plugin:
        await plugin.wait_registered(WAIT)
        dm = node.device_manager
        await dm.wait_until(lambda: dm.connected("example.com/extra"), WAIT)
        async with PodResourcesClient(node.paths.pod_resources, timeout=WAIT) as client:
            devices = (await client.allocatable()).devices
        assert sorted(i for d in devices if d.resource == "example.com/extra" for i in d.ids) == [
            "extra-0",
            "extra-1",
            "extra-2",
        ]
        assert "example.com/extra" in read_checkpoint(node.paths.checkpoint).registered_devices


async def test_control_socket_info_and_restart(node: SimNode) -> None:
    info = await request(str(node.root), {"op": "info"}, WAIT)
    assert info["ok"] and info["ready"] and len(info["pods"]) == 8 and info["failed"] == {}
    assert {r["name"]: r["allocatable"] for r in info["resources"]}[GPU] == 7
    reply = await request(str(node.root), {"op": "restart-kubelet", "wait": True}, WAIT)
    # the restarted kubelet found the DRA driver again in plugins_registry
    assert reply == {"ok": True, "registered": sorted(p for p in node.plugins), "dra_drivers": ["gpu.example.com"]}
    assert all(p.registrations == 2 for p in node.plugins.values())
    unknown = await request(str(node.root), {"op": "reboot"}, WAIT)
    assert not unknown["ok"] and "unknown op 'reboot'" in unknown["error"]


async def test_no_simulator_means_a_clear_error(short_root: Path) -> None:
    with pytest.raises(SimNotRunning, match="no simulated node runs at"):
        await request(str(short_root), {"op": "info"}, 1.0)


async def test_a_second_node_on_the_same_root_is_refused(node: SimNode) -> None:
    with pytest.raises(SimError, match="already runs at"):
        await SimNode(node.root, default_scenario()).start()


# Should the guard ever fail, the node would be laid out over /, and the kubelet's start would empty
# /var/lib/kubelet/device-plugins: so the child runs where those paths are empty tmpfs, never this machine's.
OVER_THE_REAL_ROOT = """
import asyncio, json
from pathlib import Path
from devctl.lab.sim.node import SimError, SimNode
from devctl.lab.sim.scenario import default_scenario

async def main():
    node = SimNode(Path("/"), default_scenario())
    try:
        await node.start()
    except SimError as e:
        return str(e)
    await node.stop()
    return "started"

print(json.dumps(asyncio.run(main())))
"""


def test_the_real_root_is_refused() -> None:
    said = in_mount_namespace(OVER_THE_REAL_ROOT, dict.fromkeys(["/var/lib", "/var/log", "/run", "/sys"]))
    assert said.startswith("refusing to simulate a node over the real /")


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def host_tree(host: Path) -> dict[str, bytes]:
    """A host mount as a person might give it by mistake: pod logs and nothing else of the kubelet's."""
    files = {
        "var/log/pods/prod_web-0_0a1b/app/0.log": b"a production log line\n",
        "var/log/pods/prod_web-0_0a1b/app/1.log": b"another\n",
        "etc/hostname": b"node-7\n",
    }
    for name, data in files.items():
        (host / name).parent.mkdir(parents=True, exist_ok=True)
        (host / name).write_bytes(data)
    return files


@pytest.mark.parametrize("kubelet_dir", ["missing", "empty", "marked"])
async def test_a_root_holding_files_it_did_not_make_is_refused_and_kept(short_root: Path, kubelet_dir: str) -> None:
    # GIVEN a host tree with pod logs, where var/lib/kubelet is missing, empty, or holds an old sim's marker
    host = short_root / "host"
    files = host_tree(host)
    if kubelet_dir != "missing":
        (host / "var/lib/kubelet").mkdir(parents=True)
    if kubelet_dir == "marked":  # a marker no run of this process wrote is no proof of anything
        (host / "run/devctl").mkdir(parents=True)
        (host / "run/devctl/sim-root").touch()
    # WHEN a node is started on it
    with pytest.raises(SimError, match="holds files devctl sim did not make in this run") as caught:
        await SimNode(host, default_scenario()).start()
    # THEN it is refused, and every file survives
    assert str(caught.value).startswith(f"{host} holds files")
    assert {name: (host / name).read_bytes() for name in files} == files
    assert not (host / "sys").exists() and not (host / "var/lib/kubelet/device-plugins").exists()


async def test_roots_that_cannot_hold_a_node_are_refused(short_root: Path) -> None:
    deep = short_root / ("x" * 80)
    with pytest.raises(SimError, match=r"is too long a root: its socket var/lib/kubelet/device-plugins/kubelet\.sock"):
        await SimNode(deep, default_scenario()).start()
    assert not deep.exists()
    a_file = short_root / "f"
    a_file.write_text("x")
    with pytest.raises(SimError, match="is not a directory"):
        await SimNode(a_file, default_scenario()).start()
    assert a_file.read_text() == "x"


async def test_stop_removes_what_it_made_and_keeps_what_was_there(short_root: Path) -> None:
    # GIVEN a root of empty directories a person made beforehand (no files)
    (short_root / "var/log").mkdir(parents=True)
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(WAIT)
        assert layout(short_root)[1]
    # THEN the node's files and directories are gone, the person's directories stay, and the root can be used again
    assert tree(short_root) == ["var", "var/log"]
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(WAIT)


async def test_a_new_root_is_made_and_removed(short_root: Path) -> None:
    root = short_root / "new"
    async with SimNode(root, default_scenario()) as n:
        await n.ready(WAIT)
        assert root.is_dir()
    assert not root.exists()


async def test_a_part_that_never_stops_is_left_behind_with_a_warning(monkeypatch, caplog) -> None:
    # GIVEN a part whose stop waits for something that never comes, and a patience of 0.2 s
    monkeypatch.setattr(sim_node_module, "STOP_PATIENCE", 0.2)
    never = asyncio.Event()
    # WHEN it is stopped
    started = asyncio.get_running_loop().time()
    await stop_part("the stuck part", never.wait())
    # THEN stopping goes on after the patience, and one warning names the part and where it waited
    assert asyncio.get_running_loop().time() - started < 2
    (warning,) = [r.getMessage() for r in caplog.records if "did not end" in r.getMessage()]
    assert "the stuck part did not end within 0.2s" in warning and "waiting in wait" in warning
    # and a part that fails still says so
    with pytest.raises(OSError, match="boom"):
        await stop_part("a failing part", _fail())


async def _fail() -> None:
    raise OSError("boom")


async def test_a_plugin_that_never_stops_keeps_neither_the_node_nor_its_cleanup_from_ending(
    short_root: Path, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(sim_node_module, "STOP_PATIENCE", 0.5)
    async with SimNode(short_root, default_scenario()) as n:
        await n.ready(WAIT)
        stuck = n.plugins[GPU]
        real_stop = stuck.stop
        # GIVEN the GPU plugin's stop hangs (as a gRPC server waiting on a call that never ends would)
        monkeypatch.setattr(stuck, "stop", asyncio.Event().wait)
    # THEN the node stopped anyway, every other part with it, and the root holds nothing of the node
    assert any(f"the device plugin of {GPU} did not end" in r.getMessage() for r in caplog.records)
    assert n.plugins == {} and n.dra_drivers == {}
    await real_stop()  # what the test left running
    assert tree(short_root) == []


def test_sim_node_fixture_serves_callers_on_other_loops(sim_node) -> None:
    """The thread runner: asyncio.run in the test's thread talks to the node on its own loop."""

    async def healthy_gpus() -> int:
        async with PodResourcesClient(sim_node.paths.pod_resources, timeout=WAIT) as client:
            return sum(len(d.ids) for d in (await client.allocatable()).devices if d.resource == GPU)

    assert asyncio.run(healthy_gpus()) == 7
    sim_node.set_health(GPU, "GPU-7", UNHEALTHY)
    sim_node.call(lambda n: n.device_manager.wait_until(lambda: n.device_manager.resource(GPU).allocatable == 6, 1.0))
    assert asyncio.run(healthy_gpus()) == 6
    sim_node.restart_kubelet()
    assert asyncio.run(healthy_gpus()) == 6
    assert len(sim_node.pods()) == 8
