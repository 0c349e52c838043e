"""Benchmark of the read commands on nodes far larger than real ones: a million devices, 50,000 pods, a huge checkpoint.

    .venv/bin/python bench/bench_volume.py [--runs 1] [--case devices|pods|checkpoint ...] [--all-commands]
        [--devices 1000000] [--pods 50000] [--checkpoint-mb 100] [--profile DIR] [--json FILE]

`devctl sim` cannot start a node this large in reasonable time, so a child
process (this script's ``serve`` mode) serves replies laid out as bytes once
(by joins, in the form the kubelet's and the plugins' Go encoders write) and
sent as they are: a device plugin socket per resource (GetDevicePluginOptions,
and ListAndWatch sending its one list then holding the stream open), the
pod-resources socket (List, GetAllocatableResources), and a checkpoint.
GetAllocatableResources sends one ContainerDevices per device ID, as the
kubelet does (containerDevicesFromResourceDeviceInstances).

Cases:

- ``devices``: 1,000,000 devices over 8 plugins (125,000 each, NUMA 0 and 1;
  each list under the 4 MiB the kubelet reads, checked here), 2,000 pods
  holding 8 devices each; GetAllocatableResources and the checkpoint's
  RegisteredDevices list every device. `devctl ls -o json` and `devctl ls`:
  target < 4 s wall and < 400 MiB peak RSS. A ninth plugin sends one list
  above 4 MiB, which the kubelet cannot read (so neither its allocatable list
  nor the checkpoint has it): every command says so in one line, checked
  here, and `devctl call --socket big.sock list`, that refusal alone, is
  timed (target < 1 s). ``--all-commands`` adds `devctl devices -o json` (a
  million rows).
- ``pods``: a List reply of 50,000 pods (one container, one device each, 5.1
  MiB), named as a cluster names them (``ml-training/llama-finetune-7b-worker-
  12345-abcde``, container ``trainer``, a GPU by its UUID; ``WORKLOADS``).
  `devctl pods -o json` and `devctl pods`: target < 2 s and a
  peak RSS, above that of the same command on a node with no pods, under 3x
  the reply's decoded size (what its model objects take, measured here with
  tracemalloc).
- ``checkpoint``: a checkpoint of about 100 MB (entries whose allocation
  carries 1 KiB of environment), above the size whose checksum devctl verifies
  (devctl.node.checkpoint.CHECKSUM_LIMIT), so written with checksum 0.
  `devctl checkpoint -o json`: read, decoded, and its checksum said unverified.

Each command runs once to warm up, then N times as a child process with
stdout to /dev/null; the median wall and CPU time and the highest peak RSS of
that child alone (os.wait4) are reported, with the load average. ``--json``
writes the figures for `make bench`; with ``--profile DIR`` each command also
runs once under cProfile (``DIR/<case>-<command>.prof``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path

from bench_read import DEVCTL, PYTHON

from devctl.node.columns import varint

HERE = Path(__file__).resolve().parent

RESOURCES = 4  # of the pods and checkpoint cases
PLUGINS = 8  # of the devices case: 125,000 devices each, under the kubelet's 4 MiB
DEVICE_PODS = 2_000
PER_CONTAINER = 8
# The devices case's plugin whose list the kubelet cannot read: 5.0 MiB.
BIG_DEVICES = 200_000
KUBELET_RECEIVE_BYTES = 4 * 1024 * 1024  # devctl.node.rpc's, not imported: the bench must not depend on it
TOO_LARGE = "above the 4 MiB the kubelet reads"
TARGET_SECONDS = {"devices": 4.0, "pods": 2.0, "refusal": 1.0}
TARGET_MIB = {"devices": 400.0}
POD_RSS_RATIO = 3.0


# --- wire bytes, laid out by joins ---------------------------------------------------------------


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(value)) + value


def _topology(node: int) -> bytes:
    """TopologyInfo{nodes: [NUMANode{ID: node}]} (the same bytes in both APIs)."""
    return _field(1, b"\x08" + varint(node) if node else b"")


def _fields(number: int, values: Iterable[bytes]) -> bytes:
    """A repeated length-delimited field: one join."""
    tag = varint(number << 3 | 2)
    return b"".join(tag + varint(len(v)) + v for v in values)


def device_ids(resource: int, count: int) -> list[str]:
    return [f"r{resource}-{i}" for i in range(count)]


def plugin_list(resource: int, count: int) -> bytes:
    """ListAndWatchResponse: ``count`` healthy devices on NUMA nodes 0 and 1 in turn."""
    tails = [_field(2, b"Healthy") + _field(3, _topology(node)) for node in (0, 1)]
    return _fields(1, (_field(1, d.encode()) + tails[i % 2] for i, d in enumerate(device_ids(resource, count))))


def allocatable(per_plugin: int, plugins: int) -> bytes:
    """AllocatableResourcesResponse: a ContainerDevices per device, and CPUs 2-511."""
    items = []
    for k in range(plugins):
        name = _field(1, f"volume.example/r{k}".encode())
        topologies = [_field(3, _topology(node)) for node in (0, 1)]
        items += [name + _field(2, d.encode()) + topologies[i % 2] for i, d in enumerate(device_ids(k, per_plugin))]
    cpus = b"".join(varint(c) for c in range(2, 512))
    return _fields(1, items) + _field(2, cpus)


def pod_list(pods: int, containers: int, per_container: int, resources: int = RESOURCES) -> bytes:
    """ListPodResourcesResponse: each container holds ``per_container`` devices, one ContainerDevices each."""
    taken = [0] * resources
    out = []
    for p in range(pods):
        cs = []
        for c in range(containers):
            k = (p * containers + c) % resources
            held = [f"r{k}-{i}" for i in range(taken[k], taken[k] + per_container)]
            taken[k] += per_container
            name = _field(1, f"volume.example/r{k}".encode())
            topology = _field(3, _topology(taken[k] % 2))
            devices = _fields(2, (name + _field(2, d.encode()) + topology for d in held))
            cs.append(_field(1, f"c{c}".encode()) + devices)
        out.append(_field(1, f"pod-{p:06d}".encode()) + _field(2, f"ns-{p % 50}".encode()) + _fields(3, cs))
    return _fields(1, out)


# The pods case's workloads, as a real cluster names them: (namespace, the pods' owner, container,
# resource, the form of its device IDs). An indexed Job's pods are "<job>-<index>-<5 characters>",
# a Deployment's "<deployment>-<template hash>-<5 characters>".
WORKLOADS = (
    ("ml-training", "llama-finetune-7b-worker", "trainer", "nvidia.com/gpu", "gpu"),
    ("inference", "mistral-7b-server", "server", "amd.com/gpu", "pci"),
    ("telco-upf", "upf-dataplane", "dataplane", "intel.com/sriov_netdevice", "pci"),
    ("edge-ingest", "video-ingest", "ingest", "intel.com/sriov_netdevice", "pci"),
)
NAME_LETTERS = "bcdfghjklmnpqrstvwxz2456789"  # those of Kubernetes' generated names (apimachinery rand.String)


def workload_pod_list(pods: int) -> bytes:
    """ListPodResourcesResponse of ``pods`` pods named as a cluster's (``WORKLOADS``), one container and device each.

    NVIDIA's GPUs are named by their UUIDs (``GPU-8f3d1a52-...``, as its plugin lists them), AMD's
    GPUs and SR-IOV VFs by PCI address; every pod holds a device of its own. The same bytes every run (a fixed seed).
    """
    rng = random.Random(13)

    def letters(n: int) -> str:
        return "".join(rng.choice(NAME_LETTERS) for _ in range(n))

    hashes = [letters(10) for _ in WORKLOADS]  # one ReplicaSet per Deployment
    names: set[str] = set()
    taken: dict[str, int] = {}
    out = []
    for p in range(pods):
        w = p % len(WORKLOADS)
        namespace, owner, container, resource, form = WORKLOADS[w]
        if form == "gpu":
            device = f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        else:  # a PCI function of its own: bus, device 0-31, function 0-7
            n = taken[resource] = taken.get(resource, -1) + 1
            device = f"0000:{0x17 + n // 256:02x}:{n // 8 % 32:02x}.{n % 8}"
        held = _field(1, resource.encode()) + _field(2, device.encode()) + _field(3, _topology(p % 2))
        owned_by = str(p // len(WORKLOADS)) if w == 0 else hashes[w]
        while (pod := f"{owner}-{owned_by}-{letters(5)}") in names:
            pass
        names.add(pod)
        cs = _field(1, container.encode()) + _field(2, held)
        out.append(_field(1, pod.encode()) + _field(2, namespace.encode()) + _field(3, cs))
    return _fields(1, out)


def write_big_checkpoint(path: str, megabytes: int) -> int:
    """A v2 checkpoint of about ``megabytes`` MB, written with checksum 0: above the verified size."""
    from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp

    entries = []
    size = 0
    i = 0
    while size < megabytes * 1_000_000:
        held = [f"r{i % RESOURCES}-{i}"]
        alloc = dp.ContainerAllocateResponse(envs={"PAYLOAD": "x" * 1024, "DEVICES": held[0]}).SerializeToString()
        entry = {
            "PodUID": f"uid-{i:06d}",
            "ContainerName": "c0",
            "ResourceName": f"volume.example/r{i % RESOURCES}",
            "DeviceIDs": {str(i % 2): held},
            "AllocResp": base64.b64encode(alloc).decode(),
        }
        entries.append(entry)
        size += len(entry["AllocResp"]) + 120
        i += 1
    data = {"PodDeviceEntries": entries, "RegisteredDevices": {}}
    with open(path, "w") as f:
        json.dump({"Data": data, "Checksum": 0}, f, separators=(",", ":"))
    return os.path.getsize(path)


# --- the node: raw servers in a child process ------------------------------------------------------


def serve(root: str, case: str, scale: int) -> None:
    """Serve the case's node under ``root`` until SIGINT or SIGTERM; print ``ready`` once it answers."""
    import grpc

    from devctl.node.checkpoint import RawEntry, write_checkpoint
    from devctl.node.paths import resolve_paths

    paths = resolve_paths(root=root, env={})
    os.makedirs(paths.plugins_dir, exist_ok=True)
    os.makedirs(os.path.dirname(paths.pod_resources), exist_ok=True)
    lists: list[bytes] = []
    alloc = b""
    listed = b""
    note = ""
    sockets: list[str] = []
    if case == "devices":
        per_plugin = scale // PLUGINS
        lists = [plugin_list(k, per_plugin) for k in range(PLUGINS)]
        largest = max(map(len, lists))
        if largest >= KUBELET_RECEIVE_BYTES:
            raise SystemExit(f"a plugin list of {largest / 2**20:.1f} MiB: the kubelet could not read it")
        sockets = [f"r{k}.sock" for k in range(PLUGINS)]
        # The plugin the kubelet cannot read: not in the allocatable list nor in the checkpoint.
        big = plugin_list(PLUGINS, BIG_DEVICES)
        assert len(big) > KUBELET_RECEIVE_BYTES
        lists.append(big)
        sockets.append("big.sock")
        alloc = allocatable(per_plugin, PLUGINS)
        listed = pod_list(DEVICE_PODS, 1, PER_CONTAINER, PLUGINS)
        entries = []
        for p in range(DEVICE_PODS):
            k = p % PLUGINS
            start = (p // PLUGINS) * PER_CONTAINER
            held = [f"r{k}-{i}" for i in range(start, start + PER_CONTAINER)]
            entries.append(RawEntry(f"uid-{p:06d}", "c0", f"volume.example/r{k}", {"0": held}, b""))
        registered = {f"volume.example/r{k}": device_ids(k, per_plugin) for k in range(PLUGINS)}
        write_checkpoint(paths.checkpoint, entries, registered)
        note = (
            f"{PLUGINS} plugin lists of {largest / 2**20:.1f} MiB at most, one of {len(big) / 2**20:.1f} MiB; "
            f"allocatable {len(alloc) / 1e6:.0f} MB"
        )
    elif case in ("pods", "empty"):
        listed = workload_pod_list(scale) if case == "pods" else b""
        note = f"List {len(listed) / (1 << 20):.1f} MiB"
    elif case == "checkpoint":
        size = write_big_checkpoint(paths.checkpoint, scale)
        note = f"checkpoint {size / 1e6:.0f} MB"

    stop = threading.Event()

    def unary(reply: bytes) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(lambda request, context: reply)

    def stream(reply: bytes) -> grpc.RpcMethodHandler:
        def list_and_watch(request: bytes, context: grpc.ServicerContext) -> Iterable[bytes]:
            yield reply
            while context.is_active() and not stop.wait(0.2):
                pass

        return grpc.unary_stream_rpc_method_handler(list_and_watch)

    options = [("grpc.max_send_message_length", -1)]
    pool = futures.ThreadPoolExecutor(16)
    servers = []
    for name, reply in zip(sockets, lists, strict=True):
        server = grpc.server(pool, options=options)
        handlers = {"GetDevicePluginOptions": unary(b""), "ListAndWatch": stream(reply)}
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers)])
        server.add_insecure_port(f"unix://{paths.plugins_dir}/{name}")
        servers.append(server)
    server = grpc.server(pool, options=options)
    handlers = {"List": unary(listed), "GetAllocatableResources": unary(alloc)}
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers)])
    server.add_insecure_port(f"unix://{paths.pod_resources}")
    servers.append(server)
    for s in servers:
        s.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"ready: {note}", flush=True)
    stop.wait()
    for s in servers:
        s.stop(0)


