"""Benchmark of the read commands on nodes far larger than real ones: a million devices, a huge List, a huge checkpoint.

    .venv/bin/python bench/bench_volume.py [--runs 3] [--case devices|pods|checkpoint ...] [--profile DIR]

`devctl sim` cannot start a node this large in reasonable time, so a child
process (this script's ``serve`` mode) serves raw replies built once with the
generated stubs: a device plugin socket per resource (GetDevicePluginOptions,
and ListAndWatch sending its one list then holding the stream open), the
pod-resources socket (List, GetAllocatableResources), and a checkpoint
written by devctl's own writer. Replies are shaped as the kubelet shapes them:
one ContainerDevices per device ID (pkg/kubelet/apis/podresources, see
containerDevicesFromResourceDeviceInstances).

Cases:

- ``devices``: 1,000,000 devices over 4 plugins (250,000 each, NUMA 0 and 1),
  2,000 pods holding 8 devices each; GetAllocatableResources and the
  checkpoint's RegisteredDevices list every device. `devctl ls -o json`:
  target < 4 s and < 400 MiB peak RSS.
- ``pods``: a List reply of about 67 MB (30,000 pods x 4 containers, 8 devices,
  8 exclusive CPUs and memory each). `devctl pods -o json`, `devctl ls -o json`.
- ``checkpoint``: a checkpoint of about 100 MB (70,000 entries whose
  allocation carries 1 KiB of environment). `devctl checkpoint -o json`,
  `devctl ls -o json`.

Each command runs once to warm up, then N times as a child process with
stdout to /dev/null; the median wall time and the highest peak RSS of that
child alone (os.wait4) are reported. With ``--profile DIR`` each command also
runs once under cProfile (``DIR/<case>-<command>.prof``). Figures go to
docs/performance.md by hand; this script only prints them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

from bench_read import DEVCTL, PYTHON

HERE = Path(__file__).resolve().parent

TARGETS = {("devices", "ls -o json"): (4.0, 400.0)}  # seconds, MiB
COMMANDS = {
    "devices": [["ls", "-o", "json"]],
    "pods": [["pods", "-o", "json"], ["ls", "-o", "json"]],
    "checkpoint": [["checkpoint", "-o", "json"], ["ls", "-o", "json"]],
}
# case: (plugins, devices per plugin, pods, containers per pod, devices per container, CPUs per container, env bytes)
SHAPES = {
    "devices": (4, 250_000, 2_000, 1, 8, 0, 0),
    "pods": (4, 250_000, 30_000, 4, 8, 8, 0),
    "checkpoint": (4, 25_000, 17_500, 4, 1, 0, 1024),
}


# --- the node: raw servers in a child process ------------------------------------------------------


def serve(root: str, case: str) -> None:
    """Serve the case's node under ``root`` until SIGINT or SIGTERM; print ``ready`` once it answers."""
    import grpc

    from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
    from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
    from devctl.api.podresources.v1 import api_pb2 as pr
    from devctl.api.podresources.v1 import api_pb2_grpc as pr_grpc
    from devctl.node.checkpoint import RawEntry, write_checkpoint
    from devctl.node.paths import resolve_paths

    n_plugins, per_plugin, n_pods, n_containers, per_container, cpus, env_bytes = SHAPES[case]
    paths = resolve_paths(root=root, env={})
    os.makedirs(paths.plugins_dir, exist_ok=True)
    os.makedirs(os.path.dirname(paths.pod_resources), exist_ok=True)
    resources = [f"volume.example/r{k}" for k in range(n_plugins)]

    def ids(k: int) -> list[str]:
        return [f"r{k}-{i}" for i in range(per_plugin)]

    def topology(node: int) -> pr.TopologyInfo:
        return pr.TopologyInfo(nodes=[pr.NUMANode(ID=node)])

    lists = [
        dp.ListAndWatchResponse(
            devices=[
                dp.Device(ID=d, health="Healthy", topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i % 2)]))
                for i, d in enumerate(ids(k))
            ]
        )
        for k in range(n_plugins)
    ]
    allocatable = pr.AllocatableResourcesResponse(
        devices=[
            pr.ContainerDevices(resource_name=r, device_ids=[d], topology=topology(i % 2))
            for k, r in enumerate(resources)
            for i, d in enumerate(ids(k))
        ],
        cpu_ids=range(2, 512),
    )
    taken = [0] * n_plugins
    pods, entries = [], []
    payload = dp.ContainerAllocateResponse(envs={"PAYLOAD": "x" * env_bytes} if env_bytes else {})
    for p in range(n_pods):
        containers = []
        for c in range(n_containers):
            k = (p * n_containers + c) % n_plugins
            held = [f"r{k}-{i}" for i in range(taken[k], taken[k] + per_container)]
            taken[k] += per_container
            node = taken[k] % 2
            containers.append(
                pr.ContainerResources(
                    name=f"c{c}",
                    devices=[
                        pr.ContainerDevices(resource_name=resources[k], device_ids=[d], topology=topology(node))
                        for d in held
                    ],
                    cpu_ids=range(c * cpus, (c + 1) * cpus),
                    memory=[pr.ContainerMemory(memory_type="memory", size=1 << 30, topology=topology(node))]
                    if cpus
                    else [],
                )
            )
            payload.envs["DEVICES"] = ",".join(held)
            entries.append(
                RawEntry(f"uid-{p:06d}", f"c{c}", resources[k], {str(node): held}, payload.SerializeToString())
            )
        pods.append(pr.PodResources(name=f"pod-{p:06d}", namespace=f"ns-{p % 50}", containers=containers))
    listed = pr.ListPodResourcesResponse(pod_resources=pods)
    write_checkpoint(paths.checkpoint, entries, {r: ids(k) for k, r in enumerate(resources)})

    stop = threading.Event()

    class Plugin(dp_grpc.DevicePluginServicer):
        def __init__(self, reply: dp.ListAndWatchResponse):
            self.reply = reply

        def GetDevicePluginOptions(self, request, context):
            return dp.DevicePluginOptions()

        def ListAndWatch(self, request, context):
            yield self.reply
            while context.is_active() and not stop.wait(0.2):
                pass

    class Kubelet(pr_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            return listed

        def GetAllocatableResources(self, request, context):
            return allocatable

    options = [("grpc.max_send_message_length", -1)]
    pool = futures.ThreadPoolExecutor(64)
    servers = []
    for k, reply in enumerate(lists):
        server = grpc.server(pool, options=options)
        dp_grpc.add_DevicePluginServicer_to_server(Plugin(reply), server)
        server.add_insecure_port(f"unix://{paths.plugins_dir}/r{k}.sock")
        servers.append(server)
    server = grpc.server(pool, options=options)
    pr_grpc.add_PodResourcesListerServicer_to_server(Kubelet(), server)
    server.add_insecure_port(f"unix://{paths.pod_resources}")
    servers.append(server)
    for s in servers:
        s.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    list_mb = listed.ByteSize() / 1e6
    print(f"ready: List {list_mb:.0f} MB, plugin lists {sum(m.ByteSize() for m in lists) / 1e6:.0f} MB", flush=True)
    stop.wait()
    for s in servers:
        s.stop(0)


# --- the measurement ---------------------------------------------------------------------------------


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS in MiB of one child, its stdout discarded.

    CPU time is given beside wall time because it moves less when other work
    shares the machine.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds and the highest peak RSS (MiB) of ``runs`` runs after a warm-up."""
    run_child(argv, env)  # warm the page cache
    results = [run_child(argv, env) for _ in range(runs)]
    return (
        statistics.median(r[0] for r in results),
        statistics.median(r[1] for r in results),
        max(r[2] for r in results),
    )


def run_case(case: str, runs: int, timeout: float, profile: Path | None) -> list[tuple[str, str, float, float, float]]:
    root = Path(tempfile.mkdtemp(prefix="dcv", dir="/tmp"))
    env = {**os.environ, "NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(HERE.parent)}
    t0 = time.perf_counter()
    node = subprocess.Popen([PYTHON, __file__, "serve", str(root), case], env=env, stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        line = node.stdout.readline() if node.stdout else ""
        if not line.startswith("ready"):
            raise SystemExit(f"the {case} node did not start")
        checkpoint = root / "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
        print(
            f"{case}: node ready in {time.perf_counter() - t0:.0f}s; {line[7:].strip()}, "
            f"checkpoint {checkpoint.stat().st_size / 1e6:.0f} MB",
            flush=True,
        )
        for command in COMMANDS[case]:
            argv = [*DEVCTL, "--timeout", str(timeout), *command]
            wall, cpu, rss = measure(argv, env, runs)
            name = " ".join(command)
            rows.append((case, name, wall, cpu, rss))
            print(f"  devctl {name:<22}{wall:>7.1f} s wall{cpu:>7.1f} s CPU{rss:>8.0f} MiB", flush=True)
            if profile is not None:
                out = profile / f"{case}-{command[0]}.prof"
                run_child([PYTHON, "-m", "cProfile", "-o", str(out), *argv[1:]], env)
    finally:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(30)
        except subprocess.TimeoutExpired:
            node.kill()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--case", action="append", choices=sorted(COMMANDS), help="repeatable; default: all")
    parser.add_argument("--timeout", type=float, default=30.0, help="devctl --timeout (the RPC deadline)")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of each command into this directory")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    rows = []
    for case in args.case or ["devices", "pods", "checkpoint"]:
        rows += run_case(case, args.runs, args.timeout, args.profile)

    print(f"\n{'case':<12}{'command':<26}{'median wall':>12}{'median CPU':>12}{'peak RSS':>10}")
    for case, name, wall, cpu, rss in rows:
        print(f"{case:<12}{'devctl ' + name:<26}{wall:>10.1f} s{cpu:>10.1f} s{rss:>6.0f} MiB")
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for (case, command), (seconds, mib) in TARGETS.items():
        for row_case, name, wall, _, rss in rows:
            if (row_case, name) == (case, command):
                ok = wall < seconds and rss < mib
                print(
                    f"{case}: devctl {name}: target < {seconds:.0f} s and < {mib:.0f} MiB: {'met' if ok else 'MISSED'}"
                )


if __name__ == "__main__":
    main()
