"""``devctl fleet`` against a real Prometheus scraping three exporters on three simulated nodes.

Prometheus is Debian's ``prometheus`` binary (``make test`` installs it where
apt-get can), run on loopback with its own config and storage in tmp_path and
a 1 s scrape interval. Where the binary is absent the integration test skips,
saying so; the failure cases (unreachable, garbage) need no Prometheus.
"""

from __future__ import annotations

import contextlib
import http.server
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import invoke
from test_exporter import exporter

from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import running_sim

PROMETHEUS = shutil.which("prometheus")
WAIT = 20.0

# Three nodes, each with numbers of its own: GPUs with one unhealthy, GPUs all healthy, FPGAs nobody holds.
NODES = {
    "node-a": """
resources:
  - name: example.com/gpu
    socket: gpu.sock
    devices: [{id: gpu-0}, {id: gpu-1}, {id: gpu-2}, {id: gpu-3}]
pods:
  - {namespace: ml, name: a-0, containers: [{name: main, requests: {example.com/gpu: 2}}]}
""",
    "node-b": """
resources:
  - name: example.com/gpu
    socket: gpu.sock
    devices: [{id: gpu-0}, {id: gpu-1}, {id: gpu-2}, {id: gpu-3}, {id: gpu-4}, {id: gpu-5, health: Unhealthy}]
pods:
  - {namespace: ml, name: b-0, containers: [{name: main, requests: {example.com/gpu: 3}}]}
""",
    "node-c": """
resources:
  - name: example.com/fpga
    socket: fpga.sock
    devices: [{id: fpga-0}, {id: fpga-1}]
""",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as reply:
            return reply.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def prometheus(
    tmp_path: Path, targets: dict[str, str], more_jobs: dict[str, dict[str, str]] | None = None
) -> Iterator[str]:
    """A real Prometheus on loopback scraping ``targets`` (node name -> host:port) every second; its base URL.

    ``targets`` are the job ``devctl-exporter`` (deploy/prometheus-scrape.yaml's, which ``devctl fleet``
    asks by default); ``more_jobs`` are other jobs (job name -> node name -> host:port).
    """
    assert PROMETHEUS is not None
    jobs = {"devctl-exporter": targets, **(more_jobs or {})}
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [t], "labels": {"node": n}} for n, t in nodes.items()],
            }
            for job, nodes in jobs.items()
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait("Prometheus ready", lambda: proc.poll() is None and _ready(url))
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _fleet(url: str, *args: str) -> Any:
    """``devctl fleet --prometheus URL ARGS -o json``'s document; ``--job`` (a fleet option) may lead ``args``."""
    job = list(args[:2]) if args[:1] == ("--job",) else []
    result = invoke("fleet", "--prometheus", url, *job, *args[len(job) :], "-o", "json")
    assert result.exit_code in (0, 1), result.stderr
    return result.json


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed (apt-get install prometheus)")
def test_fleet_of_three_simulated_nodes_through_a_real_prometheus(tmp_path: Path) -> None:
    roots = {name: Path(tempfile.mkdtemp(prefix="dc", dir="/tmp")) for name in NODES}
    try:
        with contextlib.ExitStack() as stack:
            sims = {
                name: stack.enter_context(running_sim(roots[name], parse_scenario(yaml.safe_load(text))))
                for name, text in NODES.items()
            }
            exporters = {name: stack.enter_context(exporter(roots[name], "--interval", "1")) for name in NODES}
            targets = {name: ex.url.removeprefix("http://") for name, ex in exporters.items()}
            # node-c is scraped as the Prometheus Operator's PodMonitor names its job (namespace/name), and
            # a foreign job sends a devctl family of its own: devctl fleet's default --job asks only the first two.
            foreign = stack.enter_context(_foreign_exporter())
            operator = {"node-c": targets.pop("node-c")}
            url = stack.enter_context(
                prometheus(tmp_path, targets, {"monitoring/devctl-exporter": operator, "not-devctl": foreign})
            )

            expected = {
                ("node-a", "example.com/gpu"): (4, 4, 2, 2, 0),
                ("node-b", "example.com/gpu"): (6, 5, 3, 2, 1),
                ("node-c", "example.com/fpga"): (2, 2, 0, 2, 0),
            }

            def numbers(*job: str) -> dict[tuple[str, str], tuple[int | None, ...]]:
                rows = _fleet(url, *job, "ls")["resources"]
                return {
                    (r["node"], r["resource"]): tuple(
                        r[k] for k in ("capacity", "allocatable", "allocated", "free", "unhealthy")
                    )
                    for r in rows
                }

            _wait("fleet ls shows the three nodes' numbers", lambda: numbers() == expected)
            # The foreign job is scraped (asked for by name, its series are there) but was never in the fleet.
            _wait("the foreign job's series", lambda: numbers("--job", "not-devctl") == FOREIGN)
            assert numbers() == expected
            table = invoke("fleet", "--prometheus", url, "ls")
            assert table.exit_code == 0
            assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == ["node-a", "node-b", "node-c"]
            assert _fleet(url, "devices", "--unhealthy-held")["devices"] == []

            # A device a container holds on node-a goes bad: after the next scrape it is an unhealthy held device.
            held = next(d.ids[0] for p in sims["node-a"].pods() for c in p.containers for d in c.devices)
            sims["node-a"].set_health("example.com/gpu", held, "Unhealthy")
            rows = _wait(
                "the flip in fleet devices --unhealthy-held",
                lambda: _fleet(url, "devices", "--unhealthy-held")["devices"],
            )
            assert [(r["node"], r["id"], r["state"]) for r in rows] == [("node-a", held, "unhealthy-allocated")]
            assert rows[0]["allocated_to"] == [{"namespace": "ml", "pod": "a-0", "container": "main"}]
            all_devices = _fleet(url, "devices")["devices"]
            assert len(all_devices) == 12
            assert {(r["node"], r["id"]) for r in all_devices if r["health"] == "Unhealthy"} == {
                ("node-a", held),
                ("node-b", "gpu-5"),
            }
            findings = _fleet(url, "doctor")["findings"]
            assert {f["node"] for f in findings} <= set(NODES)
            assert all(f["count"] > 0 for f in findings)
    finally:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)