def decoded_mib(pods: int) -> float:
    """What the List reply of ``pods`` pods takes once decoded into devctl's model objects (tracemalloc)."""
    import tracemalloc

    from devctl.api.podresources.v1 import api_pb2 as pr
    from devctl.node import convert

    reply = pr.ListPodResourcesResponse.FromString(workload_pod_list(pods))
    tracemalloc.start()
    model = tuple(convert.pod(p) for p in reply.pod_resources)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del model
    return size / (1 << 20)


# --- the measurement ---------------------------------------------------------------------------------


def run_child(argv: list[str], env: dict[str, str], exits: tuple[int, ...] = (0, 1)) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system), peak RSS in MiB and stderr of one child, its stdout discarded.

    CPU time is given beside wall time because it moves less when other work
    shares the machine.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in exits:
        raise SystemExit(f"{' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err


def measure(
    argv: list[str], env: dict[str, str], runs: int, exits: tuple[int, ...] = (0, 1)
) -> tuple[float, float, float, str]:
    """Median wall and CPU seconds, the highest peak RSS (MiB) of ``runs`` runs after a warm-up, and the stderr."""
    run_child(argv, env, exits)  # warm the page cache
    results = [run_child(argv, env, exits) for _ in range(runs)]
    return (
        statistics.median(r[0] for r in results),
        statistics.median(r[1] for r in results),
        max(r[2] for r in results),
        results[-1][3],
    )


COMMANDS = {
    "devices": [["ls", "-o", "json"], ["ls"]],
    "pods": [["pods", "-o", "json"], ["pods"]],
    "empty": [["pods", "-o", "json"], ["pods"]],
    "checkpoint": [["checkpoint", "-o", "json"]],
}
ALL_COMMANDS = {"devices": [["devices", "-o", "json"]]}
# The devices case's refusal alone: the plugin whose list is above the kubelet's 4 MiB (exit 1).
REFUSAL = ["call", "--socket", "big.sock", "list"]

Row = tuple[str, str, float, float, float, str]


def run_case(case: str, scale: int, args: argparse.Namespace) -> list[Row]:
    root = Path(tempfile.mkdtemp(prefix="dcv", dir="/tmp"))
    env = {**os.environ, "NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(HERE.parent)}
    t0 = time.perf_counter()
    argv = [PYTHON, __file__, "serve", str(root), case, str(scale)]
    node = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        line = node.stdout.readline() if node.stdout else ""
        if not line.startswith("ready"):
            raise SystemExit(f"the {case} node did not start")
        print(f"{case}: node ready in {time.perf_counter() - t0:.0f}s; {line[7:].strip()}", flush=True)
        commands = COMMANDS[case] + (ALL_COMMANDS.get(case, []) if args.all_commands else [])
        if case == "devices":
            commands = [*commands, REFUSAL]
        for command in commands:
            child = [*DEVCTL, "--timeout", str(args.timeout), *command]
            refusal = command == REFUSAL
            wall, cpu, rss, err = measure(child, env, args.runs, (1,) if refusal else (0, 1))
            if case == "devices" and "-o" not in command and TOO_LARGE not in err:  # JSON has it in "errors"
                raise SystemExit(f"devctl {' '.join(command)} did not say the list is too large: {err.strip()}")
            name = " ".join(command)
            rows.append(("refusal" if refusal else case, name, wall, cpu, rss, err))
            print(f"  devctl {name:<22}{wall:>7.2f} s wall{cpu:>7.2f} s CPU{rss:>8.0f} MiB", flush=True)
            for warning in err.splitlines()[:2]:
                print(f"    stderr: {warning[:150]}")
            if args.profile is not None:
                out = args.profile / f"{case}-{'-'.join(command)}.prof"
                run_child([PYTHON, "-m", "cProfile", "-o", str(out), *child[1:]], env, (0, 1, 3))
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
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--case", action="append", choices=["devices", "pods", "checkpoint"], help="default: all")
    parser.add_argument("--devices", type=int, default=1_000_000, help="devices in the devices case")
    parser.add_argument("--pods", type=int, default=50_000, help="pods in the pods case")
    parser.add_argument("--checkpoint-mb", type=int, default=100, help="size of the checkpoint case")
    parser.add_argument("--all-commands", action="store_true", help="also `devctl devices -o json` of every device")
    parser.add_argument("--timeout", type=float, default=30.0, help="devctl --timeout (the RPC deadline)")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of each command into this directory")
    parser.add_argument("--json", type=Path, help="write the figures here (for make bench)")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    cases = args.case or ["devices", "pods", "checkpoint"]
    scales = {"devices": args.devices, "pods": args.pods, "empty": 0, "checkpoint": args.checkpoint_mb}
    rows: list[Row] = []
    for case in cases:
        rows += run_case(case, scales[case], args)
    baseline: dict[str, float] = {}
    if "pods" in cases:
        baseline = {name: rss for _, name, _, _, rss, _ in run_case("empty", 0, args)}
    load = os.getloadavg()[0]

    print(f"\n{'case':<12}{'command':<26}{'median wall':>12}{'median CPU':>12}{'peak RSS':>10}")
    for case, name, wall, cpu, rss, _ in rows:
        print(f"{case:<12}{'devctl ' + name:<26}{wall:>10.2f} s{cpu:>10.2f} s{rss:>6.0f} MiB")
    print(f"load average: {load:.1f} on {os.cpu_count()} CPUs")

    figures: dict[str, dict[str, object]] = {}

    def figure(key: str, value: float, unit: str, target: float | None) -> None:
        figures[key] = {"value": round(value, 3), "unit": unit, "target": target, "better": "lower"}

    verdicts = []
    for case, name, wall, cpu, rss, _ in rows:
        key = f"{case}: {name}"
        figure(f"{key}: wall", wall, "s", TARGET_SECONDS.get(case))
        figure(f"{key}: cpu", cpu, "s", None)
        figure(f"{key}: peak rss", rss, "MiB", TARGET_MIB.get(case))
        if case in TARGET_SECONDS:
            ok = wall < TARGET_SECONDS[case] and rss < TARGET_MIB.get(case, float("inf"))
            verdicts.append(
                f"{key}: < {TARGET_SECONDS[case]:.0f} s"
                + (f" and < {TARGET_MIB[case]:.0f} MiB" if case in TARGET_MIB else "")
                + f": {'met' if ok else 'MISSED'}"
            )
        if case == "pods" and name in baseline:
            decoded = decoded_mib(args.pods)
            ratio = (rss - baseline[name]) / decoded
            figure(f"{key}: rss above an empty node / decoded reply", ratio, "ratio", POD_RSS_RATIO)
            verdicts.append(
                f"{key}: peak RSS {rss:.0f} MiB, {rss - baseline[name]:.0f} MiB above an empty node's, "
                f"{ratio:.1f}x the decoded reply ({decoded:.0f} MiB): target < {POD_RSS_RATIO:.0f}x: "
                f"{'met' if ratio < POD_RSS_RATIO else 'MISSED'}"
            )
    for line in verdicts:
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"bench": "volume", "load_average": load, "figures": figures}, indent=1) + "\n")


if __name__ == "__main__":
    main()
