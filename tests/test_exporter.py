"""``devctl exporter`` against a real simulated node: scraped over HTTP, parsed with prometheus-client's parser.

The exporter runs as a real process (it owns its signal handlers); the node's
plugins and pod-resources are the simulator's real gRPC servers, so a plugin
that stops, a rate limit that refuses, and a device ID full of control
characters reach the exporter exactly as on a node.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import DEVCTL, devctl_env, run_devctl

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from devctl.exporter.server import ListenError, parse_listen
from devctl.model import Device

GPU = "nvidia.com/gpu"
DRIVER = "gpu.example.com"  # the default scenario's DRA driver: gpu-0..gpu-3, gpu-3 unhealthy
WAIT = 15.0


class Exporter:
    """A running ``devctl exporter`` process and its address."""

    def __init__(self, proc: subprocess.Popen[str], url: str):
        self.proc = proc
        self.url = url

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def families(self) -> dict[str, Any]:
        code, text = self.get("/metrics")
        assert code == 200
        return {f.name: f for f in text_string_to_metric_families(text)}

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        family = self.families().get(name)
        return [(s.labels, s.value) for s in family.samples] if family else []

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert self.proc.poll() is None, "the exporter exited"
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g}s: {what}")
            time.sleep(0.05)


@contextmanager
def exporter(root: Path, *args: str) -> Iterator[Exporter]:
    """``devctl --root ROOT exporter --listen 127.0.0.1:0 ARGS...``, ready (first refresh done) when this yields."""
    proc = subprocess.Popen(
        [*DEVCTL, "--root", str(root), "--timeout", "2", "exporter", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=devctl_env(),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving (http://\S+)/metrics", line)
        assert match, f"no address in {line!r}"
        running = Exporter(proc, match.group(1))
        running.wait_for("the first refresh", lambda: running.get("/healthz")[0] == 200)
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _by(samples: list[tuple[dict[str, str], float]], **labels: str) -> list[float]:
    return [v for ls, v in samples if all(ls.get(k) == want for k, want in labels.items())]


def test_every_family_of_the_contract_with_help_and_the_node_numbers(sim_node) -> None:
    """GIVEN the default node WHEN scraped THEN the contract's families, each with HELP, say what `ls` says."""
    with exporter(sim_node.root, "--interval", "1") as ex:
        ex.wait_for("live streams", lambda: bool(_by(ex.samples("devctl_device_health"), device="GPU-0")))
        families = ex.families()
        for name in (
            "devctl_device_health",
            "devctl_device_allocated",
            "devctl_resource_capacity",
            "devctl_resource_allocatable",
            "devctl_resource_allocated",
            "devctl_plugin_up",
            "devctl_plugin_rpc_duration_seconds",
            "devctl_claim_state",
            "devctl_doctor_findings",
            "devctl_source_up",
            "devctl_last_refresh_timestamp_seconds",
        ):
            assert name in families, name
            assert families[name].documentation, f"{name} has no HELP"
        assert families["devctl_plugin_rpc_duration_seconds"].type == "histogram"
        health = ex.samples("devctl_device_health")
        assert _by(health, resource=GPU, device="GPU-5", numa="1", kind="device-plugin") == [0.0]
        assert _by(health, resource=GPU, device="GPU-0") == [1.0]
        assert _by(ex.samples("devctl_resource_capacity"), resource=GPU) == [8.0]
        assert _by(ex.samples("devctl_resource_allocatable"), resource=GPU) == [7.0]
        assert _by(ex.samples("devctl_resource_allocated"), resource=GPU) == [6.0]
        assert _by(ex.samples("devctl_device_allocated"), device="GPU-0", namespace="ml", pod="train-0") == [1.0]
        assert all(v == 1.0 for _, v in ex.samples("devctl_source_up"))
        assert {ls["resource"] for ls, v in ex.samples("devctl_plugin_up") if v == 1.0} >= {GPU}
        # The default scenario's misaligned container is a doctor finding.
        assert ex.samples("devctl_doctor_findings")
        assert ex.get("/healthz") == (200, "ok\n")
        assert ex.get("/nothing")[0] == 404


