"""Benchmark of ``devctl fit`` (issue 31's speed bars).

    .venv/bin/python bench/bench_fit.py [--runs 9]          # fit vs ls on the default simulated node
    .venv/bin/python bench/bench_fit.py --big [--runs 5]    # the analysis on 16 NUMA nodes x 64 CPUs, 256 devices

Default: ``devctl sim`` on the default scenario, then ``devctl fit nvidia.com/gpu=2 cpu=8 memory=8Gi -o json``
and ``devctl ls -o json`` as child processes, alternating, after a warm-up of each; the medians and their ratio
(the bar: fit within 1.3x of ls).

``--big``: no node; a machine of 16 NUMA nodes of 64 CPUs (two sockets of eight nodes, one thread per core)
and 256 devices of one resource, 16 per node, 14 of them held, the static CPU policy and
``max-allowable-numa-nodes: 16``; times ``admit`` and ``fits_with`` over the values (the analysis ``fit`` runs
once its inputs are read) for ``dev=2 cpu=32 memory=8Gi`` under every topology policy, as the median of
``--runs`` (the bar: under 1 s). Two devices fit on one node, so a preferred merge exists; a request that no
provider can place preferred (4 devices here) walks the product of every provider's hints, as the kubelet
does, and is not bounded at 16 nodes (docs/admission.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def default_node(runs: int) -> None:
    from bench_read import DEVCTL, run_child, start_sim, stop_sim

    root = Path(tempfile.mkdtemp(prefix="dcf", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    env |= {"NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    scenario_file, log = root.with_suffix(".yaml"), root.with_suffix(".log")
    scenario_file.write_text(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())
    sim = start_sim(root, scenario_file, env, log)
    argv = {
        "ls": [*DEVCTL, "ls", "-o", "json"],
        "fit": [*DEVCTL, "fit", "nvidia.com/gpu=2", "cpu=8", "memory=8Gi", "-o", "json"],
    }
    walls: dict[str, list[float]] = {name: [] for name in argv}
    try:
        for name in argv:
            run_child(argv[name], env, ok=(0, 1))
        for _ in range(runs):
            for name in argv:
                time.sleep(0.05)  # the simulated kubelet's pod-resources token bucket refills
                walls[name].append(run_child(argv[name], env, ok=(0, 1))[0])
    finally:
        stop_sim(sim)
        shutil.rmtree(root, ignore_errors=True)
        scenario_file.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
    ls, fit = (statistics.median(walls[n]) * 1000 for n in argv)
    print(f"default simulated node; median of {runs}, load {os.getloadavg()[0]:.1f}")
    print(f"devctl ls -o json                               {ls:8.1f} ms")
    print(f"devctl fit nvidia.com/gpu=2 cpu=8 memory=8Gi    {fit:8.1f} ms   ratio {fit / ls:.2f}x (bar: 1.3x)")


def big(runs: int) -> None:
    from devctl.analyze.admission.admit import admit
    from devctl.analyze.admission.fits import fits_with
    from devctl.analyze.admission.inputs import AdmissionInputs, DeviceInfo, HeldDevices
    from devctl.analyze.admission.request import request_from_words
    from devctl.model.machine import Cpu, KubeletPolicy, MachineTopology

    nodes, per_node = 16, 64
    cpus = tuple(Cpu(n * per_node + i, n * per_node + i, n // 8, n) for n in range(nodes) for i in range(per_node))
    distances = {n: tuple(10 if m == n else 12 if m // 8 == n // 8 else 32 for m in range(nodes)) for n in range(nodes)}
    machine = MachineTopology(cpus, distances, {n: 256 << 30 for n in range(nodes)})
    devices = tuple(DeviceInfo(f"dev-{i}", True, frozenset({i // 16})) for i in range(256))
    held = tuple(
        HeldDevices("ml", f"p{n}", f"uid-{n}", "main", "example.com/dev", tuple(f"dev-{n * 16 + k}" for k in range(14)))
        for n in range(nodes)
    )
    pod = request_from_words(["example.com/dev=2", "cpu=32", "memory=8Gi"])
    print(f"{nodes} NUMA nodes x {per_node} CPUs, {len(devices)} devices (14 of 16 held per node); median of {runs}")
    for policy in ("none", "best-effort", "restricted", "single-numa-node"):
        inputs = AdmissionInputs(
            machine,
            KubeletPolicy(
                topology=policy,
                options={"max-allowable-numa-nodes": "16"},  # above 8 nodes the kubelet wants it, or refuses
                cpu="static",
                memory="Static",
                reserved_cpus=(0, 1),
            ),
            {"example.com/dev": devices},
            held,
            free_memory={n: {"memory": 200 << 30} for n in range(nodes)},
        )
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            result = admit(pod, inputs)
            fits_with(pod, inputs, result)
            times.append(time.perf_counter() - start)
        verdict = "admit" if result.admit else f"reject {result.reason}"
        print(f"  {policy:17} {statistics.median(times) * 1000:8.1f} ms   {verdict} (bar: 1000 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--big", action="store_true", help="the analysis on a written 16-node machine")
    args = parser.parse_args()
    if args.big:
        big(args.runs or 5)
    else:
        default_node(args.runs or 9)


if __name__ == "__main__":
    main()
