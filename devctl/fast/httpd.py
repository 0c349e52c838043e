"""The exporter's HTTP side, a process of its own that only hands out the newest page it was sent.

Why a process: building the page of a 10,000-device node holds the
interpreter lock for tenths of a second (prometheus-client formats each of
its samples in Python), and so does the refresh's analysis. A scrape answered
by a thread of that interpreter waited for the lock several times per request:
p95 88 ms while health flips kept the page being rebuilt. This process holds
the page as bytes and writes them; nothing else runs in it, so a scrape's
answer time is the time to write the bytes, whatever the exporter is doing.

The exporter starts it as a script (``python -I httpd.py FD CONTENT_TYPE
[NAME=VALUE...]``) with the listening socket it bound as file descriptor FD,
and writes pages to its stdin: a header ``!BII`` (ready, length of the text,
length of its gzip form) and the two bodies. When stdin ends — the exporter
stopped or died — this process ends too: it never outlives the exporter.
Standard library only, one thread and a selector, so it starts in
milliseconds and stays about 12 MiB.

Any client may connect, so no client decides how much this process holds
(``Limits``; NAME=VALUE sets one, e.g. ``head_timeout=0.5``): a connection
keeps at most one request head of input (``MAX_HEAD``) and reads nothing
while its reply is unsent, so a client that pipelines requests without
reading the replies is held back by TCP, not buffered; a reply shares the
page's bytes, and replies still sending pages older than the newest hold at
most ``max(2 x the newest page, old_pages_bytes)`` (the least active are
closed); at most ``max_connections`` connections (and never more than the
descriptor limit leaves room for), the least recently active one closed for
a new one; a head must be complete ``head_timeout`` seconds after it began, a
reply must move within ``send_timeout``, an idle keep-alive connection closes
after ``idle_timeout``. Out of descriptors, accepting pauses for
``accept_pause`` seconds (and the least active connection is closed) instead
of retrying at once, and the connections already open are still answered.
"""

from __future__ import annotations

import errno
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

FRAME = struct.Struct("!BII")
# A request head larger than this is no scraper's: it is all the input a connection may hold.
MAX_HEAD = 64 * 1024
TEXT = "text/plain; charset=utf-8"
NOT_READY = b"waiting for the first refresh\n"
# accept() failing with these leaves the listener readable: retrying at once would spin.
_OUT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Descriptors this process needs besides its connections (standard streams, listener, pipe, selector).
_RESERVED_FDS = 16
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class Limits:
    """What the clients, each and all, may hold of this process; every one a bound, none of them a client's choice."""

    def __init__(
        self,
        *,
        max_connections: int = 64,
        head_timeout: float = 10.0,
        send_timeout: float = 20.0,
        idle_timeout: float = 120.0,
        accept_pause: float = 0.25,
        old_pages_bytes: int = 8 << 20,
    ) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.send_timeout = send_timeout
        self.idle_timeout = idle_timeout
        self.accept_pause = accept_pause
        self.old_pages_bytes = old_pages_bytes

    @classmethod
    def parse(cls, args: list[str]) -> Limits:
        """``NAME=VALUE`` arguments (``max_connections=8 head_timeout=0.5``); ValueError on a bad one."""
        limits = cls()
        for arg in args:
            name, sep, value = arg.partition("=")
            if not sep or name.startswith("_") or not hasattr(limits, name):
                raise ValueError(f"not a limit: {arg}")
            setattr(limits, name, int(value) if name in ("max_connections", "old_pages_bytes") else float(value))
        return limits


class Page:
    """The newest page as the exporter sent it, replaced whole (a scrape sees one page or the next, never a mix)."""

    def __init__(self) -> None:
        self.ready = False
        self.bodies: tuple[bytes, bytes] = (b"", b"")