def test_a_plugin_that_dies_and_comes_back(sim_node) -> None:
    """GIVEN a live exporter WHEN the GPU plugin stops THEN plugin_up 0 and no GPU health series; back when it is."""
    with exporter(sim_node.root, "--interval", "0.5") as ex:

        def gpu_up() -> list[float]:
            return _by(ex.samples("devctl_plugin_up"), resource=GPU)

        def gpu_health() -> list[float]:
            return _by(ex.samples("devctl_device_health"), resource=GPU)

        ex.wait_for("GPU plugin up", lambda: gpu_up() == [1.0] and len(gpu_health()) == 8)

        async def stop(node) -> None:
            await node.plugins[GPU].stop()

        sim_node.call(stop)
        ex.wait_for("GPU plugin down", lambda: gpu_up() == [0.0])
        assert gpu_health() == []  # no stale device series
        # The holders come from pod-resources, which still names them.
        assert _by(ex.samples("devctl_device_allocated"), device="GPU-0") == [1.0]

        async def start(node) -> None:
            await node.plugins[GPU].start()

        sim_node.call(start)
        ex.wait_for("GPU plugin back", lambda: gpu_up() == [1.0] and len(gpu_health()) == 8)


def test_a_kubelet_restart(sim_node) -> None:
    """GIVEN a live exporter WHEN the kubelet restarts (every socket deleted) THEN each plugin is up again, once."""
    with exporter(sim_node.root, "--interval", "0.5") as ex:
        ex.wait_for("GPU health", lambda: len(_by(ex.samples("devctl_device_health"), resource=GPU)) == 8)
        sim_node.restart_kubelet()

        def settled() -> bool:
            up = [(ls, v) for ls, v in ex.samples("devctl_plugin_up") if ls["kind"] == "device-plugin"]
            sockets = [ls["socket"] for ls, _ in up]
            health = _by(ex.samples("devctl_device_health"), resource=GPU)
            return len(sockets) == len(set(sockets)) == 4 and all(v == 1.0 for _, v in up) and len(health) == 8

        ex.wait_for("every plugin back after the restart", settled)
        assert _by(ex.samples("devctl_resource_allocated"), resource=GPU) == [6.0]


def test_a_health_flip_shows_without_waiting_for_a_refresh(sim_node) -> None:
    """GIVEN an interval of an hour WHEN a device goes unhealthy THEN its health series follows the live stream."""
    with exporter(sim_node.root, "--interval", "3600") as ex:
        ex.wait_for("GPU-0 healthy", lambda: _by(ex.samples("devctl_device_health"), device="GPU-0") == [1.0])
        sim_node.set_health(GPU, "GPU-0", "Unhealthy")
        ex.wait_for("GPU-0 unhealthy", lambda: _by(ex.samples("devctl_device_health"), device="GPU-0") == [0.0])
        assert _by(ex.samples("devctl_resource_allocatable"), resource=GPU) == [6.0]


def _dra_health(ex: Exporter) -> dict[str, float]:
    """The DRA driver's devices by their device name (the pool is the node's name), as scraped."""
    return {
        ls["device"].rpartition("/")[2]: v
        for ls, v in ex.samples("devctl_device_health")
        if ls["kind"] == "dra" and ls["resource"] == DRIVER
    }


