"""Benchmark of ``devctl topo --pci``'s own work: reading the PCIe tree from sysfs and the matrix of every pair.

    .venv/bin/python bench/bench_pcie.py [--runs 7] [--switches 8] [--per-switch 8] [--hosts 2]
    .venv/bin/python bench/bench_pcie.py --cli [--runs 15]

``--cli``: the wired commands, as a person runs them, on a simulated node (``devctl sim``) whose scenario has
64 GPUs and NICs under 8 PCIe switches on two NUMA nodes (``pcie:``) and bench_read's pods and devices:
``devctl topo -o json`` and ``devctl topo --pci -o json``, alternating, and the ratio of their medians
(issue 33's bar: within 1.2x).

Builds a fake sysfs under a temporary directory: ``--hosts`` host bridges (one NUMA node each) sharing
``--switches`` PCIe switches (a root port, the switch's upstream port and one downstream port per device),
``--per-switch`` devices behind each (GPUs and NICs alternating): 64 devices under 8 switches by default,
as issue 33's speed bar names. It times, as the median of ``--runs``, ``read_pci_tree`` (names from the PCI IDs
database when the machine has one), ``relationships`` over the listed devices, and both together. It measures
the ``devctl`` that Python imports. Issue 33's bar (within 1.2x of ``devctl topo``) is for the wired command;
this is the part ``--pci`` adds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from devctl.analyze.pcie import listed, relationships
from devctl.node.pcitree import read_pci_tree


def _function(sysfs: Path, directory: Path, address: str, cls: str, numa: int) -> None:
    directory.mkdir(parents=True)
    for name, value in (("class", cls), ("vendor", "0x10de"), ("device", "0x2330"), ("numa_node", str(numa))):
        (directory / name).write_text(value + "\n")
    links = sysfs / "bus" / "pci" / "devices"
    (links / address).symlink_to(os.path.relpath(directory, links))


def build(sysfs: Path, switches: int, per_switch: int, hosts: int) -> int:
    """The fake tree; returns the number of devices (not bridges) made."""
    (sysfs / "bus" / "pci" / "devices").mkdir(parents=True)
    made = 0
    for s in range(switches):
        host, index = s % hosts, s // hosts
        domain = f"{host:04x}"  # a host bridge per domain: each has its own 256 buses
        bus = 1 + index * (per_switch + 2)
        if bus + 1 + per_switch > 0xFF:
            raise SystemExit(
                f"too many switches or devices per switch for one host bridge's buses ({bus + 1 + per_switch})"
            )
        root = sysfs / "devices" / f"pci{domain}:00" / f"{domain}:00:{index + 1:02x}.0"
        _function(sysfs, root, root.name, "0x060400", host)
        up = root / f"{domain}:{bus:02x}:00.0"
        _function(sysfs, up, up.name, "0x060400", host)
        for port in range(per_switch):
            down = up / f"{domain}:{bus + 1:02x}:{port:02x}.0"
            _function(sysfs, down, down.name, "0x060400", host)
            address = f"{domain}:{bus + 2 + port:02x}:00.0"
            _function(sysfs, down / address, address, "0x030200" if port % 2 == 0 else "0x020000", host)
            made += 1
    return made


def _median(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def pcie_scenario(switches: int, per_switch: int) -> list[dict[str, object]]:
    """The scenario's ``pcie:``: two host bridges (NUMA 0 and 1), ``switches`` switches between them."""
    hosts: list[dict[str, object]] = []
    for numa, base in ((0, 0x00), (1, 0x80)):
        mine = [s for s in range(switches) if s % 2 == numa]
        lists = []
        for k, _ in enumerate(mine):
            first = base + 3 + k * (per_switch + 2)
            lists.append(
                {
                    "devices": [
                        {
                            "address": f"0000:{first + d:02x}:00.0",
                            "vendor": "0x10de",
                            "device": "0x2330",
                            "class": "0x030200" if d % 2 == 0 else "0x020000",
                        }
                        for d in range(per_switch)
                    ]
                }
            )
        hosts.append({"host_bridge": f"0000:{base:02x}", "numa_node": numa, "switches": lists})
    return hosts


def cli(runs: int, switches: int, per_switch: int) -> None:
    """``topo`` against ``topo --pci`` on a simulated node; prints both medians and their ratio."""
    import shutil

    import yaml
    from bench_read import DEVCTL, run_child, scenario, start_sim, stop_sim

    root = Path(tempfile.mkdtemp(prefix="dcp", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"NO_COLOR": "1", "DEVCTL_ROOT": str(root), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    node = scenario(pods=50, containers=2, devices=200, resources=4) | {"pcie": pcie_scenario(switches, per_switch)}
    scenario_file, log = root.with_suffix(".yaml"), root.with_suffix(".log")
    scenario_file.write_text(yaml.safe_dump(node))
    sim = start_sim(root, scenario_file, env, log)
    walls: dict[str, list[float]] = {"topo": [], "topo --pci": []}
    try:
        argv = {name: [*DEVCTL, *name.split(), "-o", "json"] for name in walls}
        for name in walls:  # warm up: page cache, bytecode
            run_child(argv[name], env)
        for _ in range(runs):
            for name in walls:
                time.sleep(0.05)  # the simulated kubelet's pod-resources token bucket refills
                walls[name].append(run_child(argv[name], env)[0])
    finally:
        stop_sim(sim)
        shutil.rmtree(root, ignore_errors=True)
        scenario_file.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
    plain, pci = (statistics.median(walls[n]) * 1000 for n in walls)
    print(
        f"{switches * per_switch} devices under {switches} switches, 100 containers; median of {runs}, load "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"devctl topo -o json        {plain:8.1f} ms")
    print(f"devctl topo --pci -o json  {pci:8.1f} ms   ratio {pci / plain:.2f}x (issue 33's bar: 1.2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", action="store_true", help="the wired commands on a simulated node")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--switches", type=int, default=8)
    parser.add_argument("--per-switch", type=int, default=8)
    parser.add_argument("--hosts", type=int, default=2)
    args = parser.parse_args()
    if args.cli:
        cli(args.runs, args.switches, args.per_switch)
        return
    with tempfile.TemporaryDirectory(prefix="bench-pcie-") as tmp:
        sysfs = Path(tmp) / "sys"
        devices = build(sysfs, args.switches, args.per_switch, args.hosts)
        tree, errors = read_pci_tree(str(sysfs))
        matrix = relationships(tree)
        assert not errors and len(matrix.devices) == devices, (errors, len(matrix.devices))
        read = _median(args.runs, lambda: read_pci_tree(str(sysfs)))
        pairs = _median(args.runs, lambda: relationships(tree))
        both = _median(args.runs, lambda: relationships(read_pci_tree(str(sysfs))[0]))
    functions, shown = len(tree.functions), len(listed(tree))
    print(f"{devices} devices under {args.switches} switches, {functions} PCI functions, {shown} listed")
    print(f"read_pci_tree          {read * 1000:8.2f} ms")
    print(f"relationships          {pairs * 1000:8.2f} ms  ({devices * devices} cells)")
    print(f"read_pci_tree + matrix {both * 1000:8.2f} ms  (median of {args.runs})")


if __name__ == "__main__":
    main()
