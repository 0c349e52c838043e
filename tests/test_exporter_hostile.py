"""The exporter's HTTP process (``httpd``) under hostile clients: real TCP clients on 127.0.0.1, the real process.

Each test starts the HTTP process as the exporter does (``HttpProcess``: a
socket bound here, the page sent down a pipe), with its clocks shortened where
the test waits on one, and plays one client nobody should be able to hurt it
with: one that pipelines requests without reading, one that opens more
connections than the limit, one that sends a head a byte at a time, and a
process out of file descriptors. What is checked is what an admin would
check: the process' resident memory and open descriptors (``/proc``), its CPU
time, whether the client's connection was closed, and that ``/healthz``
answers a fresh client.
"""

from __future__ import annotations

import gzip
import os
import resource
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import run_devctl

pytest.importorskip("prometheus_client")
from devctl.exporter.server import HttpProcess

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


class Httpd:
    """A running HTTP process: its pid and port, and the pipe that sends it pages."""

    def __init__(self, process: HttpProcess):
        self.process = process
        self.pid = process.proc.pid
        self.port = int(process.address[1])

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def publish(self, text: bytes) -> None:
        self.process.publish(True, text, gzip.compress(text, 1))


@contextmanager
def httpd(**limits: float) -> Iterator[Httpd]:
    """The HTTP process on 127.0.0.1 (a free port), with these ``Limits``, serving a small ready page."""
    process = HttpProcess(("127.0.0.1", 0), [f"{name}={value}" for name, value in limits.items()])
    try:
        running = Httpd(process)
        running.publish(b"# a page\n")
        with running.connect() as sock:
            assert exchange(sock, HEALTHZ)[0] == 200
        yield running
    finally:
        process.close()


def exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send one request and read its whole reply (status, body) on a keep-alive connection."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        body += chunk
    return int(lines[0].split()[1]), body


def healthz(port: int) -> tuple[int, bytes]:
    """GET /healthz from a fresh client, as the kubelet's probe does (5 s deadline)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        return exchange(sock, HEALTHZ)


def rss(pid: int, field: str = "VmRSS") -> int:
    """Resident memory in bytes, as ``ps`` shows it (``VmHWM``: its peak so far)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def lowest_free_fd(pid: int) -> int:
    """The number the process' next descriptor gets, once the connections its clients closed are closed on its side
    too (the descriptors in use are then 0..N-1 with no gap)."""
    deadline = time.monotonic() + 10.0
    while True:
        fds = sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
        if fds == list(range(len(fds))) or time.monotonic() > deadline:
            return next(n for n in range(len(fds) + 1) if n not in fds)
        time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gone(sock: socket.socket) -> bool:
    """True once the server has closed this connection (end of stream or reset), reading what it still sent."""
    try:
        while True:
            if not select.select([sock], [], [], 0)[0]:
                return False
            if not sock.recv(1 << 20):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True


def closed_within(socks: list[socket.socket], count: int, seconds: float) -> int:
    """How many of ``socks`` the server closed, waiting up to ``seconds`` for ``count`` of them."""
    deadline = time.monotonic() + seconds
    while True:
        closed = sum(gone(s) for s in socks)
        if closed >= count or time.monotonic() > deadline:
            return closed
        time.sleep(0.05)


