"""``devctl fleet`` against hostile or broken Prometheus servers (issue 28 items 8 and 11).

Every server is real: a socket bound to 127.0.0.1 served by a thread of the
test. Each case asserts what a person sees: one ``devctl: ...`` line, the exit
code, the output that still appears, no password, and (for the trickling and
hung servers) that the command ends within a generous bound where the bug held
it for ever.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from helpers import invoke
from test_fleet import QuietServer

from devctl.fleet.prometheus import MAX_REPLY_BYTES

DEVCTL = [sys.executable, "-m", "devctl"]


def _vector(*samples: tuple[dict[str, str], str]) -> bytes:
    result = [{"metric": labels, "value": [1700000000.0, value]} for labels, value in samples]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


@contextlib.contextmanager
def serving(answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 whose every GET is ``answer(handler)``; its host:port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer(self)

        def log_message(self, *args: object) -> None:
            pass

    server = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def raw_server(serve: Callable[[socket.socket], None]) -> Iterator[tuple[str, threading.Event]]:
    """A bare TCP listener on 127.0.0.1: each connection goes to ``serve`` on a daemon thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_serve_one, args=(serve, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", stop
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()


def _serve_one(serve: Callable[[socket.socket], None], conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):
        serve(conn)


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("devctl: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_trickling_server_is_held_to_one_deadline_for_the_whole_command() -> None:
    """One byte every 0.2 s, for ever: each read succeeds, so a per-read timeout never fires."""

    def trickle(conn: socket.socket) -> None:
        conn.recv(65536)
        payload = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 10_000
        for byte in payload:
            conn.sendall(bytes([byte]))
            time.sleep(0.2)

    with raw_server(trickle) as (address, _):
        started = time.monotonic()
        result = invoke("--timeout", "2", "fleet", "--prometheus", address, "ls")
        took = time.monotonic() - started
    assert result.exit_code == 3
    assert "no answer within 2s" in _one_line(result.stderr)
    assert took < 15  # the bug: over 60 s


def test_a_trickling_body_is_held_to_the_deadline_too() -> None:
    def trickle(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while True:
            conn.sendall(b" ")
            time.sleep(0.2)

    with raw_server(trickle) as (address, _):
        started = time.monotonic()
        result = invoke("--timeout", "2", "fleet", "--prometheus", address, "devices")
        took = time.monotonic() - started
    assert result.exit_code == 3
    assert "no answer within 2s" in _one_line(result.stderr)
    assert took < 15


def test_ctrl_c_ends_fleet_at_once_with_130_while_prometheus_hangs() -> None:
    """A real process, a real SIGINT; the server holds every query 30 s (the --timeout)."""
    arrived = threading.Event()

    def hang(conn: socket.socket) -> None:
        conn.recv(65536)
        arrived.set()
        time.sleep(40)

    with raw_server(hang) as (address, _):
        proc = subprocess.Popen(
            [*DEVCTL, "--timeout", "30", "fleet", "--prometheus", address, "ls"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert arrived.wait(20), "devctl never asked"
            time.sleep(0.3)  # the queries are out and waiting
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert out == ""
    assert took < 5  # the bug: it waited for the hung queries (28.7 s)


@pytest.mark.parametrize(
    ("value", "shown"),
    [("NaN", "?"), ("+Inf", "?"), ("-Inf", "?")],
)
def test_a_nan_or_infinite_sample_is_unknown_for_that_node_only(value: str, shown: str) -> None:
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        good = {"node": "node-a", "kind": "device-plugin", "resource": "example.com/gpu"}
        bad = {"node": "node-b", "kind": "device-plugin", "resource": "example.com/gpu"}
        if "devctl_resource_capacity" in h.path:
            body = _vector((good, "4"), (bad, value))
        elif "devctl_resource_allocatable" in h.path:
            body = _vector((good, "4"), (bad, "3"))
        elif "devctl_resource_allocated" in h.path:
            body = _vector((good, "1"), (bad, "1"))
        elif "devctl_resource_free" in h.path:  # each node's own FREE (analyze.free_count)
            body = _vector((good, "3"), (bad, "2"))
        elif "devctl_doctor_findings" in h.path:
            body = _vector(({"node": "node-b", "severity": "warning", "code": "x"}, value))
        else:
            body = _vector(({"node": "node-a"}, "1"), ({"node": "node-b"}, "1"))
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with serving(answer) as address:
        table = invoke("fleet", "--prometheus", address, "ls")
        doc = invoke("fleet", "--prometheus", address, "ls", "-o", "json")
        doctor = invoke("fleet", "--prometheus", address, "doctor")
    assert table.exit_code == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()[1:]]
    assert rows == [
        ["node-a", "example.com/gpu", "4", "4", "1", "3", "0"],
        ["node-b", "example.com/gpu", shown, "3", "1", "2", shown],
    ]
    by_node = {r["node"]: r for r in doc.json["resources"]}
    assert by_node["node-b"]["capacity"] is None and by_node["node-b"]["unhealthy"] is None
    assert by_node["node-a"]["capacity"] == 4
    assert doctor.exit_code == 0, doctor.stderr
    assert doctor.stdout.splitlines()[1].split() == ["node-b", "warning", "x", "?"]


def test_a_redirect_is_not_followed_to_another_origin() -> None:
    asked_elsewhere = threading.Event()

    def elsewhere(h: http.server.BaseHTTPRequestHandler) -> None:
        asked_elsewhere.set()
        body = _vector()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with serving(elsewhere) as other:

        def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(302)
            h.send_header("Location", f"http://admin:hunter2@{other}{h.path}")
            h.send_header("Content-Length", "0")
            h.end_headers()

        with serving(redirect) as address:
            result = invoke("fleet", "--prometheus", address, "ls")
    assert result.exit_code == 3
    line = _one_line(result.stderr)
    assert "HTTP 302, redirected to http://***@" in line and "follows no redirects" in line
    assert "hunter2" not in line
    assert not asked_elsewhere.is_set()


def test_a_server_that_does_not_speak_http_is_one_line() -> None:
    def noise(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(os.urandom(4096).replace(b"\n", b"\0") + b"\r\n\r\n")

    with raw_server(noise) as (address, _):
        result = invoke("fleet", "--prometheus", address, "ls")
    assert result.exit_code == 3
    assert "does not answer HTTP" in _one_line(result.stderr)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 200_000 + b"]" * 200_000,  # nesting deeper than the decoder's recursion
        b'{"status": "success", "data": {"resultType": "vector", "result": [[[[{"metric": {}}]]]]}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": '
        b'[{"metric": {"node": {"a": [1, {"b": 2}]}}, "value": [1, "1"]}]}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": [], "value": {"1": 2}}]}}',
        b'{"status": "error", "error": {"nested": ["\\u001b[31mred"]}}',
    ],
)
def test_nested_or_odd_json_is_one_line(body: bytes) -> None:
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with serving(answer) as address:
        for command in (["ls"], ["devices"], ["doctor"]):
            result = invoke("fleet", "--prometheus", address, *command)
            assert result.exit_code == 3, (command, result.stderr)
            assert "\x1b" not in _one_line(result.stderr)


def test_a_reply_over_the_bound_is_refused_not_read() -> None:
    size = 50 * 1024 * 1024
    assert size > MAX_REPLY_BYTES
    sent: list[int] = []

    def huge(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()  # no Content-Length: the bound is met while reading
        chunk = b" " * (1024 * 1024)
        with contextlib.suppress(OSError):
            for _ in range(size // len(chunk)):
                h.wfile.write(chunk)
                sent.append(len(chunk))
        h.close_connection = True

    with serving(huge) as address:
        result = invoke("--timeout", "20", "fleet", "--prometheus", address, "doctor")  # one query
    assert result.exit_code == 3
    assert f"larger than {MAX_REPLY_BYTES // 2**20} MiB" in _one_line(result.stderr)
    assert sum(sent) < size  # devctl hung up instead of reading it all


def test_a_declared_length_over_the_bound_is_refused_before_reading() -> None:
    def declared(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {MAX_REPLY_BYTES + 1}\r\n\r\n".encode())
        time.sleep(30)  # never sends it: only the header can have refused it

    with raw_server(declared) as (address, _):
        started = time.monotonic()
        result = invoke("--timeout", "20", "fleet", "--prometheus", address, "doctor")
    assert result.exit_code == 3
    assert "larger than" in _one_line(result.stderr)
    assert time.monotonic() - started < 15


def test_a_password_in_the_url_is_sent_but_never_printed() -> None:
    seen: list[str | None] = []

    def refuse(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.headers.get("Authorization"))
        body = b'{"status": "error", "errorType": "auth", "error": "bad credentials"}'
        h.send_response(401)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    with serving(refuse) as address:
        result = invoke("fleet", "--prometheus", f"http://admin:hunter2@{address}/", "ls")
        unreachable = invoke("fleet", "--prometheus", "http://admin:hunter2@127.0.0.1:1", "ls")
    assert result.exit_code == 3
    line = _one_line(result.stderr)
    assert line == f"devctl: http://***@{address}: HTTP 401: bad credentials"
    assert seen and seen[0] == "Basic YWRtaW46aHVudGVyMg=="  # admin:hunter2
    assert unreachable.exit_code == 3
    assert "hunter2" not in unreachable.stderr and "admin" not in unreachable.stderr
    assert "cannot reach Prometheus" in _one_line(unreachable.stderr)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("file:///etc/passwd", "only http:// and https://"),
        ("ftp://127.0.0.1/", "only http:// and https://"),
        ("http://127.0.0.1:99999999", "not a URL"),
        ("http://", "not a URL"),
        ("http://admin:hunter2@127.0.0.1:port/", "not a URL"),
        ("http://127.0.0.1:9090/?query=up", "without ?query"),
        ("http://127.0.0.1:9090/\x1b[31m", "not a URL"),
    ],
)
def test_a_bad_url_is_a_usage_error_in_one_line(url: str, says: str) -> None:
    result = invoke("fleet", "--prometheus", url, "ls")
    assert result.exit_code == 2
    line = _one_line(result.stderr)
    assert says in line
    assert "hunter2" not in line and "\x1b" not in line


def test_a_reply_of_too_many_small_samples_is_refused_before_decoding() -> None:
    # Under the byte bound, 200,000 tiny samples would decode to twenty times their size: counted first.
    sample = b'{"metric":{},"value":[0,"1"]},'
    body = b'{"status":"success","data":{"resultType":"vector","result":[' + sample * 200_000
    body = body[:-1] + b"]}}"
    assert len(body) < MAX_REPLY_BYTES

    def many(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(body)

    with serving(many) as address:
        result = invoke("--timeout", "20", "fleet", "--prometheus", address, "doctor")
    assert result.exit_code == 3
    assert "more than 150,000 samples" in _one_line(result.stderr)
