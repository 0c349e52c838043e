"""``devctl watch`` as a person runs it: real processes against a simulated node and real plugins.

Each watch is a subprocess whose stdout and stderr are read line by line in
threads, so every wait is bounded and a hung watch fails the test.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from badservers import stale_socket
from helpers import DEVCTL, devctl_env, run_devctl

from devctl.lab.sim.thread import SimHandle

CONTRACT_KEYS = {"time", "resource", "socket", "event", "device", "from", "to", "devices", "healthy"}
GPU = "nvidia.com/gpu"


class Watch:
    """A running ``devctl`` process whose output lines arrive with the time they were read."""

    def __init__(self, root: Path, *args: str):
        self.proc = subprocess.Popen(
            [*DEVCTL, *args], env=devctl_env(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.out: queue.Queue[tuple[float, str | None]] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()
        self._err_thread = threading.Thread(target=self._collect_err, daemon=True)
        self._err_thread.start()

    @staticmethod
    def _read(stream, into: queue.Queue) -> None:
        for line in stream:
            into.put((time.monotonic(), line.rstrip("\n")))
        into.put((time.monotonic(), None))

    def _collect_err(self) -> None:
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def line(self, timeout: float = 10.0) -> tuple[float, str]:
        try:
            at, line = self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout}s; stderr: {self.err}") from None
        if line is None:
            raise AssertionError(f"devctl ended (rc={self.proc.wait(5)}); stderr: {self.err}")
        return at, line

    def event(self, timeout: float = 10.0) -> tuple[float, dict]:
        at, line = self.line(timeout)
        return at, json.loads(line)

    def until(self, event: str, timeout: float = 10.0, **fields: object) -> tuple[float, dict]:
        deadline = time.monotonic() + timeout
        while True:
            at, obj = self.event(max(0.01, deadline - time.monotonic()))
            if obj["event"] == event and all(obj[k] == v for k, v in fields.items()):
                return at, obj

    def rest(self, timeout: float = 10.0) -> tuple[int, list[str], str]:
        """Wait for the end: exit code, the remaining stdout lines, and stderr."""
        rc = self.proc.wait(timeout)
        lines = []
        while (line := self.out.get(timeout=timeout)[1]) is not None:
            lines.append(line)
        self._err_thread.join(timeout)
        return rc, lines, "\n".join(self.err)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def watches() -> Iterator[list[Watch]]:
    started: list[Watch] = []
    yield started
    for w in started:
        w.stop()


def start(watches: list[Watch], root: Path, *args: str) -> Watch:
    w = Watch(root, *args)
    watches.append(w)
    return w


def test_a_health_flip_by_plugin_set_health_appears_within_one_second(sim_node: SimHandle, watches) -> None:
    w = start(watches, sim_node.root, "watch", GPU, "-o", "json")
    _, snap = w.until("snapshot")
    assert set(snap) == CONTRACT_KEYS - {"device", "from", "to"}  # cli.md: `device` absent
    assert (snap["resource"], snap["devices"], snap["healthy"]) == (GPU, 8, 7)
    assert snap["socket"].endswith("/nvidia-gpu.sock")
    assert snap["time"].endswith("Z") and len(snap["time"]) == len("2026-01-02T03:04:05.678Z")

    done = run_devctl("plugin", "set-health", GPU, "GPU-3", "unhealthy", root=sim_node.root)
    assert done.exit_code == 0, done.stderr
    sent = time.monotonic()
    at, flip = w.event(timeout=5.0)
    assert at - sent < 1.0
    assert set(flip) == CONTRACT_KEYS
    assert (flip["event"], flip["device"], flip["from"], flip["to"], flip["devices"], flip["healthy"]) == (
        "health",
        "GPU-3",
        "Healthy",
        "Unhealthy",
        8,
        6,
    )


def test_a_kubelet_restart_disconnects_and_reconnects(sim_node: SimHandle, watches) -> None:
    w = start(watches, sim_node.root, "watch", GPU, "-o", "json")
    w.until("snapshot")
    sim_node.restart_kubelet()
    _, down = w.until("disconnected", resource=GPU)
    assert (down["devices"], down["healthy"]) == (8, 7)
    _, back = w.until("reconnected", resource=GPU)
    assert (back["devices"], back["healthy"]) == (8, 7)
    sim_node.set_health(GPU, "GPU-0", "Unhealthy")
    _, flip = w.until("health")
    assert flip["device"] == "GPU-0"


def test_an_unknown_resource_without_wait_is_exit_1_with_one_line(sim_node: SimHandle) -> None:
    # exit 1, as an unknown resource is in ls, devices and get (issue 10, item 5)
    r = run_devctl("watch", "example.com/nothing", "-o", "json", root=sim_node.root)
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "devctl: no plugin serves example.com/nothing (see `devctl plugins`; use --wait to wait for it)"
    ]
    for typo in ("nvidia.com/gpus", "gpu", "NVIDIA.com/gpu"):
        r = run_devctl("watch", typo, root=sim_node.root)
        assert (r.exit_code, r.stderr.splitlines()) == (
            1,
            [f"devctl: no plugin serves {typo} (did you mean {GPU}? see `devctl plugins`)"],
        )


def test_a_missing_kubelet_dir_is_said_as_such(tmp_path) -> None:
    r = run_devctl("watch", GPU, root=tmp_path)
    assert r.exit_code == 3
    assert r.stderr.splitlines() == [
        f"devctl: {tmp_path}/var/lib/kubelet/device-plugins does not exist: is this a node? --root/--kubelet-dir"
    ]


def test_a_user_who_may_not_open_the_sockets_is_told_so(sim_node: SimHandle) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    os.chmod(sim_node.root, 0o755)  # the directories are open; the plugins' sockets are root's only
    r = run_devctl("watch", GPU, "--once", root=sim_node.root, as_nobody=True)
    assert (r.exit_code, r.stdout) == (3, "")  # as every read command without rights
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"devctl: no plugin serves {GPU} that devctl may open: ")
    assert "run as root (e.g. kubectl debug node/NAME" in line


def test_wait_then_the_plugin_appears_gives_its_snapshot(sim_node: SimHandle, watches) -> None:
    w = start(watches, sim_node.root, "watch", "example.com/late", "--wait", "-o", "json")
    deadline = time.monotonic() + 10
    while not any("waiting for example.com/late" in e for e in w.err):
        assert time.monotonic() < deadline, w.err
        time.sleep(0.05)
    # A plugin that registers with the (simulated) kubelet; the watch learns its socket from the node.
    start(watches, sim_node.root, "plugin", "serve", "--resource", "example.com/late", "--count", "2")
    _, snap = w.until("snapshot", timeout=15.0)
    assert (snap["resource"], snap["devices"], snap["healthy"]) == ("example.com/late", 2, 2)


def test_once_prints_a_snapshot_per_plugin_and_exits(sim_node: SimHandle) -> None:
    r = run_devctl("watch", "--once", "-o", "json", root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted((e["event"], e["resource"], e["devices"]) for e in events) == [
        ("snapshot", "gpu.example.com", 4),  # the node's DRA driver, on the same timeline
        ("snapshot", "hardware-vendor.example/foo", 2),
        ("snapshot", "intel.com/sriov_netdevice", 8),
        ("snapshot", GPU, 8),
        ("snapshot", "nvidia.com/gpu.shared", 4),  # the time-sliced GPU-8
    ]


def test_once_as_a_table(sim_node: SimHandle) -> None:
    r = run_devctl("watch", GPU, "--once", root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    header, line = r.stdout.splitlines()
    assert header.split() == ["TIME", "EVENT", "CHANGE", "OBJECT"]
    clock, event, counts, healthy, resource = line.split()
    assert (event, counts, healthy, resource) == ("snapshot", "7/8", "healthy", GPU)
    assert len(clock) == len("03:04:05.678") and clock[2] == ":" and clock[8] == "."


def test_once_where_no_plugin_socket_answers_is_exit_3_with_one_line_each(short_root: Path) -> None:
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    dead = stale_socket(str(plugins / "dead.sock"))
    r = run_devctl("watch", "--once", "-o", "json", root=short_root)
    assert (r.exit_code, r.stdout) == (3, "")
    # The socket is named once, and --once does not promise a retry it will not make.
    assert r.stderr.splitlines() == [f"devctl: {dead}: stale socket (nothing listens on it)"]
    os.unlink(dead)
    assert run_devctl("watch", "--once", root=short_root).exit_code == 0  # no plugins at all is an answer


def test_once_as_a_table_lines_up_a_long_resource_name(sim_node: SimHandle) -> None:
    foo = "hardware-vendor.example/foo"  # longer than the resource column's minimum
    r = run_devctl("watch", foo, GPU, "--once", root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert len(rows) == 2
    assert {row.index(row.split()[-1]) for row in rows} == {header.index("OBJECT")}


def test_count_ends_after_n_events(sim_node: SimHandle) -> None:
    r = run_devctl("watch", "--count", "2", "-o", "json", root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    assert [json.loads(line)["event"] for line in r.stdout.splitlines()] == ["snapshot", "snapshot"]


def test_duration_ends_the_watch(sim_node: SimHandle) -> None:
    started = time.monotonic()
    r = run_devctl("watch", GPU, "--duration", "1", "-o", "json", root=sim_node.root)
    took = time.monotonic() - started
    assert r.exit_code == 0, r.stderr
    assert [json.loads(line)["event"] for line in r.stdout.splitlines()] == ["snapshot"]
    assert 1.0 <= took < 8.0


def test_sigint_exits_0_without_a_traceback(sim_node: SimHandle, watches) -> None:
    w = start(watches, sim_node.root, "watch", "-o", "json")
    w.until("snapshot")
    w.proc.send_signal(signal.SIGINT)
    rc, _, err = w.rest()
    assert rc == 0
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_record_writes_the_json_lines_while_printing_the_table(sim_node: SimHandle, short_root: Path) -> None:
    as_json = short_root / "json.jsonl"
    as_table = short_root / "table.jsonl"
    r = run_devctl("watch", "--once", "-o", "json", "--record", str(as_json), root=sim_node.root)
    assert r.exit_code == 0, r.stderr
    assert as_json.read_text() == r.stdout
    t = run_devctl("watch", "--once", "--record", str(as_table), root=sim_node.root)
    assert t.exit_code == 0, t.stderr
    recorded = [json.loads(line) for line in as_table.read_text().splitlines()]
    rows = t.stdout.splitlines()[1:]
    assert len(recorded) == len(rows) == 5  # four device plugins and the DRA driver
    for obj, row in zip(recorded, rows, strict=True):
        assert set(obj) == CONTRACT_KEYS - {"device", "from", "to"}
        assert [row.split()[1], row.split()[-1]] == [obj["event"], obj["resource"]]
        assert obj["time"][11:23] == row.split()[0]


def test_record_to_an_unwritable_place_is_a_usage_error(short_root: Path) -> None:
    r = run_devctl("watch", "--once", "--record", "/nonexistent/dir/x.jsonl", root=short_root)
    assert r.exit_code == 2
    assert r.stderr.startswith("devctl: --record /nonexistent/dir/x.jsonl:")


def test_output_other_than_table_or_json_is_refused(short_root: Path) -> None:
    assert run_devctl("watch", "--once", "-o", "yaml", root=short_root).exit_code == 2


def test_a_duration_that_is_not_a_number_is_refused(short_root: Path) -> None:
    r = run_devctl("watch", "--duration", "nan", root=short_root)
    assert (r.exit_code, r.stderr) == (2, "devctl: --duration: not a number of seconds\n")


def test_a_plugin_process_killed_and_started_again(short_root: Path, watches) -> None:
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    serve = ["plugin", "serve", "--no-register", "--resource", "example.com/x", "--socket", "x.sock"]
    plugin = start(watches, short_root, *serve, "--count", "2")
    deadline = time.monotonic() + 10
    while not (plugins / "x.sock").exists():
        assert time.monotonic() < deadline, plugin.err
        time.sleep(0.05)
    w = start(watches, short_root, "watch", "--socket", "x.sock", "-o", "json")
    _, snap = w.until("snapshot")
    assert (snap["socket"], snap["devices"]) == (str(plugins / "x.sock"), 2)

    plugin.proc.send_signal(signal.SIGTERM)
    assert plugin.rest()[0] == 0
    _, down = w.until("disconnected")
    assert down["devices"] == 2
    # Started again with one more device: the watch reconnects and tells what changed meanwhile.
    start(watches, short_root, *serve, "--count", "3")
    _, back = w.until("reconnected", timeout=15.0)
    assert back["devices"] == 3
    _, added = w.event()
    assert (added["event"], added["device"], added["devices"]) == ("added", "x-2", 3)
    w.proc.send_signal(signal.SIGTERM)
    rc, _, err = w.rest()
    assert rc == 0
    # The running devctl plugin's control socket names the resource, so the notice does too.
    assert "example.com/x: " in err and "reconnecting" in err


def test_a_malformed_plugin_on_the_node_does_not_stop_the_watch_of_the_others(sim_node: SimHandle, watches) -> None:
    bad = sim_node.paths.plugins_dir + "/bad.sock"
    serve_bad = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[2]); from badservers import malformed_plugin\n"
        "async def main():\n"
        "    async with malformed_plugin(sys.argv[1]):\n"
        "        await asyncio.Event().wait()\n"
        "asyncio.run(main())"
    )
    server = subprocess.Popen([sys.executable, "-c", serve_bad, bad, str(Path(__file__).parent)])
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(bad):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
        w = start(watches, sim_node.root, "watch", "-o", "json")
        snapshots = {w.until("snapshot")[1]["resource"] for _ in range(5)}
        assert snapshots == {
            GPU,
            "nvidia.com/gpu.shared",
            "intel.com/sriov_netdevice",
            "hardware-vendor.example/foo",
            "gpu.example.com",
        }
        sim_node.set_health(GPU, "GPU-7", "Unhealthy")
        _, flip = w.until("health")
        assert (flip["resource"], flip["device"]) == (GPU, "GPU-7")
        # The bad socket is named once in its line (not "devctl: bad.sock: bad.sock ListAndWatch: ...").
        assert any(line.startswith(f"devctl: {bad} ") and line.count(str(bad)) == 1 for line in w.err), w.err
    finally:
        server.kill()
        server.wait(10)


def test_a_snapshot_file_cannot_be_watched(short_root: Path) -> None:
    r = run_devctl("--from", str(short_root / "snap.json"), "watch", root=short_root)
    assert r.exit_code == 2
    assert r.stderr.startswith("devctl: --from: watch follows live plugin streams")


def test_a_hung_socket_elsewhere_does_not_delay_the_first_line(sim_node: SimHandle, watches) -> None:
    import socket as sockets

    # GIVEN the node's plugins dir also holds a socket that accepts and never answers
    hung = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    hung.bind(str(sim_node.root / "var/lib/kubelet/device-plugins/hung.sock"))
    hung.listen(64)
    try:
        # WHEN a resource is watched with a long deadline
        begun = time.monotonic()
        w = start(watches, sim_node.root, "--timeout", "10", "watch", GPU, "-o", "json")
        at, first = w.event(timeout=9.0)
        # THEN its snapshot comes long before that deadline (the old watch probed every socket first)
        assert (first["event"], first["resource"]) == ("snapshot", GPU)
        assert at - begun < 5.0
        # AND a flip right after it is its own event, not folded into that snapshot
        done = run_devctl("plugin", "set-health", GPU, "GPU-3", "unhealthy", root=sim_node.root)
        assert done.exit_code == 0, done.stderr
        _, flip = w.until("health", device="GPU-3")
        assert flip["to"] == "Unhealthy"
    finally:
        hung.close()


def test_a_quiet_watch_ends_when_its_reader_closes_the_pipe(sim_node: SimHandle) -> None:
    # GIVEN `devctl watch | head -1` on a node where nothing changes
    reader, writer = os.pipe()
    proc = subprocess.Popen(
        [*DEVCTL, "watch", GPU], env=devctl_env(sim_node.root), stdout=writer, stderr=subprocess.PIPE, text=True
    )
    os.close(writer)
    try:
        with os.fdopen(reader, "rb") as pipe:
            assert pipe.readline().startswith(b"TIME")  # the header: the watch runs
        # WHEN the reader goes away with nothing more written
        # THEN the watch ends by itself, quietly, with 0
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
