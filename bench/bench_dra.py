"""DRA at scale: `claims` and `ls` beside `ls` without DRA, and `watch` on four busy drivers.

    python bench/bench_dra.py [--runs 5] [--seconds 5] [--json FILE]

About 30 s on a 2-core machine at load 2, most of it the simulated kubelet
preparing 1,000 claims (both nodes start side by side).

Read commands. Two simulated nodes run side by side with the same 250 pods x
4 containers and 2,000 device-plugin devices over 10 resources; one of them
also has 4 DRA drivers x 250 devices and 1,000 claims (one device each, held
by the pods' containers). `devctl ls`, `devctl claims` (on the DRA node) and
`devctl ls` (on the node without DRA) run in turn, each `--runs` times; the
figures are each one's median wall time divided by the DRA-free `ls`'s, from
the same run (target: 1.2).

Watch. Four DRA drivers of 1,000 devices each send their full health list 20
times a second (one device flipped in each list) to one `devctl watch
D1 D2 D3 D4 -o json` process; lag = when this script reads the event's line −
when the driver handed the message that caused it to gRPC, both on this
process's monotonic clock (target: p99 < 100 ms), counted after one second
of updates (start-up settles meanwhile). The drivers are bare
handlers that flip a field of one kept protobuf message and send its bytes,
so the figure measures devctl and gRPC, not a Python driver's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

HERE = Path(__file__).resolve().parent
DEVCTL = [sys.executable, "-m", "devctl"]
HEALTHY, UNHEALTHY = 1, 2  # DRAResourceHealth's enum values
# Seconds of updates sent before lag is counted: devctl's start-up reads (naming sources) settle meanwhile.
WARM_UP = 1.0


# --- the read commands ---------------------------------------------------------------------------


def scenario(dra: bool, pods: int = 250, containers: int = 4, devices: int = 2000, resources: int = 10) -> dict:
    """Every container holds one device-plugin device (round robin) and, with ``dra``, one claim of one DRA device."""
    per_resource = devices // resources
    doc: dict = {
        "numa_nodes": [{"id": 0, "cpus": "0-63", "memory": "1024Gi"}, {"id": 1, "cpus": "64-127", "memory": "1024Gi"}],
        "reserved_cpus": "0-1",
        "resources": [
            {
                "name": f"bench.example/r{k}",
                "socket": f"r{k}.sock",
                "count": per_resource,
                "numa": [i % 2 for i in range(per_resource)],
                "preferred_allocation": False,
            }
            for k in range(resources)
        ],
        "pods": [
            {
                "namespace": f"ns-{i % 10}",
                "name": f"pod-{i:04d}",
                "containers": [
                    {"name": f"c{j}", "requests": {f"bench.example/r{(i * containers + j) % resources}": 1}}
                    for j in range(containers)
                ],
            }
            for i in range(pods)
        ],
    }
    if dra:
        drivers, claims = 4, pods * containers
        per_driver = claims // drivers
        doc["dra"] = {
            "drivers": [
                {
                    "name": f"gpu{k}.bench.example",
                    "pool": "node",
                    "count": per_driver,
                    "numa": [i % 2 for i in range(per_driver)],
                }
                for k in range(drivers)
            ],
            "claims": [
                {
                    "namespace": f"ns-{(n // containers) % 10}",
                    "name": f"claim-{n:04d}",
                    "driver": f"gpu{n % drivers}.bench.example",
                    "devices": [f"gpu{n % drivers}-{n // drivers}"],
                    "pod": f"ns-{(n // containers) % 10}/pod-{n // containers:04d}",
                    "container": f"c{n % containers}",
                }
                for n in range(claims)
            ],
        }
    return doc


def run_child(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child, its stdout discarded; a failure ends the bench."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode().strip()[-2000:]}")
    return wall


def serve_node(root: str, dra: bool) -> None:
    """Run one simulated node in this process until SIGTERM (``--serve-node``): each node in its own process.

    ``devctl sim``'s own start-up limit is too short for a kubelet that prepares
    1,000 claims on a loaded machine, hence this entry point.
    """
    from devctl.lab.sim.scenario import parse_scenario
    from devctl.lab.sim.thread import running_sim

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    with contextlib.suppress(TimeoutError), running_sim(Path(root), parse_scenario(scenario(dra)), ready_timeout=600):
        print("ready", flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})


def start_node(root: Path, dra: bool, env: dict[str, str]) -> subprocess.Popen:
    """A simulated node's process, started; :func:`wait_ready` waits for it (both nodes start side by side)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--serve-node", str(root), "dra" if dra else "plain"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wait_ready(proc: subprocess.Popen, root: Path) -> None:
    if (proc.stdout.readline() if proc.stdout else "") != "ready\n":
        proc.kill()
        raise SystemExit(f"the simulated node under {root} did not start")


