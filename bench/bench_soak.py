"""Does devctl stay flat for an hour on a busy node? RSS, lost events, leaked fds, threads and sockets.

A simulated node (`devctl sim`) with extra device plugins, each a real
`devctl plugin serve` process: every --flip-every seconds one device of one
plugin flips health (through the plugin's control socket, as `devctl plugin
set-health` does), and every --restart-every seconds one plugin is stopped
with SIGTERM and started again (coming back with every device healthy).
Meanwhile `devctl watch -o json` follows every plugin and `devctl tui` runs
in a pseudo-terminal, each a separate process as a person would run them.

What is checked:
- RSS growth of watch and the TUI from the end of the warm-up to the end
  (target < 10 %);
- no event lost or doubled: the plugins' own logs ("R ID: Healthy ->
  Unhealthy", and each restart's "serving" line, after which every device is
  healthy again) give every health change the plugins made, per device, in
  order; the watch's `health` events must be that list exactly;
- no leak: the open fds and threads of watch and the TUI at the end against
  the end of the warm-up, and the sockets in the plugins dir against the
  start (each restart removes its socket and makes it again).

    python bench/bench_soak.py                       # CI-sized: 3 minutes
    python bench/bench_soak.py --minutes 60          # the documented hour
    python bench/bench_soak.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import platform
import pty
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DEVCTL = [sys.executable, "-m", "devctl"]
FLIP = re.compile(r"devctl: (?P<res>\S+) (?P<dev>\S+): (?P<old>Healthy|Unhealthy) -> (?P<new>Healthy|Unhealthy)$")
SERVING = re.compile(r"devctl: serving (?P<res>\S+) \(")


@dataclass
class Sample:
    """One reading of a process: resident memory, open fds (and what they are) and threads."""

    at: float
    rss_kib: int
    fds: int
    threads: int
    fd_kinds: dict[str, int] = field(default_factory=dict)


def fd_kinds(pid: int) -> dict[str, int]:
    """How many fds of each kind a process holds: socket, pipe, anon_inode:[eventpoll], or a file's dir."""
    kinds: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                kind = target.split(":[")[0] if ":[" in target else os.path.dirname(target) or target
                kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def sample(pid: int) -> Sample | None:
    """Read a process' RSS, fd count and thread count from /proc (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return Sample(time.monotonic(), rss, fds, threads, fd_kinds(pid))


@dataclass
class Plugin:
    """One `devctl plugin serve` process, restarted in place; its log outlives each incarnation."""

    root: Path
    resource: str
    devices: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *DEVCTL,
                    "plugin",
                    "serve",
                    "--root",
                    str(self.root),
                    "--resource",
                    self.resource,
                    "--count",
                    str(self.devices),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)

    @property
    def ids(self) -> list[str]:
        name = self.resource.rsplit("/", 1)[-1]
        return [f"{name}-{i}" for i in range(self.devices)]


@dataclass
class Lines:
    """A child's stdout read on a thread, each line kept."""

    lines: list[str] = field(default_factory=list)

    def follow(self, stream) -> threading.Thread:  # type: ignore[no-untyped-def]
        def run() -> None:
            for raw in stream:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t


def drain(fd: int) -> threading.Thread:
    """Read and drop a pty's output so the TUI never blocks writing to it."""

    def run() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 65536):
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def sockets_in(directory: Path) -> list[str]:
    """The plugins dir's entries, without the kubelet's dot-named temporaries (its checkpoint's atomic write)."""
    return sorted(name for name in os.listdir(directory) if not name.startswith("."))


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_soak: timed out waiting for {what}")
        time.sleep(0.1)


def expected_changes(logs: list[Path], plugins: list[Plugin]) -> dict[tuple[str, str], list[str]]:
    """Every health change the plugins made, per (resource, device), in order, from their own logs.

    A flip line is a change; a "serving" line after the first start is a restart, after which
    every device that was unhealthy is healthy again (a change too, seen by watch on reconnect).
    """
    changes: dict[tuple[str, str], list[str]] = {}
    for plugin, log in zip(plugins, logs, strict=True):
        state = dict.fromkeys(plugin.ids, "Healthy")
        started = False
        for line in log.read_text(errors="replace").splitlines():
            if m := FLIP.match(line):
                state[m["dev"]] = m["new"]
                changes.setdefault((m["res"], m["dev"]), []).append(m["new"])
            elif SERVING.match(line):
                if started:
                    for dev, health in state.items():
                        if health != "Healthy":
                            state[dev] = "Healthy"
                            changes.setdefault((plugin.resource, dev), []).append("Healthy")
                started = True
    return changes


def reconnects(lines: list[str], resource: str) -> int:
    """How many times watch has said it is connected again to ``resource``'s plugin."""
    return sum(1 for line in list(lines) if '"reconnected"' in line and f'"{resource}"' in line)


