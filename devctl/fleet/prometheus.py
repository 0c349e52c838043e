"""Instant PromQL queries over Prometheus' HTTP API (``/api/v1/query``), under one deadline for all of them.

The standard library's ``http.client`` is enough for one GET per query, and
keeps ``devctl fleet`` free of any HTTP dependency. It is used directly rather
than through urllib so that nothing but ``http://`` and ``https://`` is ever
opened (no ``file://``, no FTP), no redirect is followed (a reply of 3xx is a
failure naming where it pointed) and devctl holds each query's socket.

A view's queries go out at once (``query_all``, a daemon thread each), and the
caller waits for them under one monotonic deadline, ``timeout`` from the start:
a server that trickles its reply a byte at a time cannot stretch it, because
the wait ends at the deadline whatever the sockets do, and each socket read has
only what is left of it. At the deadline or on Ctrl-C the unfinished queries'
sockets are shut down and their threads abandoned (daemons: nothing waits for
them at exit). A reply over ``MAX_REPLY_BYTES`` is refused, not read.

Every way a query can fail — a URL that is not http(s), nothing listening, the
deadline, an HTTP error, a redirect, a server that does not speak HTTP, a reply
that is not Prometheus' JSON or is too big, a query Prometheus refuses — is one
``PrometheusError`` with a one-line message, so the command can print it and
exit 3 (``BadURL``: exit 2). A password in the URL is sent (HTTP basic
authentication) but never printed: every message names the server as
``Prometheus.shown``, with ``***@`` for its credentials.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import logging
import queue
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from devctl.base.errors import DevctlError

log = logging.getLogger(__name__)

# Prometheus answers an instant query in milliseconds with a few MiB; decoding a reply
# costs about 20 times its size in memory, so one this big is refused before it is read.
MAX_REPLY_BYTES = 32 * 1024 * 1024
# The most samples one reply may hold: about 2,000 nodes of 64 devices. Counted before decoding (every '{' and
# '[' of the body, an upper bound on the JSON containers decoding would make), since a reply of tiny samples
# under the byte bound decodes to twenty times its size.
MAX_SAMPLES = 150_000
MAX_CONTAINERS = 4 * MAX_SAMPLES
CHUNK = 256 * 1024
# How much of a message from the server (an HTTP error's detail, a redirect's target) a line shows.
DETAIL_CHARS = 200


class PrometheusError(DevctlError):
    """A query that got no usable answer; the message is one line naming the server."""


class BadURL(PrometheusError):
    """``--prometheus`` is not a URL devctl can ask: a usage error."""


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector: its labels and its value (NaN and ±Inf as Prometheus sent them)."""

    labels: dict[str, str]
    value: float


def _short(text: object) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"