def child_env() -> dict[str, str]:
    """The children's environment: devctl as a user's install runs it.

    An install runs from cached bytecode; a caller's PYTHONDONTWRITEBYTECODE
    would make every child compile devctl's modules again (hundreds of ms on
    both sides of a ratio, which hides it). No DEVCTL_* of the caller's either.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVCTL_", "_DEVCTL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env | {"NO_COLOR": "1", "PYTHONPATH": str(HERE.parent)}


def bench_reads(runs: int) -> dict[str, list[float]]:
    """Wall ms of each command's runs, interleaved run by run so a load spike hits all three alike."""
    base = Path(tempfile.mkdtemp(prefix="dcbd", dir="/tmp"))
    env = child_env()
    nodes = []
    try:
        roots = {}
        t0 = time.perf_counter()
        for name, dra in (("plain", False), ("dra", True)):
            root = base / name
            root.mkdir()
            nodes.append(start_node(root, dra, env))
            roots[name] = str(root)
        for (name, root_path), node in zip(roots.items(), nodes, strict=True):
            wait_ready(node, Path(root_path))
            print(f"{name} node ready in {time.perf_counter() - t0:.1f}s", flush=True)
        commands = {
            "ls (no DRA)": ["--root", roots["plain"], "ls"],
            "ls (DRA)": ["--root", roots["dra"], "ls"],
            "claims (DRA)": ["--root", roots["dra"], "claims"],
        }
        walls: dict[str, list[float]] = {k: [] for k in commands}
        for argv in commands.values():  # warm the page cache
            run_child([*DEVCTL, *argv], env)
        for _ in range(runs):
            for name, argv in commands.items():
                time.sleep(0.25)  # let pod-resources' token bucket refill
                walls[name].append(run_child([*DEVCTL, *argv], env))
    finally:
        for node in nodes:
            node.terminate()
        for node in nodes:
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                node.kill()
        shutil.rmtree(base, ignore_errors=True)
    return {k: [w * 1000 for w in v] for k, v in walls.items()}


def paired(walls: dict[str, list[float]], name: str, base: str) -> tuple[float, float, float]:
    """The median, first and third quartile of ``name``'s wall / ``base``'s, round by round.

    A round runs the commands back to back, so a ratio within a round
    cancels the machine's slow drifts (the DRA-free `ls` moved 300-560 ms
    over a day on this VM) that a ratio of medians taken over all the
    rounds keeps.
    """
    ratios = [a / b for a, b in zip(walls[name], walls[base], strict=True)]
    q1, q2, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return q2, q1, q3


# --- the watch -----------------------------------------------------------------------------------


class BusyDriver(grpc.GenericRpcHandler):
    """A DRA driver's registration and health stream: the full list after every update, send times noted."""

    def __init__(self, name: str, devices: int, endpoint: str):
        from devctl.api.drahealth.v1alpha1 import api_pb2 as health
        from devctl.api.pluginregistration.v1 import api_pb2 as reg

        self.info = reg.PluginInfo(
            type="DRAPlugin",
            name=name,
            endpoint=endpoint,
            supported_versions=["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"],
        ).SerializeToString()
        now = int(time.time())
        self.message = health.NodeWatchResourcesResponse(
            devices=[
                health.DeviceHealth(
                    device=health.DeviceIdentifier(pool_name="node", device_name=f"dev-{i}"),
                    health=HEALTHY,
                    last_updated_time=now,
                    health_check_timeout_seconds=30,
                )
                for i in range(devices)
            ]
        )
        self.name = name
        self.applied = -1
        self.wakeups: list[asyncio.Event] = []
        self.sent: list[tuple[int, float]] = []  # (last update included, when handed to gRPC), in order
        self._info = grpc.unary_unary_rpc_method_handler(self._get_info)
        self._watch = grpc.unary_stream_rpc_method_handler(self._node_watch)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if details.method == "/pluginregistration.Registration/GetInfo":
            return self._info
        if details.method == "/v1alpha1.DRAResourceHealth/NodeWatchResources":
            return self._watch
        return None

    async def _get_info(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return self.info

    def update(self, number: int, index: int) -> tuple[str, str]:
        d = self.message.devices[index]
        d.health = UNHEALTHY if d.health == HEALTHY else HEALTHY
        self.applied = number
        for wake in self.wakeups:
            wake.set()
        return f"node/dev-{index}", "Unhealthy" if d.health == UNHEALTHY else "Healthy"

    def sent_at(self, update: int) -> float:
        i = bisect.bisect_left(self.sent, (update, -1.0))
        return self.sent[i][1]

    async def _node_watch(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        wake = asyncio.Event()
        wake.set()
        self.wakeups.append(wake)
        try:
            while True:
                await wake.wait()
                wake.clear()
                included = self.applied
                wire = self.message.SerializeToString()
                self.sent.append((included, time.monotonic()))
                yield wire
        finally:
            self.wakeups.remove(wake)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def bench_watch(drivers: int, devices: int, rate: int, seconds: float) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="dcbw", dir="/tmp"))
    kubelet = root / "var" / "lib" / "kubelet"
    (kubelet / "device-plugins").mkdir(parents=True)
    (kubelet / "plugins_registry").mkdir()
    busy, servers = [], []
    for k in range(drivers):
        name = f"gpu{k}.bench.example"
        (kubelet / "plugins" / name).mkdir(parents=True)
        d = BusyDriver(name, devices, f"/var/lib/kubelet/plugins/{name}/dra.sock")
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([d])
        server.add_insecure_port(f"unix:{kubelet / 'plugins' / name / 'dra.sock'}")
        server.add_insecure_port(f"unix:{kubelet / 'plugins_registry' / f'{name}-reg.sock'}")
        await server.start()
        busy.append(d)
        servers.append(server)
    env = child_env()
    proc = await asyncio.create_subprocess_exec(
        *DEVCTL,
        "--root",
        str(root),
        "watch",
        *(d.name for d in busy),
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=1 << 20,
    )
    by_name = {d.name: d for d in busy}
    expected: dict[tuple[str, str, str], list[int]] = {}
    lags: list[float] = []
    snapshots: set[str] = set()
    all_snapshots = asyncio.Event()
    total = int(rate * seconds) * drivers
    got = 0
    all_in = asyncio.Event()

    async def read() -> None:
        nonlocal got
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            at = time.monotonic()
            e = json.loads(line)
            if e["event"] == "snapshot":
                snapshots.add(e["resource"])
                if len(snapshots) == drivers:
                    all_snapshots.set()
                continue
            numbers = expected.get((e["resource"], e.get("device"), e.get("to")))
            if numbers:
                lags.append((at - by_name[e["resource"]].sent_at(numbers.pop(0))) * 1000)
                got += 1
                if got >= total:
                    all_in.set()

    reader = asyncio.ensure_future(read())
    try:
        await asyncio.wait_for(all_snapshots.wait(), 60)
        start = time.monotonic()
        warm = int(rate * WARM_UP)
        for n in range(warm + int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
            for k, d in enumerate(busy):
                device, health = d.update(n, (n * 7 + k) % devices)
                if n >= warm:
                    expected.setdefault((d.name, device, health), []).append(n)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(all_in.wait(), 10)
    finally:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 10)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        for server in servers:
            await server.stop(None)
        shutil.rmtree(root, ignore_errors=True)
    lags = lags or [float("nan")]
    return {"p50": statistics.median(lags), "p99": pct(lags, 99), "max": max(lags), "missed": total - got}


