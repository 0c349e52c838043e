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
so it starts in milliseconds and stays a few MiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import struct
import sys

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


async def _serve_connection(
    page: Page, content_type: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Requests of one connection, kept alive as HTTP/1.1 allows (Prometheus reuses its connection)."""
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
                return
            try:
                method, path, version, headers = _parse(head[:-4])
            except ValueError:
                writer.write(_head(400, "Bad Request", TEXT, 0, gzip=False, close=True))
                return
            if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                method = "POST"  # a request with a body: refused, and the connection closed
            close = (
                version == "HTTP/1.0"
                or headers.get("connection", "").lower() == "close"
                or method not in ("GET", "HEAD")
            )
            writer.write(answer(page, content_type, method, path, headers, close))
            await writer.drain()
            if close:
                return
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _pages(page: Page) -> None:
    """Read pages from stdin until it ends (the exporter is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    while True:
        try:
            ready, text_len, gzip_len = FRAME.unpack(await reader.readexactly(FRAME.size))
            text = await reader.readexactly(text_len)
            gzipped = await reader.readexactly(gzip_len)
        except asyncio.IncompleteReadError:
            return
        page.bodies = (text, gzipped)
        page.ready = bool(ready)


async def main(fd: int, content_type: str) -> None:
    page = Page()
    listener = socket.socket(fileno=fd)
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(page, content_type, r, w), sock=listener, limit=MAX_HEAD
    )
    async with server:
        await _pages(page)


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the exporter ends this process by closing its stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