def redact(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: the only form of a URL devctl prints."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int | None
    path: str
    authorization: str | None
    shown: str


def _target(url: str) -> _Target:
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    shown = redact(url).rstrip("/")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as e:
        raise BadURL(f"{shown}: not a URL ({_short(redact(str(e)))})") from None
    if parts.scheme not in ("http", "https"):
        raise BadURL(f"{shown}: only http:// and https:// URLs are asked")
    if not host or any(c in url for c in "\r\n\t ") or not url.isprintable():
        raise BadURL(f"{shown}: not a URL (no host, or spaces or control characters in it)")
    if parts.query or parts.fragment:
        raise BadURL(f"{shown}: give Prometheus' base URL, without ?query or #fragment")
    authorization = None
    if parts.username is not None or parts.password is not None:
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return _Target(parts.scheme, host, port, parts.path.rstrip("/"), authorization, shown)


class _Call:
    """One query in flight: its connection, so that the waiter can shut its socket at the deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.abandoned = False

    def attach(self, sock: socket.socket) -> None:
        with self.lock:
            self.sock = sock
            abandoned = self.abandoned
        if abandoned:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True
            sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the worker's read ends now, whatever the server does


class Prometheus:
    """A Prometheus server (or anything serving its query API: Thanos, Mimir, VictoriaMetrics).

    Raises ``BadURL`` for a URL it will not ask. ``timeout`` is the deadline of
    each ``query_all`` (all its queries together), in seconds.
    """

    def __init__(self, url: str, timeout: float = 5.0):
        self._target = _target(url)
        self.url = self._target.shown
        self.timeout = timeout

    def query_all(self, queries: Sequence[str]) -> list[list[Sample]]:
        """Each query's instant vector, asked concurrently under one deadline; the first failure raises."""
        deadline = time.monotonic() + self.timeout
        done: queue.SimpleQueue[tuple[int, list[Sample] | PrometheusError]] = queue.SimpleQueue()
        calls = [_Call() for _ in queries]

        def run(i: int, promql: str) -> None:
            try:
                outcome: list[Sample] | PrometheusError = self._query(promql, deadline, calls[i])
            except PrometheusError as e:
                outcome = e
            except Exception as e:  # any other failure of a thread is still one line, not a hang
                outcome = PrometheusError(f"{self.url}: {_short(type(e).__name__)}: {_short(redact(str(e)))}")
            done.put((i, outcome))

        for i, promql in enumerate(queries):
            threading.Thread(target=run, args=(i, promql), name="devctl-promql", daemon=True).start()
        results: list[list[Sample]] = [[] for _ in queries]
        try:
            for _ in queries:
                try:
                    i, outcome = done.get(timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
                if isinstance(outcome, PrometheusError):
                    if calls[i].abandoned or time.monotonic() >= deadline:
                        raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
                    raise outcome
                results[i] = outcome
        finally:
            for call in calls:  # on any way out (a failure, the deadline, Ctrl-C) nothing is left reading
                call.abandon()
        return results

    def query(self, promql: str) -> list[Sample]:
        """The instant vector ``promql`` evaluates to now; raises PrometheusError."""
        return self.query_all([promql])[0]

    def _query(self, promql: str, deadline: float, call: _Call) -> list[Sample]:
        target = self._target

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s")
            return remaining

        conn: http.client.HTTPConnection
        if target.scheme == "https":
            conn = http.client.HTTPSConnection(
                target.host, target.port, timeout=left(), context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(target.host, target.port, timeout=left())
        params = urllib.parse.urlencode({"query": promql, "timeout": f"{max(int(left() * 1000), 1)}ms"})
        headers = {"Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": "devctl"}
        if target.authorization:
            headers["Authorization"] = target.authorization
        started = time.perf_counter()
        reply: http.client.HTTPResponse | None = None
        try:
            conn.connect()
            sock = conn.sock
            assert sock is not None
            call.attach(sock)
            conn.request("GET", f"{target.path}/api/v1/query?{params}", headers=headers)
            reply = conn.getresponse()
            if 300 <= reply.status < 400:
                where = reply.getheader("Location") or "nowhere"
                raise PrometheusError(
                    f"{self.url}: HTTP {reply.status}, redirected to {_short(redact(where))}: "
                    "devctl follows no redirects (give --prometheus the final URL)"
                )
            if reply.status != 200:
                sock.settimeout(left())
                raise PrometheusError(self._http_error(reply))
            body = self._read(reply, sock, left)
        except PrometheusError:
            raise
        except TimeoutError:
            raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
        except ssl.SSLError as e:
            raise PrometheusError(f"{self.url}: TLS failed: {_short(e.reason or e)}") from None
        except http.client.RemoteDisconnected:
            raise PrometheusError(f"{self.url}: the server closed the connection without answering") from None
        except http.client.HTTPException:
            raise PrometheusError(f"{self.url}: the server does not answer HTTP (is this a Prometheus URL?)") from None
        except OSError as e:  # refused, reset, no route, a name that does not resolve
            if call.abandoned:
                raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
            raise PrometheusError(f"{self.url}: cannot reach Prometheus: {_short(e.strerror or e)}") from None
        finally:
            # Hang up now: a reply refused half-read keeps the socket open through its own file object until it
            # is collected, and the server would go on sending into it meanwhile.
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
            if reply is not None:
                reply.close()  # its file object's reference to the socket, so that the close below is real
            conn.close()
            log.debug("query %s %r in %.1f ms", self.url, promql, (time.perf_counter() - started) * 1000)
        return self._vector(body)

    def _read(self, reply: http.client.HTTPResponse, sock: socket.socket, left: Callable[[], float]) -> bytearray:
        """The body, a read at a time, each with what is left of the deadline; refused over MAX_REPLY_BYTES."""
        too_big = PrometheusError(
            f"{self.url}: the reply is larger than {MAX_REPLY_BYTES // 2**20} MiB, the most devctl reads"
        )
        length = reply.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > MAX_REPLY_BYTES:
            raise too_big
        body = bytearray()
        while True:
            sock.settimeout(left())
            chunk = reply.read1(CHUNK)
            if not chunk:
                return body
            body += chunk
            if len(body) > MAX_REPLY_BYTES:
                raise too_big

    def _http_error(self, reply: http.client.HTTPResponse) -> str:
        detail: object = None
        try:
            doc = json.loads(reply.read(65536))
            detail = doc.get("error") if isinstance(doc, dict) else None
        except (ValueError, RecursionError, OSError, http.client.HTTPException):
            detail = None
        reason = _short(reply.reason)
        return f"{self.url}: HTTP {reply.status}" + (
            f": {_short(detail)}" if isinstance(detail, str) else (f" {reason}" if reason else "")
        )

    def _vector(self, body: bytearray) -> list[Sample]:
        garbage = PrometheusError(f"{self.url}: the reply is not Prometheus' query API (is this a Prometheus URL?)")
        if body.count(b"{") + body.count(b"[") > MAX_CONTAINERS:
            del body[:]
            raise PrometheusError(
                f"{self.url}: the reply holds more than {MAX_SAMPLES:,} samples, the most devctl decodes "
                "(narrow it: --node, a RESOURCE, or --job)"
            )
        try:
            doc: Any = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise garbage from None
        finally:
            del body[:]  # the raw reply is not kept beside its decoded form
        if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
            raise garbage
        if doc["status"] == "error":
            raise PrometheusError(f"{self.url}: the query failed: {_short(doc.get('error', 'no reason given'))}")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise garbage
        try:
            samples = [Sample(item["metric"], float(item["value"][1])) for item in data["result"]]
            # Label values are strings in Prometheus' API: one pass over all of them, in C, says so.
            if not all(type(s.labels) is dict for s in samples) or not {
                type(v) for s in samples for v in s.labels.values()
            } <= {str}:
                raise TypeError
        except (KeyError, TypeError, ValueError, IndexError, OverflowError):
            raise garbage from None
        return samples