# --- report --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each read command [5]")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the drivers send [5]")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--serve-node", nargs=2, metavar=("ROOT", "KIND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_node:
        serve_node(args.serve_node[0], args.serve_node[1] == "dra")
        return
    load = os.getloadavg()
    walls = bench_reads(args.runs)
    reads = {k: statistics.median(v) for k, v in walls.items()}
    watch = asyncio.run(bench_watch(4, 1000, 20, args.seconds))
    base = reads["ls (no DRA)"]
    ls_paired, claims_paired = (paired(walls, name, "ls (no DRA)") for name in ("ls (DRA)", "claims (DRA)"))
    ls_ratio, claims_ratio = reads["ls (DRA)"] / base, reads["claims (DRA)"] / base
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start\n")
    print(f"{'command':<16}{'median':>10}{'ratio':>8}")
    for name, ms in reads.items():
        print(f"{name:<16}{ms:>7.0f} ms{ms / base:>7.2f}x")
    print(f"\nls with DRA: {ls_ratio:.2f}x, claims: {claims_ratio:.2f}x of ls without DRA (target <= 1.2)")
    print(
        f"round by round: ls {ls_paired[0]:.2f}x (quartiles {ls_paired[1]:.2f}-{ls_paired[2]:.2f}),"
        f" claims {claims_paired[0]:.2f}x (quartiles {claims_paired[1]:.2f}-{claims_paired[2]:.2f})"
    )
    print(
        f"watch, 4 drivers x 1,000 devices x 20 lists/s: lag p50 {watch['p50']:.1f} ms, p99 {watch['p99']:.1f} ms,"
        f" max {watch['max']:.1f} ms, {watch['missed']:.0f} events missed (target p99 < 100 ms)"
    )
    if args.json:
        figures = {
            "ls_dra_ratio": {"value": round(ls_ratio, 3), "unit": "ratio", "target": 1.2, "better": "lower"},
            "claims_dra_ratio": {"value": round(claims_ratio, 3), "unit": "ratio", "target": 1.2, "better": "lower"},
            "ls_dra_paired_ratio": {"value": round(ls_paired[0], 3), "unit": "ratio", "target": 1.2, "better": "lower"},
            "claims_dra_paired_ratio": {
                "value": round(claims_paired[0], 3),
                "unit": "ratio",
                "target": 1.2,
                "better": "lower",
            },
            "watch_dra_lag_p99": {"value": round(watch["p99"], 1), "unit": "ms", "target": 100, "better": "lower"},
            "watch_dra_lag_p50": {"value": round(watch["p50"], 1), "unit": "ms", "target": None, "better": "lower"},
        }
        Path(args.json).write_text(json.dumps({"bench": "dra", "figures": figures}, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