def test_a_dra_driver_and_its_claims(sim_node) -> None:
    """GIVEN the default node's DRA driver WHEN scraped THEN kind="dra" series say what `ls`, `devices` and
    `claims` say: 4 devices, gpu-3 unhealthy, the two prepared claims and who holds their devices."""
    with exporter(sim_node.root, "--interval", "1") as ex:
        ex.wait_for("the DRA driver's devices", lambda: len(_dra_health(ex)) == 4)
        assert _dra_health(ex) == {"gpu-0": 1.0, "gpu-1": 1.0, "gpu-2": 1.0, "gpu-3": 0.0}
        health = [ls for ls, _ in ex.samples("devctl_device_health") if ls["kind"] == "dra"]
        assert all(re.fullmatch(r"[^/]+/gpu-\d", ls["device"]) for ls in health)  # <pool>/<device>
        assert [ls["numa"] for ls in health if ls["device"].endswith("/gpu-0")] == ["0"]
        assert _by(ex.samples("devctl_resource_capacity"), kind="dra", resource=DRIVER) == [4.0]
        assert _by(ex.samples("devctl_resource_allocatable"), kind="dra", resource=DRIVER) == [3.0]
        assert _by(ex.samples("devctl_resource_allocated"), kind="dra", resource=DRIVER) == [3.0]
        # The DRA driver is no device plugin: its counts never leak into kind="device-plugin" series.
        assert _by(ex.samples("devctl_resource_capacity"), kind="device-plugin", resource=DRIVER) == []
        assert _by(ex.samples("devctl_plugin_up"), kind="dra", resource=DRIVER) == [1.0]
        held = {
            (ls["device"].rpartition("/")[2], ls["namespace"], ls["pod"], ls["container"])
            for ls, v in ex.samples("devctl_device_allocated")
            if ls["kind"] == "dra" and v == 1.0
        }
        assert ("gpu-0", "inference", "embed-0", "embedder") in held
        assert {h[0] for h in held} == {"gpu-0", "gpu-2", "gpu-3"}
        states = {
            (ls["namespace"], ls["claim"], ls["driver"], ls["state"]) for ls, v in ex.samples("devctl_claim_state")
        }
        assert states == {
            ("inference", "embed-gpu", DRIVER, "prepared"),
            ("ml", "train-1-gpus", DRIVER, "prepared"),
        }
        assert all(v == 1.0 for _, v in ex.samples("devctl_claim_state"))
        up = dict((ls["source"], v) for ls, v in ex.samples("devctl_source_up"))
        assert up["dra-checkpoint"] == up["cdi"] == 1.0


def test_a_dra_health_flip_shows_without_waiting_for_a_refresh(sim_node) -> None:
    """GIVEN an interval of an hour WHEN `devctl plugin set-health` flips a DRA device, and back THEN its series and
    the driver's allocatable count follow the driver's live health stream, long before the next refresh."""
    with exporter(sim_node.root, "--interval", "3600") as ex:
        ex.wait_for("gpu-1 healthy", lambda: _dra_health(ex).get("gpu-1") == 1.0)
        refreshed = ex.samples("devctl_last_refresh_timestamp_seconds")
        pool = next(ls["device"] for ls, _ in ex.samples("devctl_device_health") if ls["kind"] == "dra")
        pool = pool.rpartition("/")[0]
        for word, value, allocatable in (("unhealthy", 0.0, 2.0), ("healthy", 1.0, 3.0)):
            flip = run_devctl("plugin", "set-health", DRIVER, f"{pool}/gpu-1", word, root=sim_node.root)
            assert flip.exit_code == 0, flip.stderr
            ex.wait_for(f"gpu-1 {word}", lambda v=value: _dra_health(ex).get("gpu-1") == v)
            assert _by(ex.samples("devctl_resource_allocatable"), kind="dra", resource=DRIVER) == [allocatable]
            assert _by(ex.samples("devctl_resource_capacity"), kind="dra", resource=DRIVER) == [4.0]
        assert ex.samples("devctl_last_refresh_timestamp_seconds") == refreshed  # no refresh in between


def test_a_dra_driver_that_stops_and_comes_back_without_a_refresh(sim_node) -> None:
    """GIVEN an interval of an hour WHEN the DRA driver stops THEN its stream's break shows at once: plugin_up 0, no
    capacity, its held devices unknown (-1), no device it no longer vouches for; all back when the driver is."""
    with exporter(sim_node.root, "--interval", "3600") as ex:
        ex.wait_for("the DRA driver's devices", lambda: len(_dra_health(ex)) == 4)

        def dra_up() -> list[float]:
            return _by(ex.samples("devctl_plugin_up"), kind="dra", resource=DRIVER)

        async def stop(node) -> None:
            await node.dra_drivers[DRIVER].stop()

        sim_node.call(stop)
        ex.wait_for("the DRA driver down", lambda: dra_up() == [0.0])
        assert _by(ex.samples("devctl_resource_capacity"), kind="dra", resource=DRIVER) == []
        health = _dra_health(ex)
        assert set(health) == {"gpu-0", "gpu-2", "gpu-3"}  # the devices claims hold stay, unknown
        assert set(health.values()) == {-1.0}

        async def start(node) -> None:
            await node.dra_drivers[DRIVER].start()

        sim_node.call(start)
        ex.wait_for("the DRA driver back", lambda: dra_up() == [1.0] and len(_dra_health(ex)) == 4)
        assert _dra_health(ex) == {"gpu-0": 1.0, "gpu-1": 1.0, "gpu-2": 1.0, "gpu-3": 0.0}
        assert _by(ex.samples("devctl_resource_capacity"), kind="dra", resource=DRIVER) == [4.0]


