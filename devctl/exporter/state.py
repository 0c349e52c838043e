"""The exporter's latest state, filled by the event loop, rendered by a thread of its own, served by another process.

The loop replaces whole immutable values (a refresh, a new map of live
sockets) and marks the state changed; the renderer thread builds the
exposition page once per change, merging a burst of changes into one build,
and hands the bytes to ``publish`` (the HTTP process, ``httpd``). A scrape only
writes the newest bytes: a scrape every 100 ms costs no RPC, and its answer
time does not grow with the node nor wait for a build. A build writes again
only what changed of the family as large as the node, ``devctl_device_health``
(``metrics.HealthLines``); prometheus-client writes the other families
(docs/performance-exporter.md).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest

from devctl.exporter.dra import DriverLive
from devctl.exporter.live import LiveSocket
from devctl.exporter.metrics import ExporterView, HealthLines, Layout, NodeCollector, Refresh, layout
from devctl.model import NodeSnapshot

# Plugin RPCs on a unix socket take well under a millisecond; a hung one takes the deadline.
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# How long the renderer lets a burst of stream updates gather before it builds the page.
SETTLE = 0.05

# (ready, the page, its gzip form): where each built page goes.
Publish = Callable[[bool, bytes, bytes], None]


class ExporterState:
    """The last refresh, each plugin socket's live stream, and the newest rendered page."""

    def __init__(self, publish: Publish = lambda ready, text, gzipped: None) -> None:
        self._publish = publish
        self.registry = CollectorRegistry(auto_describe=False)
        self.rpc_duration = Histogram(
            "devctl_plugin_rpc_duration_seconds",
            "Duration of devctl's RPCs to device plugins (GetDevicePluginOptions per refresh, "
            "ListAndWatch to its first list).",
            ["rpc"],
            buckets=RPC_BUCKETS,
            registry=self.registry,
        )
        self._layout: Layout | None = None  # what the render in progress shows
        self.registry.register(NodeCollector(lambda: self._layout))
        self._health = HealthLines()
        self._lock = threading.Lock()
        self._refresh: Refresh | None = None
        self._live: dict[str, LiveSocket] = {}
        self._resources: dict[str, str] = {}
        self._dra: dict[str, DriverLive] = {}
        self._changed = threading.Event()
        self._stopping = False
        self._renderer: threading.Thread | None = None
        self._ready = False  # the first refresh is rendered: /healthz answers 200 from then on

    # --- written by the event loop ------------------------------------------------------

    def learn(self, snapshot: NodeSnapshot) -> tuple[dict[str, LiveSocket], dict[str, str]]:
        """A refresh read the node: remember which socket serves what, time its plugin RPCs.

        Returns the live sockets and resource names to prepare the refresh with.
        """
        for p in snapshot.plugins:
            if p.latency_ms is not None:
                self.rpc_duration.labels("GetDevicePluginOptions").observe(p.latency_ms / 1000)
        with self._lock:
            resources = dict(self._resources)
            resources.update({p.socket: p.resource for p in snapshot.plugins if p.resource})
            self._resources = resources
            return self._live, resources

    def set_refresh(self, refresh: Refresh) -> None:
        with self._lock:
            self._refresh = refresh
        self._changed.set()

    def set_live(self, socket: str, live: LiveSocket | None) -> None:
        """A stream sent a list, broke, or its socket was forgotten (``None``)."""
        with self._lock:
            current = dict(self._live)
            if live is None:
                current.pop(socket, None)
            else:
                current[socket] = live
            self._live = current
        self._changed.set()

    def set_dra(self, driver: str, live: DriverLive) -> None:
        """A DRA driver's health stream said something."""
        with self._lock:
            self._dra = {**self._dra, driver: live}
        self._changed.set()

    def observe_rpc(self, rpc: str, seconds: float) -> None:
        self.rpc_duration.labels(rpc).observe(seconds)
        self._changed.set()

    # --- the page -------------------------------------------------------------------------

    def view(self) -> ExporterView:
        with self._lock:
            return ExporterView(self._refresh, self._live, self._resources, self._dra)

    def render(self) -> tuple[bytes, bytes]:
        """Build the page of the current state now, and its gzip form (Prometheus asks for gzip)."""
        self._changed.clear()
        refreshed = self._refresh is not None
        # One reading of the state for the whole page: the families prometheus-client writes, and the health lines.
        self._layout = layout(self.view())
        text = generate_latest(self.registry) + self._health.render(self._layout)
        # Level 1: a tenth of the size for a few milliseconds, once per change rather than per scrape.
        page = (text, gzip.compress(text, compresslevel=1, mtime=0))
        self._ready = self._ready or refreshed
        self._publish(self._ready, *page)
        return page

    def start_renderer(self) -> None:
        """Build the page in a thread of its own after every change (a burst is one build)."""

        def run() -> None:
            # ``_stopping`` is checked again after each build: a build clears ``_changed``, and with it a stop
            # signalled while it ran (``stop_renderer`` sets ``_stopping`` before it sets ``_changed``).
            while not self._stopping:
                self._changed.wait()
                if self._stopping:
                    return
                time.sleep(SETTLE)
                self.render()

        self._renderer = threading.Thread(target=run, name="devctl-exporter-render", daemon=True)
        self._renderer.start()

    def stop_renderer(self) -> None:
        self._stopping = True
        self._changed.set()
        if self._renderer is not None:
            self._renderer.join(10)