def test_a_client_that_pipelines_without_reading_is_held_back_and_closed() -> None:
    """GIVEN a 1 MiB page WHEN one client sends GET /metrics over and over and never reads a reply THEN TCP holds it
    back (it cannot send 64 MiB), the HTTP process' memory does not follow its input, and the connection is closed
    once its reply stops moving; /healthz still answers."""
    with httpd(send_timeout=1.0) as h:
        h.publish(b"# a page\n" + b"devctl_x 1\n" * ((1 << 20) // 11))
        before = rss(h.pid)
        requests = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 2000
        sent = 0
        closed = False
        with h.connect(timeout=2.0) as sock:
            try:
                while sent < 64 << 20:
                    sock.sendall(requests)
                    sent += len(requests)
            except TimeoutError:
                pass
            except (ConnectionResetError, BrokenPipeError):
                closed = True
            assert sent < 64 << 20, "the server read everything the client sent"
            assert closed or closed_within([sock], 1, 20.0) == 1, "the connection was not closed"
        peak = rss(h.pid, "VmHWM") - before
        assert peak < 16 << 20, f"the HTTP process grew by {peak >> 20} MiB at its peak"
        assert healthz(h.port) == (200, b"ok\n")


def test_connections_beyond_the_limit_close_the_least_active_and_healthz_still_answers() -> None:
    """GIVEN max_connections=8 WHEN 30 clients connect and each sends half a head THEN the process holds at most 8
    connections (its open descriptors say so), the least recently active are closed (22 at least), and /healthz
    from a fresh client answers at once."""
    with httpd(max_connections=8) as h:
        base = open_fds(h.pid)
        clients = [h.connect() for _ in range(30)]
        try:
            for sock in clients:
                sock.sendall(b"GET /metrics HTTP/1.1\r\n")
            assert healthz(h.port) == (200, b"ok\n")
            assert open_fds(h.pid) <= base + 8
            assert closed_within(clients, 22, 10.0) >= 22
        finally:
            for sock in clients:
                sock.close()


def test_a_head_sent_a_byte_at_a_time_is_closed_at_the_head_deadline_and_idle_keepalive_is_not() -> None:
    """GIVEN head_timeout=0.5 WHEN a client sends its head one byte every 0.2 s THEN the connection is closed (within
    a generous 15 s; before, it stayed open for ever); a keep-alive client idle for longer than the head deadline
    between two requests is still answered on the same connection."""
    with httpd(head_timeout=0.5) as h:
        head = b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 1000
        closed = False
        deadline = time.monotonic() + 15.0
        with h.connect() as sock:
            for byte in head:
                try:
                    sock.send(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                select.select([sock], [], [], 0.2)
                if closed or gone(sock) or time.monotonic() > deadline:
                    closed = closed or gone(sock)
                    break
        assert closed, "a head fed a byte at a time stayed open"
        with h.connect() as sock:
            assert exchange(sock, HEALTHZ) == (200, b"ok\n")
            time.sleep(1.0)  # twice the head deadline, idle between requests
            assert exchange(sock, HEALTHZ) == (200, b"ok\n")


def test_out_of_file_descriptors_it_pauses_instead_of_spinning_and_resumes() -> None:
    """GIVEN the HTTP process' descriptor limit lowered to what it has open (prlimit, as an exhausted node would)
    WHEN a client connects THEN accept fails with EMFILE, and the process waits instead of retrying at once (under
    0.5 s of CPU in 2 s; it spun before); once the limit is back, that client is answered. With one connection of
    its own open, a fresh client's /healthz is answered even while descriptors are out (the least active goes)."""
    with httpd() as h:
        soft, hard = resource.prlimit(h.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(h.pid, resource.RLIMIT_NOFILE, (1, hard))  # no new descriptor at all
        try:
            with h.connect() as waiting:
                waiting.sendall(HEALTHZ)
                time.sleep(0.2)  # the first EMFILE
                used = cpu_seconds(h.pid)
                time.sleep(2.0)
                used = cpu_seconds(h.pid) - used
                assert used < 0.5, f"{used:.2f} s of CPU in 2 s while out of descriptors"
                resource.prlimit(h.pid, resource.RLIMIT_NOFILE, (soft, hard))
                waiting.settimeout(10.0)
                assert exchange(waiting, b"")[0] == 200
            with h.connect() as older:
                assert exchange(older, HEALTHZ)[0] == 200
                # Every descriptor below the limit in use: the next accept fails until one of them is freed.
                resource.prlimit(h.pid, resource.RLIMIT_NOFILE, (lowest_free_fd(h.pid), hard))
                assert healthz(h.port) == (200, b"ok\n")
        finally:
            resource.prlimit(h.pid, resource.RLIMIT_NOFILE, (soft, hard))


def test_the_default_listen_address_is_loopback() -> None:
    """A bare ``devctl exporter`` serves this host only; every address is the admin's choice (``--listen :9477``)."""
    result = run_devctl("exporter", "--help")
    assert result.exit_code == 0
    assert "default: 127.0.0.1:9477" in " ".join(result.stdout.split())


def test_the_network_policy_lets_only_the_scrapers_reach_the_exporter_port() -> None:
    """deploy/networkpolicy.yaml is a valid NetworkPolicy (checked offline against the kubernetes client's model)
    selecting the DaemonSet's pods in its namespace, allowing ingress to the metrics port from selected pods only."""
    pytest.importorskip("kubernetes")
    from test_deploy import _daemonset, _documents, _unknown_fields

    (policy,) = _documents("networkpolicy.yaml")
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["kind"] == "NetworkPolicy"
    assert _unknown_fields(policy, "V1NetworkPolicy", "networkpolicy") == []
    ds = _daemonset()
    assert policy["metadata"]["namespace"] == ds.metadata.namespace
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"].items() <= ds.spec.template.metadata.labels.items()
    assert spec["policyTypes"] == ["Ingress"]
    (container,) = ds.spec.template.spec.containers
    (port,) = container.ports
    for rule in spec["ingress"]:
        assert rule["from"], "a rule without sources lets everyone in"
        assert all("ipBlock" not in peer for peer in rule["from"])
        assert {p["port"] for p in rule["ports"]} <= {port.container_port, port.name}