def _pod_resources_server(node) -> Any:
    return node._kubelet.pod_resources


def test_pod_resources_rate_limited_is_source_down_and_no_zeros(sim_node) -> None:
    """GIVEN pod-resources refusing every call WHEN scraped THEN source_up 0 and no allocation series at all."""
    from devctl.lab.sim.ratelimit import TokenBucket

    async def refuse_all(node) -> None:
        _pod_resources_server(node).bucket = TokenBucket(rate=0, burst=0)

    sim_node.call(refuse_all)
    with exporter(sim_node.root, "--interval", "0.5") as ex:
        ex.wait_for("live streams", lambda: bool(_by(ex.samples("devctl_device_health"), device="GPU-0")))
        assert _by(ex.samples("devctl_source_up"), source="pod-resources") == [0.0]
        assert _by(ex.samples("devctl_source_up"), source="plugins") == [1.0]
        families = ex.families()
        for name in ("devctl_device_allocated", "devctl_resource_allocated"):
            assert name not in families or not families[name].samples, name
        codes = {ls["code"] for ls, _ in ex.samples("devctl_doctor_findings")}
        assert codes  # doctor says why
        # What holds a claim needs pod-resources: unknown, so no claim series; the driver's own counts stay.
        assert ex.samples("devctl_claim_state") == []
        assert _by(ex.samples("devctl_resource_capacity"), kind="dra", resource=DRIVER) == [4.0]


class CountingBucket:
    """The simulated kubelet's rate limiter, never refusing, counting every pod-resources call it sees."""

    def __init__(self) -> None:
        self.calls = 0

    def allow(self) -> bool:
        self.calls += 1
        return True


def test_scrapes_every_100ms_are_answered_from_the_cache(sim_node) -> None:
    """GIVEN an interval of 1 s WHEN scraped every 100 ms for 3 s THEN the node sees one read per interval, no more."""
    bucket = CountingBucket()

    async def count_calls(node) -> None:
        _pod_resources_server(node).bucket = bucket

    async def options_calls(node) -> int:
        return sum(r.rpc == "GetDevicePluginOptions" for r in node.plugins[GPU].rpc_log)

    with exporter(sim_node.root, "--interval", "1") as ex:
        sim_node.call(count_calls)
        before = sim_node.call(options_calls)
        start = time.monotonic()
        scrapes = 0
        while time.monotonic() - start < 3.0:
            assert ex.get("/metrics")[0] == 200
            scrapes += 1
            time.sleep(0.1)
        elapsed = time.monotonic() - start
        after = sim_node.call(options_calls)
    refreshes = elapsed / 1.0 + 1
    assert scrapes >= 20
    # Each refresh asks pod-resources twice (List, GetAllocatableResources) and each plugin once for its options.
    assert 0 < bucket.calls <= 2 * refreshes
    assert after - before <= refreshes


def test_label_values_are_escaped_per_the_exposition_format(sim_node) -> None:
    """GIVEN a device ID with a quote, a backslash, a newline and control characters THEN it round-trips exactly."""
    weird = 'GPU "x"\\y\nz\r\x1b[2J\x07'
    sim_node.add_device(GPU, Device(weird, numa_nodes=(0,)))
    with exporter(sim_node.root, "--interval", "1") as ex:
        ex.wait_for("the odd device", lambda: _by(ex.samples("devctl_device_health"), device=weird) == [1.0])
        _, text = ex.get("/metrics")
        line = next(x for x in text.splitlines() if x.startswith("devctl_device_health") and 'GPU \\"x' in x)
        assert 'device="GPU \\"x\\"\\\\y\\nz' in line  # quote, backslash and newline escaped; one line each