def _head(code: int, reason: str, content_type: str, length: int, *, gzip: bool, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {code} {reason}", f"Content-Type: {content_type}", f"Content-Length: {length}"]
    if gzip:
        lines.append("Content-Encoding: gzip")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(
    page: Page, content_type: str, method: str, path: str, headers: dict[str, str], close: bool
) -> tuple[bytes, bytes]:
    """The reply to one request as (status line and headers, body); the body is the page's own bytes, not a copy."""
    path = path.split("?", 1)[0]
    body: bytes
    if method not in ("GET", "HEAD"):
        code, reason, ctype, body, gz = 405, "Method Not Allowed", TEXT, b"GET /metrics or /healthz\n", False
    elif path == "/metrics":
        gz = "gzip" in headers.get("accept-encoding", "")
        code, reason, ctype, body = 200, "OK", content_type, page.bodies[1 if gz else 0]
    elif path == "/healthz":
        ok = page.ready
        code, reason, ctype, gz = (200, "OK", TEXT, False) if ok else (503, "Service Unavailable", TEXT, False)
        body = b"ok\n" if ok else NOT_READY
    else:
        code, reason, ctype, body, gz = 404, "Not Found", TEXT, b"devctl exporter: see /metrics and /healthz\n", False
    head = _head(code, reason, ctype, len(body), gzip=gz, close=close)
    return head, b"" if method == "HEAD" else body


def _parse(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """(method, path, version, headers with lower-case names) of a request head; ValueError when it is none."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, version = lines[0].split(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(version)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, path, version, headers


def _fd_room() -> int:
    """How many connections the descriptor limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft - _RESERVED_FDS


class _Connection:
    """One client: its unparsed input, the reply not yet sent, and its clocks."""

    def __init__(self, sock: socket.socket, now: float):
        self.sock = sock
        self.inbuf = bytearray()
        self.out: list[memoryview] = []
        self.body = b""  # the page body the reply in progress sends (it keeps that page alive)
        self.close_after = False
        self.events = _READ
        self.seen = now  # the last byte read or sent
        self.head_since: float | None = now  # when the head awaited began; None between requests


class Server:
    """One thread, one selector: the listening socket, every connection, and the pipe the pages come on."""

    def __init__(self, listener: socket.socket, pages: int, content_type: str, limits: Limits | None = None):
        self.page = Page()
        self.content_type = content_type
        self.limits = limits or Limits()
        self.max_connections = max(1, min(self.limits.max_connections, _fd_room()))
        self.listener = listener
        self.pages = pages
        self.frame = bytearray()
        self.conns: set[_Connection] = set()
        self.paused_until: float | None = None
        self.sel = selectors.DefaultSelector()
        listener.setblocking(False)
        os.set_blocking(pages, False)
        self.sel.register(listener, _READ)
        self.sel.register(pages, _READ)

    def run(self) -> None:
        """Serve until the pipe ends (the exporter is gone)."""
        lim = self.limits
        tick = max(0.01, min(lim.head_timeout, lim.send_timeout, lim.idle_timeout) / 4)
        while True:
            now = time.monotonic()
            if self.paused_until is not None and now >= self.paused_until:
                self.paused_until = None
                self.sel.register(self.listener, _READ)
            wait = tick if self.paused_until is None else max(0.0, min(tick, self.paused_until - now))
            for key, events in self.sel.select(wait):
                now = time.monotonic()
                if key.fileobj is self.listener:
                    self._accept(now)
                elif key.fd == self.pages:
                    if not self._read_pages():
                        return
                elif key.data in self.conns:  # not closed by an earlier event of this round
                    if events & _READ:
                        self._read(key.data, now)
                    elif events & _WRITE:
                        self._serve(key.data, now)
            self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        """Close each connection past its clock: a head not complete, a reply not moving, or idle too long."""
        lim = self.limits
        for conn in list(self.conns):
            if conn.out:
                late = now - conn.seen > lim.send_timeout
            elif conn.head_since is not None:
                late = now - conn.head_since > lim.head_timeout
            else:
                late = now - conn.seen > lim.idle_timeout
            if late:
                self._close(conn)

    def _least_active(self) -> _Connection:
        return min(self.conns, key=lambda c: c.seen)

    def _accept(self, now: float) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError as e:
            if e.errno in _OUT_OF:
                # The listener stays readable: pause instead of spinning, and free a descriptor for the next one.
                self.sel.unregister(self.listener)
                self.paused_until = now + self.limits.accept_pause
                if self.conns:
                    self._close(self._least_active())
            return  # else the client gave up already: the next one may do
        if len(self.conns) >= self.max_connections:
            self._close(self._least_active())
        sock.setblocking(False)
        conn = _Connection(sock, now)
        self.conns.add(conn)
        self.sel.register(sock, _READ, conn)

    def _read_pages(self) -> bool:
        """Take what the pipe has; a whole frame replaces the page. False once the pipe ends."""
        try:
            chunk = os.read(self.pages, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        self.frame += chunk
        replaced = False
        while len(self.frame) >= FRAME.size:
            ready, text_len, gzip_len = FRAME.unpack_from(self.frame)
            end = FRAME.size + text_len + gzip_len
            if len(self.frame) < end:
                break
            text = bytes(self.frame[FRAME.size : FRAME.size + text_len])
            self.page.bodies = (text, bytes(self.frame[FRAME.size + text_len : end]))
            self.page.ready = bool(ready)
            del self.frame[:end]
            replaced = True
        if replaced:
            self._shed_old_pages()
        return True

    def _shed_old_pages(self) -> None:
        """Close the least active replies of older pages while those pages hold more than their bound."""
        text, gzipped = self.page.bodies
        bound = max(2 * (len(text) + len(gzipped)), self.limits.old_pages_bytes)
        holders = sorted(
            (c for c in self.conns if c.out and c.body and c.body is not text and c.body is not gzipped),
            key=lambda c: c.seen,
        )
        while holders and sum({id(c.body): len(c.body) for c in holders}.values()) > bound:
            self._close(holders.pop(0))

    def _read(self, conn: _Connection, now: float) -> None:
        room = MAX_HEAD - len(conn.inbuf)
        if conn.out or room <= 0:
            return
        try:
            data = conn.sock.recv(room)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.seen = now
        if conn.head_since is None:
            conn.head_since = now
        conn.inbuf += data
        self._serve(conn, now)

    def _serve(self, conn: _Connection, now: float) -> None:
        """Send the reply in progress, then answer the requests in the input one by one until one waits on the client.

        Nothing is read while a reply is unsent, and the input holds at most one head: a
        client that sends requests without reading the replies fills its own socket, not this process.
        """
        while True:
            if conn.out:
                try:
                    sent = conn.sock.sendmsg(conn.out)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    self._close(conn)
                    return
                if sent:
                    conn.seen = now
                while sent:
                    first = conn.out[0]
                    if sent < len(first):
                        conn.out[0] = first[sent:]
                        break
                    sent -= len(first)
                    conn.out.pop(0)
                if conn.out:
                    self._want(conn, _WRITE)
                    return
                conn.body = b""
                if conn.close_after:
                    self._close(conn)
                    return
                conn.head_since = now if conn.inbuf else None
            end = conn.inbuf.find(b"\r\n\r\n")
            if end < 0:
                if len(conn.inbuf) >= MAX_HEAD:
                    self._close(conn)  # a head larger than any scraper's
                    return
                self._want(conn, _READ)
                return
            self._take(conn, end)

    def _take(self, conn: _Connection, end: int) -> None:
        """The reply to the request head ending at ``end`` of the input, made the connection's output."""
        head = bytes(conn.inbuf[:end])
        del conn.inbuf[: end + 4]
        try:
            method, path, version, headers = _parse(head)
        except ValueError:
            reply = (_head(400, "Bad Request", TEXT, 0, gzip=False, close=True), b"")
            conn.close_after = True
        else:
            if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                method = "POST"  # a request with a body: refused, and the connection closed
            asked_close = version == "HTTP/1.0" or headers.get("connection", "").lower() == "close"
            conn.close_after = asked_close or method not in ("GET", "HEAD")
            reply = answer(self.page, self.content_type, method, path, headers, conn.close_after)
        conn.body = reply[1] if any(reply[1] is body for body in self.page.bodies) else b""
        conn.out = [memoryview(part) for part in reply if part]

    def _want(self, conn: _Connection, events: int) -> None:
        if conn.events != events:
            self.sel.modify(conn.sock, events, conn)
            conn.events = events

    def _close(self, conn: _Connection) -> None:
        if conn in self.conns:
            self.conns.discard(conn)
            self.sel.unregister(conn.sock)
            conn.sock.close()
            conn.out = []
            conn.body = b""


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the exporter ends this process by closing its stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Server(socket.socket(fileno=int(sys.argv[1])), sys.stdin.fileno(), sys.argv[2], Limits.parse(sys.argv[3:])).run()