def seen_changes(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    """The watch's health events, per (resource, device), in order."""
    seen: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("event") == "health":
                seen.setdefault((event["resource"], event["device"]), []).append(event["to"])
    return seen


async def flip(control_dir: str, resource: str, device: str, health: str) -> bool:
    """Ask a running plugin to change a device's health, as `devctl plugin set-health` does."""
    from devctl.lab.plugin.control import ControlError, NoPlugin, control

    try:
        reply = await control(control_dir, resource, {"op": "set-health", "id": device, "health": health}, 5.0)
    except (ControlError, NoPlugin):
        return False
    return bool(reply.get("ok"))


def settled(pid: int, times: int = 5, every: float = 0.5) -> Sample | None:
    """The reading with the fewest open fds of a few: a poll in flight holds connections for a moment."""
    readings = []
    for _ in range(times):
        if (reading := sample(pid)) is not None:
            readings.append(reading)
        time.sleep(every)
    return min(readings, key=lambda r: r.fds) if readings else None


def growth(first: Sample | None, last: Sample | None) -> tuple[float | None, int | None, int | None]:
    if not first or not last:
        return None, None, None
    return 100.0 * (last.rss_kib - first.rss_kib) / first.rss_kib, last.fds - first.fds, last.threads - first.threads


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--plugins", type=int, default=4)
    ap.add_argument("--devices", type=int, default=16)
    ap.add_argument("--flip-every", type=float, default=1.0)
    ap.add_argument("--restart-every", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=None, help="seconds before the first reading [20%% of the run]")
    ap.add_argument("--no-tui", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from devctl.node.controlsockets import default_control_dir

    duration = args.minutes * 60
    warmup = args.warmup if args.warmup is not None else min(0.2 * duration, 120.0)
    tmp = Path(tempfile.mkdtemp(prefix="devctl-soak-"))
    root = tmp / "node"
    env = {**os.environ, "DEVCTL_ROOT": ""}
    env.pop("DEVCTL_ROOT")
    children: list[subprocess.Popen[bytes]] = []
    plugins: list[Plugin] = []
    rng = random.Random(7)
    try:
        sim = subprocess.Popen(
            [*DEVCTL, "sim", "--root", str(root)],
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "sim.log").open("wb"),
            env=env,
        )
        children.append(sim)
        plugins_dir = root / "var/lib/kubelet/device-plugins"
        wait_for(
            lambda: (
                (plugins_dir / "kubelet.sock").exists()
                and (root / "var/lib/kubelet/pod-resources/kubelet.sock").exists()
            ),
            60,
            "the simulated node",
        )
        for i in range(args.plugins):
            p = Plugin(root, f"soak.example.com/p{i}", args.devices, tmp / f"plugin-{i}.log")
            p.start()
            plugins.append(p)
        wait_for(lambda: all("registered" in p.log.read_text() for p in plugins), 60, "the plugins to register")
        sockets_at_start = sockets_in(plugins_dir)

        watch = subprocess.Popen(
            [*DEVCTL, "watch", "--root", str(root), "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=(tmp / "watch.log").open("wb"),
            env=env,
        )
        children.append(watch)
        watched = Lines()
        watched.follow(watch.stdout)
        wait_for(lambda: sum('"snapshot"' in line for line in watched.lines) >= args.plugins, 60, "watch's snapshots")

        tui_pid = None
        if not args.no_tui:
            tui_pid, master = pty.fork()
            if tui_pid == 0:  # the child: the TUI on the pty, 80×24
                os.environ.update({"TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"})
                os.environ.pop("DEVCTL_ROOT", None)
                os.execv(sys.executable, [*DEVCTL, "tui", "--root", str(root)])
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            drain(master)

        control_dir = default_control_dir(str(root))
        start = time.monotonic()
        next_restart = start + args.restart_every
        restarts = flips = refused = 0
        reconnect_s: list[float] = []
        trace: dict[str, list[int]] = {}  # each process' open fds every 30 s: a leak grows, a warm-up levels off
        next_trace = start
        first: dict[str, Sample | None] = {}
        last: dict[str, Sample | None] = {}
        pids = {"watch": watch.pid, **({"tui": tui_pid} if tui_pid else {})}
        health: dict[tuple[str, str], str] = {}
        loop = asyncio.new_event_loop()
        while (now := time.monotonic()) - start < duration:
            if not first and now - start >= warmup:
                first = {name: settled(pid) for name, pid in pids.items()}
            if now >= next_trace:
                next_trace += 30
                for name, pid in pids.items():
                    if (reading := sample(pid)) is not None:
                        trace.setdefault(name, []).append(reading.fds)
            if now >= next_restart:
                victim = plugins[restarts % len(plugins)]
                registrations = victim.log.read_text().count("registered")
                time.sleep(0.5)  # the last flip to it has left the plugin
                seen_reconnects = reconnects(watched.lines, victim.resource)
                victim.stop()
                restarted_at = time.monotonic()
                victim.start()
                for dev in victim.ids:
                    health.pop((victim.resource, dev), None)
                restarts += 1
                next_restart += args.restart_every
                wait_for(
                    lambda v=victim, n=registrations: v.log.read_text().count("registered") > n,
                    60,
                    "a restarted plugin",
                )
                # A change made before watch is connected again cannot be seen by anyone (the kubelet
                # neither): flip only once watch has the new stream, and say how long that took.
                wait_for(
                    lambda v=victim, n=seen_reconnects: reconnects(watched.lines, v.resource) > n,
                    60,
                    "watch to reconnect",
                )
                reconnect_s.append(time.monotonic() - restarted_at)
            plugin = rng.choice(plugins)
            device = rng.choice(plugin.ids)
            key = (plugin.resource, device)
            new = "unhealthy" if health.get(key, "healthy") == "healthy" else "healthy"
            if loop.run_until_complete(flip(control_dir, plugin.resource, device, new)):
                health[key] = new
                flips += 1
            else:
                refused += 1
            time.sleep(max(0.0, args.flip_every - (time.monotonic() - now)))
        loop.close()
        last = {name: settled(pid) for name, pid in pids.items()}
        expected = expected_changes([p.log for p in plugins], plugins)
        total = sum(len(v) for v in expected.values())
        with contextlib.suppress(SystemExit):
            wait_for(lambda: sum(len(v) for v in seen_changes(watched.lines).values()) >= total, 30, "the last events")
        seen = seen_changes(watched.lines)
        lost = sum(max(0, len(v) - len(seen.get(k, []))) for k, v in expected.items())
        wrong = sorted(k for k in set(expected) | set(seen) if expected.get(k, []) != seen.get(k, []))
        sockets_at_end = sockets_in(plugins_dir)
    finally:
        for p in plugins:
            with contextlib.suppress(Exception):
                p.stop()
        for c in reversed(children):
            with contextlib.suppress(Exception):
                c.send_signal(signal.SIGTERM)
                c.wait(timeout=20)
        if "tui_pid" in locals() and tui_pid:
            with contextlib.suppress(Exception):
                os.kill(tui_pid, signal.SIGTERM)
                os.waitpid(tui_pid, 0)

    figures: dict[str, dict[str, object]] = {}
    print(
        f"soak: {args.minutes:g} min, {args.plugins} plugins × {args.devices} devices, a flip every "
        f"{args.flip_every:g} s ({flips} made, {refused} refused mid-restart), {restarts} restarts; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    ok = True
    for name in pids:
        rss, fds, threads = growth(first.get(name), last.get(name))
        if rss is None:
            print(f"  {name}: ended early or never sampled")
            ok = False
            continue
        print(
            f"  {name}: RSS {first[name].rss_kib / 1024:.1f} → {last[name].rss_kib / 1024:.1f} MiB "  # type: ignore[union-attr]
            f"({rss:+.1f} %), fds {fds:+d}, threads {threads:+d}"
        )
        print(f"    open fds every 30 s: {trace.get(name, [])}")
        if fds:
            a, b = first[name].fd_kinds, last[name].fd_kinds  # type: ignore[union-attr]
            grown = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b) if b.get(k, 0) != a.get(k, 0)}
            print(f"    fds that changed: {grown}")
        figures[f"{name}_rss_growth_pct"] = {"value": round(rss, 2), "unit": "%", "target": 10, "better": "lower"}
        figures[f"{name}_fd_growth"] = {"value": fds, "unit": "fds", "target": 0, "better": "lower"}
        figures[f"{name}_thread_growth"] = {"value": threads, "unit": "threads", "target": 0, "better": "lower"}
        ok &= rss < 10 and fds <= 0 and threads <= 0
    if reconnect_s:
        print(f"  watch connected again {max(reconnect_s):.2f} s at most after a plugin's restart began")
    print(
        f"  health changes made (plugins' logs): {total}; watch events lost: {lost}; devices whose "
        f"events differ: {len(wrong)}"
    )
    for k in wrong[:5]:
        print(f"    {k[0]} {k[1]}: made {expected.get(k, [])}, seen {seen.get(k, [])}")
    leaked = sorted(set(sockets_at_end) - set(sockets_at_start))
    gone = sorted(set(sockets_at_start) - set(sockets_at_end))
    print(
        f"  plugins dir: {len(sockets_at_start)} entries at start, {len(sockets_at_end)} at end"
        + (f"; new: {', '.join(leaked)}" if leaked else "")
        + (f"; gone: {', '.join(gone)}" if gone else "")
    )
    figures["events_lost"] = {"value": lost, "unit": "events", "target": 0, "better": "lower"}
    figures["devices_with_wrong_events"] = {"value": len(wrong), "unit": "devices", "target": 0, "better": "lower"}
    figures["sockets_leaked"] = {"value": len(leaked), "unit": "sockets", "target": 0, "better": "lower"}
    ok &= lost == 0 and not wrong and not leaked
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "bench": "soak",
                    "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                    "minutes": args.minutes,
                    "figures": figures,
                },
                indent=1,
            )
            + "\n"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    print("  result:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