def test_gzip_for_a_scraper_that_asks(sim_node) -> None:
    """Prometheus sends Accept-Encoding: gzip; the page comes compressed, and reads as the plain one."""
    import gzip

    with exporter(sim_node.root, "--interval", "3600") as ex:
        ex.wait_for("live streams", lambda: bool(_by(ex.samples("devctl_device_health"), device="GPU-0")))
        request = urllib.request.Request(ex.url + "/metrics", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=5) as reply:
            assert reply.headers["Content-Encoding"] == "gzip"
            text = gzip.decompress(reply.read()).decode()
        assert text == ex.get("/metrics")[1]


def test_sigterm_ends_it_cleanly(sim_node) -> None:
    with exporter(sim_node.root, "--interval", "1") as ex:
        ex.proc.send_signal(signal.SIGTERM)
        assert ex.proc.wait(10) == 0
        assert "Traceback" not in (ex.proc.stderr.read() if ex.proc.stderr else "")


def _http_process(exporter_pid: int) -> int:
    """The exporter's HTTP child (``httpd.py``), found through /proc as ``ps`` would."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == exporter_pid and b"httpd.py" in command:
            return int(stat.parent.name)
    raise AssertionError("the exporter has no HTTP process")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_scrape_never_waits_on_the_exporters_interpreter(sim_node) -> None:
    """GIVEN a live exporter WHEN its main process is stopped (SIGSTOP: busier than any page build) THEN /metrics and
    /healthz still answer at once with the last page: a process of its own serves them, writing bytes only."""
    with exporter(sim_node.root, "--interval", "3600") as ex:
        ex.wait_for("GPU-0 healthy", lambda: _by(ex.samples("devctl_device_health"), device="GPU-0") == [1.0])
        os.kill(ex.proc.pid, signal.SIGSTOP)
        try:
            assert _by(ex.samples("devctl_device_health"), device="GPU-0") == [1.0]  # urlopen's 5 s deadline
            assert ex.get("/healthz") == (200, "ok\n")
        finally:
            os.kill(ex.proc.pid, signal.SIGCONT)


def test_the_http_process_never_outlives_the_exporter(sim_node) -> None:
    """GIVEN a live exporter WHEN it is killed outright (SIGKILL, no clean-up) THEN its HTTP process ends too, and
    nothing answers on the port: no stale page is served by an orphan. SIGTERM ends both with exit 0."""
    with exporter(sim_node.root, "--interval", "3600") as ex:
        child = _http_process(ex.proc.pid)
        ex.proc.kill()
        ex.proc.wait()
        deadline = time.monotonic() + WAIT
        while not _gone(child):
            assert time.monotonic() < deadline, "the HTTP process outlived the exporter"
            time.sleep(0.05)
        with pytest.raises(urllib.error.URLError):
            ex.get("/metrics")
    with exporter(sim_node.root, "--interval", "3600") as ex:
        child = _http_process(ex.proc.pid)
        ex.proc.send_signal(signal.SIGTERM)
        assert ex.proc.wait(10) == 0
        assert _gone(child)


def test_a_node_without_a_kubelet_still_serves_and_says_what_is_down(short_root: Path) -> None:
    with exporter(short_root, "--interval", "0.5") as ex:
        up = dict((ls["source"], v) for ls, v in ex.samples("devctl_source_up"))
        assert up["pod-resources"] == 0.0
        assert "devctl_device_allocated" not in ex.families() or not ex.samples("devctl_device_allocated")


def test_listen_addresses() -> None:
    assert parse_listen(":9477") == ("0.0.0.0", 9477)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:9477") == ("::1", 9477)
    for bad in ("9477", "host:", "host:x", ":99999"):
        with pytest.raises(ListenError):
            parse_listen(bad)


def test_bad_listen_is_a_usage_error(short_root: Path) -> None:
    p = subprocess.run(
        [*DEVCTL, "--root", str(short_root), "exporter", "--listen", "nonsense"],
        capture_output=True,
        text=True,
        timeout=30,
        env=devctl_env(),
    )
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "HOST:PORT" in p.stderr


def test_nothing_but_the_cli_imports_the_exporter() -> None:
    """The exporter is a face: only ``devctl.cli.exporter`` may import it, so the core never grows a web server."""
    package = Path(__file__).resolve().parent.parent / "devctl"
    importers = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "devctl.exporter" in path.read_text(encoding="utf-8") and path.parent.name != "exporter"
    }
    assert importers == {"cli/exporter.py"}
