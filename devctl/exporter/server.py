"""``devctl exporter`` at work: refresh the node every interval, follow the streams, serve the page over HTTP.

The event loop does all node I/O: ``collect`` once per interval (pod-resources,
the checkpoint, sysfs, a probe of each plugin and DRA driver, dra_manager_state,
the CDI specs — a few RPCs, far inside the kubelet's pod-resources rate limit of
100/s shared by every client) and the live streams. The HTTP server runs in threads of its own and only reads the
state, so a slow scraper never holds up a stream and a scrape never waits on
the node. SIGTERM or SIGINT ends both cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from devctl.exporter.live import PluginStreams
from devctl.exporter.metrics import SOURCES, prepare
from devctl.exporter.state import ExporterState
from devctl.model import NodePaths

log = logging.getLogger(__name__)

DEFAULT_LISTEN = ":9477"
DEFAULT_INTERVAL = 15.0


class ListenError(ValueError):
    """A ``--listen`` value that is not HOST:PORT; the message is one line."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every address) or ``[::1]:PORT`` as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. :9477 or 127.0.0.1:9477")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def _handler(state: ExporterState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """GET /metrics (the exposition text) and /healthz (200 once the first refresh is done)."""

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
                self._send(200, CONTENT_TYPE_LATEST, state.page(gzipped), "gzip" if gzipped else None)
            elif path == "/healthz":
                if state.ready:
                    self._send(200, "text/plain; charset=utf-8", b"ok\n")
                else:
                    self._send(503, "text/plain; charset=utf-8", b"waiting for the first refresh\n")
            else:
                self._send(404, "text/plain; charset=utf-8", b"devctl exporter: see /metrics and /healthz\n")

        def _send(self, code: int, content_type: str, body: bytes, encoding: str | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]):
        if ":" in address[0]:
            import socket

            self.address_family = socket.AF_INET6
        super().__init__(address, handler)


async def _refresh(paths: NodePaths, timeout: float, interval: float, state: ExporterState) -> None:
    """Read every source once per ``interval``, never more often, and publish the snapshot."""
    from devctl.collect import collect

    while True:
        started = time.monotonic()
        snapshot = await collect(paths, timeout, want=frozenset(SOURCES))
        live, resources = state.learn(snapshot)
        # The views and doctor's checks are pure CPU work: off the loop, so no stream waits on them.
        state.set_refresh(await asyncio.to_thread(prepare, snapshot, live, resources, time.time()))
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def serve(
    paths: NodePaths,
    listen: tuple[str, int],
    interval: float,
    timeout: float,
    on_listening: Callable[[str, int], None] = lambda host, port: None,
) -> None:
    """Run the exporter until SIGTERM or SIGINT; raises OSError when the address cannot be bound."""
    # Prometheus computes rates itself; the `_created` series only double the histogram's size.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated
    state = ExporterState()
    server = _Server(listen, _handler(state))
    state.start_renderer()
    host, port = server.server_address[:2]
    thread = threading.Thread(target=server.serve_forever, name="devctl-exporter-http", daemon=True)
    thread.start()
    on_listening(str(host), int(port))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    streams = PluginStreams(paths.plugins_dir, timeout, state.set_live, state.observe_rpc, root=paths.root)
    tasks = [
        asyncio.ensure_future(_refresh(paths, timeout, interval, state)),
        asyncio.ensure_future(streams.run()),
    ]
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper:
                task.result()  # a bug in a loop of ours ends the exporter loudly, not silently
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for task in (*tasks, stopper):
            task.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
        with contextlib.suppress(Exception):
            server.shutdown()
        server.server_close()
        thread.join(5)
        state.stop_renderer()