# What the foreign job says of node-x: a capacity under a devctl family name, and nothing else.
FOREIGN = {("node-x", "example.com/gpu"): (99, None, None, None, None)}


class _ForeignMetrics(http.server.BaseHTTPRequestHandler):
    body = b'devctl_resource_capacity{kind="device-plugin",resource="example.com/gpu"} 99\n'

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _foreign_exporter() -> Iterator[dict[str, str]]:
    """Something else's /metrics with a ``devctl_resource_capacity`` series: node name -> host:port."""
    server = QuietServer(("127.0.0.1", 0), _ForeignMetrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"node-x": f"127.0.0.1:{server.server_address[1]}"}
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("job", ["(", "a)", "[z-a]"])
def test_a_job_that_is_no_regex_is_a_usage_error_before_any_query(job: str) -> None:
    # Nothing listens on the port: a query asked would be exit 3, the usage error comes first.
    result = invoke("fleet", "--prometheus", f"http://127.0.0.1:{_free_port()}", "--job", job, "ls")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--job" in result.stderr and "not a regular expression" in result.stderr


def test_prometheus_unreachable_is_one_line_and_exit_3() -> None:
    result = invoke("fleet", "--prometheus", f"http://127.0.0.1:{_free_port()}", "ls")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cannot reach Prometheus" in result.stderr


class QuietServer(http.server.ThreadingHTTPServer):
    """A test server whose own errors (a client that hung up: devctl drops a view's other queries at its
    first failure) are not printed into the stderr the in-process command's output is captured from."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class _Garbage(http.server.BaseHTTPRequestHandler):
    body = b"<html>not prometheus</html>"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not prometheus</html>",
        b'{"status": "success", "data": {"resultType": "matrix", "result": []}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": "x"}]}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": '
        b'[{"metric": {"node": 5}, "value": [1, "1"]}]}}',
        b"\xff\xfe",
    ],
)
def test_prometheus_answering_garbage_is_one_line_and_exit_3(body: bytes) -> None:
    handler = type("Handler", (_Garbage,), {"body": body})
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for command in (["ls"], ["devices", "--unhealthy-held"], ["doctor"]):
            result = invoke("fleet", "--prometheus", f"127.0.0.1:{server.server_address[1]}", *command)
            assert result.exit_code == 3, command
            assert result.stderr.count("\n") == 1 and "not Prometheus' query API" in result.stderr
    finally:
        server.shutdown()
        server.server_close()


def test_a_prometheus_that_never_answers_meets_the_deadline() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        started = time.monotonic()
        result = invoke("--timeout", "0.5", "fleet", "--prometheus", f"127.0.0.1:{listener.getsockname()[1]}", "ls")
    assert result.exit_code == 3
    assert "no answer within 0.5s" in result.stderr
    assert time.monotonic() - started < 5


def test_fleet_without_a_prometheus_url_is_a_usage_error() -> None:
    result = invoke("fleet", "ls")
    assert result.exit_code == 2
    assert "--prometheus" in result.stderr
