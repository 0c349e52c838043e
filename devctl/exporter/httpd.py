"""The exporter's HTTP side, a process of its own that only hands out the newest page it was sent.

Why a process: building the page of a 10,000-device node holds the
interpreter lock for tenths of a second (prometheus-client formats each of
its samples in Python), and so does the refresh's analysis. A scrape answered
by a thread of that interpreter waited for the lock several times per request:
p95 88 ms while health flips kept the page being rebuilt. This process holds
the page as bytes and writes them; nothing else runs in it, so a scrape's
answer time is the time to write the bytes, whatever the exporter is doing.

The exporter starts it as a script (``python -I httpd.py FD CONTENT_TYPE``)
with the listening socket it bound as file descriptor FD, and writes pages to
its stdin: a header ``!BII`` (ready, length of the text, length of its gzip
form) and the two bodies. When stdin ends — the exporter stopped or died —
this process ends too: it never outlives the exporter. Standard library only,
one thread and a selector, so it starts in milliseconds and stays about 12 MiB.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import struct
import sys
import time

FRAME = struct.Struct("!BII")
# A request head larger than this is no scraper's; idle keep-alive connections close after IDLE seconds.
MAX_HEAD = 64 * 1024
IDLE = 120.0
TEXT = "text/plain; charset=utf-8"
NOT_READY = b"waiting for the first refresh\n"


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


def answer(page: Page, content_type: str, method: str, path: str, headers: dict[str, str], close: bool) -> bytes:
    """The whole reply to one request: status line, headers and body."""
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
    return head if method == "HEAD" else head + body


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


class _Connection:
    """One client: its unparsed input and the reply bytes not yet sent."""

    def __init__(self, sock: socket.socket, now: float):
        self.sock = sock
        self.inbuf = bytearray()
        self.out = memoryview(b"")
        self.close_after = False
        self.seen = now


class Server:
    """One thread, one selector: the listening socket, every connection, and the pipe the pages come on."""

    def __init__(self, listener: socket.socket, pages: int, content_type: str):
        self.page = Page()
        self.content_type = content_type
        self.listener = listener
        self.pages = pages
        self.frame = bytearray()
        self.sel = selectors.DefaultSelector()
        listener.setblocking(False)
        os.set_blocking(pages, False)
        self.sel.register(listener, selectors.EVENT_READ)
        self.sel.register(pages, selectors.EVENT_READ)

    def run(self) -> None:
        """Serve until the pipe ends (the exporter is gone)."""
        while True:
            now = time.monotonic()
            for key, events in self.sel.select(IDLE / 4):
                if key.fileobj is self.listener:
                    self._accept(now)
                elif key.fd == self.pages:
                    if not self._read_pages():
                        return
                else:
                    conn = key.data
                    conn.seen = now
                    if events & selectors.EVENT_READ:
                        self._read(conn)
                    if events & selectors.EVENT_WRITE and conn.sock.fileno() >= 0:
                        self._write(conn)
            for key in list(self.sel.get_map().values()):
                if isinstance(key.data, _Connection) and now - key.data.seen > IDLE:
                    self._close(key.data)

    def _accept(self, now: float) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:  # the client gave up already, or too many open files: the next one may do
            return
        sock.setblocking(False)
        conn = _Connection(sock, now)
        self.sel.register(sock, selectors.EVENT_READ, conn)

    def _read_pages(self) -> bool:
        """Take what the pipe has; a whole frame replaces the page. False once the pipe ends."""
        try:
            chunk = os.read(self.pages, 1 << 20)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        self.frame += chunk
        while len(self.frame) >= FRAME.size:
            ready, text_len, gzip_len = FRAME.unpack_from(self.frame)
            end = FRAME.size + text_len + gzip_len
            if len(self.frame) < end:
                break
            text = bytes(self.frame[FRAME.size : FRAME.size + text_len])
            self.page.bodies = (text, bytes(self.frame[FRAME.size + text_len : end]))
            self.page.ready = bool(ready)
            del self.frame[:end]
        return True

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.inbuf += data
        self._next_request(conn)

    def _next_request(self, conn: _Connection) -> None:
        """Answer the next whole request in the input, unless a reply is still being sent."""
        if conn.out or conn.close_after:
            return
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbuf) > MAX_HEAD:
                self._close(conn)
            return
        head = bytes(conn.inbuf[:end])
        del conn.inbuf[: end + 4]
        try:
            method, path, version, headers = _parse(head)
        except ValueError:
            conn.out, conn.close_after = memoryview(_head(400, "Bad Request", TEXT, 0, gzip=False, close=True)), True
        else:
            if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                method = "POST"  # a request with a body: refused, and the connection closed
            asked_close = version == "HTTP/1.0" or headers.get("connection", "").lower() == "close"
            conn.close_after = asked_close or method not in ("GET", "HEAD")
            reply = answer(self.page, self.content_type, method, path, headers, conn.close_after)
            conn.out = memoryview(reply)
        self._write(conn)

    def _write(self, conn: _Connection) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(conn)
            return
        conn.out = conn.out[sent:]
        if conn.out:
            self.sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            return
        if conn.close_after:
            self._close(conn)
            return
        self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
        self._next_request(conn)

    def _close(self, conn: _Connection) -> None:
        if conn.sock.fileno() >= 0:
            self.sel.unregister(conn.sock)
            conn.sock.close()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the exporter ends this process by closing its stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Server(socket.socket(fileno=int(sys.argv[1])), sys.stdin.fileno(), sys.argv[2]).run()
