"""Benchmark of the analysis when many containers hold one device ID (a shared or time-sliced device).

    .venv/bin/python bench/bench_analyze.py [--runs 5] [--sizes 5000,10000,20000] [--process]

Builds a snapshot in memory: one plugin of 8 GPUs, N pods of one container each
all holding GPU-0 (as pod-resources lists them), and a checkpoint entry for each.
It times, in-process and as the median of ``--runs``, every view the read
commands build from it (``ls``, ``devices``, ``topo``, ``pods``, ``checkpoint``)
and ``doctor``'s checks, at each of ``--sizes`` so that the growth shows
(linear: twice the containers, about twice the time), and the time to read
the same node back from a snapshot file (``load_snapshot``, what ``--from``
adds). With ``--process`` it also runs ``devctl --from FILE ls -o json`` (and
``devices``, ``checkpoint``, ``doctor``) as child processes at the largest size.
Target: < 1 s of analysis for 20,000 containers sharing a device (it was
quadratic: 38 s for `ls`). It measures the ``devctl`` that Python imports (the
checkout the venv was installed from, or ``PYTHONPATH``), so the same script
times an older checkout too. Figures go to docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from devctl import analyze
from devctl.analyze.doctor import diagnose
from devctl.core.collect import dump_snapshot, load_snapshot
from devctl.model import (
    AllocatableResources,
    Allocation,
    Checkpoint,
    CheckpointEntry,
    ContainerDevices,
    ContainerResources,
    Device,
    NodeSnapshot,
    PluginOptions,
    PluginProbe,
    PluginStatus,
    PodResources,
)
from devctl.node.paths import resolve_paths

GPU = "nvidia.com/gpu"


def snapshot(containers: int) -> NodeSnapshot:
    """One plugin of 8 GPUs; ``containers`` pods whose one container holds GPU-0; a checkpoint entry each."""
    devices = tuple(Device(f"GPU-{i}", "Healthy", (i // 4,)) for i in range(8))
    pods = tuple(
        PodResources("team", f"pod-{i}", (ContainerResources("main", (ContainerDevices(GPU, ("GPU-0",), (0,)),)),))
        for i in range(containers)
    )
    entries = tuple(
        CheckpointEntry(f"uid-{i}", "main", GPU, {"0": ("GPU-0",)}, Allocation()) for i in range(containers)
    )
    paths = resolve_paths(root="/bench", env={})
    return NodeSnapshot(
        taken_at="2026-01-01T00:00:00.000Z",
        paths=paths,
        kubelet_socket_present=True,
        pods=pods,
        allocatable=AllocatableResources(devices=tuple(ContainerDevices(GPU, (d.id,), d.numa_nodes) for d in devices)),
        plugins=(PluginProbe(f"{paths.plugins_dir}/gpu.sock", PluginStatus.SERVING, GPU, PluginOptions(), devices),),
        checkpoint=Checkpoint(paths.checkpoint, "v2", True, 1, 1, {GPU: tuple(d.id for d in devices)}, entries),
    )


VIEWS: dict[str, Callable[[NodeSnapshot], object]] = {
    "ls": analyze.resources_view,
    "devices": analyze.devices_view,
    "topo": analyze.topology_view,
    "pods": analyze.pods_view,
    "checkpoint": analyze.checkpoint_view,
    "doctor": diagnose,
}


def median_ms(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.process_time) -> float:
    """The median time of ``fn()``: CPU time by default (the analysis is single-threaded, so on a quiet
    machine it is the wall time, and on a busy one it is not inflated by other processes)."""
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append((clock() - start) * 1000)
    return statistics.median(times)


def in_process(sizes: list[int], runs: int) -> None:
    print(f"in-process, median CPU time of {runs} (ms); each view on a fresh snapshot object")
    print("containers  " + "  ".join(f"{v:>10}" for v in [*VIEWS, "load file"]))
    for n in sizes:
        # A fresh snapshot per run: the inventory is cached per snapshot object.
        row = [median_ms(lambda fn=fn, n=n: fn(snapshot_cache(n)), runs) for fn in VIEWS.values()]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "node.json")
            with open(path, "w", encoding="utf-8") as f:
                dump_snapshot(snapshot_cache(n), f)
            row.append(median_ms(lambda path=path: load_snapshot(path), 1))
        print(f"{n:>10}  " + "  ".join(f"{ms:>10.0f}" for ms in row))


_SNAPSHOTS: dict[int, NodeSnapshot] = {}


def snapshot_cache(n: int) -> NodeSnapshot:
    """The snapshot of ``n`` containers, rebuilt as a new object each call but from shared parts (cheap)."""
    import dataclasses

    base = _SNAPSHOTS.get(n)
    if base is None:
        base = _SNAPSHOTS[n] = snapshot(n)
    return dataclasses.replace(base)


def as_process(containers: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "node.json")
        with open(path, "w", encoding="utf-8") as f:
            dump_snapshot(snapshot(containers), f)
        size = os.path.getsize(path) / 1e6
        print(f"\ndevctl --from FILE (a {size:.1f} MB snapshot of {containers} containers), median of {runs} (ms)")
        for command in (["ls"], ["devices"], ["checkpoint"], ["doctor"]):
            argv = [sys.executable, "-m", "devctl", "--from", path, *command, "-o", "json"]

            def run(argv: list[str] = argv) -> None:
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

            print(f"  {' '.join(command):<12} {median_ms(run, runs, time.perf_counter):>8.0f} (wall)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="5000,10000,20000")
    parser.add_argument("--process", action="store_true", help="also time devctl --from FILE as a process")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    in_process(sizes, args.runs)
    if args.process:
        as_process(max(sizes), args.runs)


if __name__ == "__main__":
    main()
