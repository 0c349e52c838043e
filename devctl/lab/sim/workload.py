"""The simulated node's running workload: container and pod IDs, and the processes that hold devices open.

What a real node's container runtime and kernel would show once the kubelet
has started its pods: every running container gets a process whose
``<root>/proc/PID`` holds a command line, a cgroup file naming its container
(systemd driver, cgroup v2, containerd's ``cri-containerd-<id>.scope``) and
``fd/N`` links to the host paths of the device nodes its Allocate replies gave
it. A scenario's ``processes:`` section replaces a container's own process or
plants one outside any pod (see docs/commands.md, "Scenario files: processes").
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devctl.lab.made import Made
from devctl.lab.sim.cri import SOCKET, RuntimeServer
from devctl.lab.sim.ids import container_id
from devctl.lab.sim.kubelet_config import DEFAULT_CONFIG, config_yaml
from devctl.lab.sim.scenario import PodSpec, ProcessSpec
from devctl.lab.sim.stuck import write_kubelet_log
from devctl.model import Checkpoint

FIRST_PID = 1000


@dataclass(frozen=True)
class SimProcess:
    pid: int
    command: str
    cgroup: str
    opens: tuple[str, ...]


def _cgroup(pod: PodSpec | None, container: str | None) -> str:
    if pod is None or container is None:
        return "0::/system.slice/devctl-sim-host.service\n"
    uid = pod.uid.replace("-", "_")
    return (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice/"
        f"cri-containerd-{container_id(pod.uid, container)}.scope\n"
    )


def _allocated_nodes(checkpoint: Checkpoint | None) -> dict[tuple[str, str], tuple[str, ...]]:
    """(pod UID, container) -> the host paths of every device node its Allocate replies name."""
    out: dict[tuple[str, str], dict[str, None]] = {}
    for entry in checkpoint.entries if checkpoint is not None else ():
        if entry.allocation is not None:
            paths = (d.host_path for d in entry.allocation.devices if d.host_path)
            out.setdefault((entry.pod_uid, entry.container), {}).update(dict.fromkeys(paths))
    return {k: tuple(v) for k, v in out.items()}


def processes(
    pods: tuple[PodSpec, ...],
    planted: tuple[ProcessSpec, ...],
    checkpoint: Checkpoint | None,
    claimed: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
) -> list[SimProcess]:
    """The node's processes: one per running container with devices, unless planted ones replace it.

    ``claimed``: (pod UID, container) -> the device nodes of its prepared DRA claims (their CDI specs' nodes).
    """
    allocated = _allocated_nodes(checkpoint)
    for user, nodes in (claimed or {}).items():
        allocated[user] = tuple(dict.fromkeys((*allocated.get(user, ()), *nodes)))
    every_node = tuple(dict.fromkeys(p for paths in allocated.values() for p in paths))
    by_name = {(p.namespace, p.name): p for p in pods}
    replaced = {(p.pod, p.container) for p in planted if p.pod is not None}
    out: list[SimProcess] = []
    for pod in pods:
        for c in pod.containers:
            nodes = allocated.get((pod.uid, c.name), ())
            if nodes and ((pod.namespace, pod.name), c.name) not in replaced:
                out.append(SimProcess(FIRST_PID + len(out), f"/bin/{c.name}", _cgroup(pod, c.name), nodes))
    for spec in planted:
        in_pod = by_name.get(spec.pod) if spec.pod is not None else None
        if spec.pod is not None and in_pod is None:
            continue  # its pod was not admitted: nothing runs
        if spec.open == "all":
            opens = every_node
        elif spec.open == "allocated":
            opens = allocated.get((in_pod.uid, spec.container or ""), ()) if in_pod is not None else ()
        else:
            opens = tuple(spec.open)
        out.append(SimProcess(FIRST_PID + len(out), spec.command, _cgroup(in_pod, spec.container), opens))
    return out


def write_proc(proc: Path, procs: list[SimProcess], made: Made | None = None) -> None:
    """Lay out ``proc`` afresh: ``PID/cmdline``, ``comm``, ``cgroup`` and ``fd/N`` symlinks to the nodes' host paths.

    With ``made`` (the node's record), each directory is recorded as it is made,
    and a rewrite removes only what ``made`` holds: a directory someone else
    made in ``proc`` stays, with what it holds.
    """
    # Emptied, not replaced: the directory itself is recorded as made by the node (devctl.lab.made), by its inode.
    if made is None:
        proc.mkdir(parents=True, exist_ok=True)
        for entry in proc.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    else:
        made.makedirs(proc)
        for entry in proc.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                made.remove(under=entry)  # only what this run made there
            elif entry.name != "stat":  # the boot time the kernel log's reader needs (lab/sim/kmsg.py) stays
                entry.unlink(missing_ok=True)
    for p in procs:
        d = proc / str(p.pid)
        if made is None:
            (d / "fd").mkdir(parents=True)
        else:
            made.makedirs(d / "fd")
        args = p.command.split()
        (d / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in args))
        (d / "comm").write_text(os.path.basename(args[0] if args else "") + "\n")
        (d / "cgroup").write_text(p.cgroup)
        # fds 0-2 as a container's are (/dev/null), then the device nodes.
        for fd in range(3):
            os.symlink("/dev/null", d / "fd" / str(fd))
        for fd, node in enumerate(p.opens, start=3):
            os.symlink(node, d / "fd" / str(fd))


def remove_proc(proc: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(proc)


class Workload:
    """The runtime side of a simulated node: its CRI socket; ``<root>/proc`` and the CPU/memory state once pods run.

    ``node.py`` starts it with the kubelet, calls ``populate`` after admission,
    and stops it last; ``pods`` gives the running pods at each call.
    """

    def __init__(
        self,
        root: Path,
        planted: tuple[ProcessSpec, ...],
        pods: Callable[[], tuple[PodSpec, ...]],
        cpus: tuple[int, ...] = (),
        *,
        made: Made | None = None,
        kubelet_config: Mapping[str, Any] | None = None,
        scenario_pods: frozenset[str] = frozenset(),
    ):
        self.proc = root / "proc"
        self.kubelet_dir = root / "var/lib/kubelet"
        self._cpus = cpus
        self._planted = planted
        self._pods = pods
        self._made = made
        self._config = kubelet_config
        self.runtime = RuntimeServer(str(root / SOCKET), pods, scenario_pods)

    async def start(self) -> None:
        await self.runtime.start()

    def populate(self, checkpoint_path: str, claimed: Mapping[tuple[str, str], tuple[str, ...]] | None = None) -> None:
        """Write ``<root>/proc`` for the running pods and the planted processes, from the checkpoint's replies
        and the nodes of the DRA claims each container uses (``claimed``)."""
        from devctl.node.checkpoint import read_checkpoint
        from devctl.node.gojson import CheckpointError

        try:
            checkpoint = read_checkpoint(checkpoint_path)
        except (CheckpointError, OSError):
            checkpoint = None
        write_proc(self.proc, processes(self._pods(), self._planted, checkpoint, claimed), self._made)
        write_kubelet_state(self.kubelet_dir, self._pods(), self._cpus, self._config)
        write_kubelet_log(self.proc.parent, self._pods(), self._made)  # the lines about stuck containers

    async def stop(self) -> None:
        await self.runtime.stop()


def write_kubelet_state(
    kubelet_dir: Path, pods: tuple[PodSpec, ...], all_cpus: tuple[int, ...], config: Mapping[str, Any] | None = None
) -> None:
    """What the kubelet's static CPU and memory managers write for the running pods, and its config.yaml.

    Both states carry the checksums the kubelet computes, so they verify.
    """
    import json

    from devctl.base.units import format_cpulist
    from devctl.node.kubeletstate import cpu_checksum, memory_checksums

    entries: dict[str, dict[str, str]] = {}
    memory: dict[str, dict[str, list[dict[str, object]]]] = {}
    taken: set[int] = set()
    for pod in pods:
        for c in pod.containers:
            if c.cpus:
                entries.setdefault(pod.uid, {})[c.name] = format_cpulist(c.cpus)
                taken.update(c.cpus)
            if c.memory:
                memory.setdefault(pod.uid, {})[c.name] = [
                    {"numaAffinity": list(m.numa_nodes), "type": m.type, "size": m.size} for m in c.memory
                ]
    default = format_cpulist(c for c in all_cpus if c not in taken)
    checksum = cpu_checksum("static", default, entries)
    cpu = {"policyName": "static", "defaultCpuSet": default, "entries": entries, "checksum": checksum}
    kubelet_dir.mkdir(parents=True, exist_ok=True)
    (kubelet_dir / "cpu_manager_state").write_text(json.dumps(cpu))
    state = {"policyName": "Static", "machineState": {}, "entries": memory}
    (kubelet_dir / "memory_manager_state").write_text(json.dumps({**state, "checksum": memory_checksums(state)[0]}))
    (kubelet_dir / "config.yaml").write_text(config_yaml(DEFAULT_CONFIG if config is None else config))
