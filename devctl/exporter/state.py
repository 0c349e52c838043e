"""The exporter's latest state, shared by the event loop that fills it and the HTTP threads that read it.

The loop replaces whole immutable values (a snapshot, a new map of live
sockets) and bumps ``version``; a scrape renders the state once per version
and answers every further scrape from those bytes. So a scrape every 100 ms
costs a dictionary look-up, and no scrape ever makes an RPC.
"""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest

from devctl.exporter.live import LiveSocket
from devctl.exporter.metrics import ExporterView, NodeCollector
from devctl.model import NodeSnapshot

# Plugin RPCs on a unix socket take well under a millisecond; a hung one takes the deadline.
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ExporterState:
    """The snapshot of the last refresh, each plugin socket's live stream, and the rendered page."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.rpc_duration = Histogram(
            "devctl_plugin_rpc_duration_seconds",
            "Duration of devctl's RPCs to device plugins (GetDevicePluginOptions per refresh, "
            "ListAndWatch to its first list).",
            ["rpc"],
            buckets=RPC_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(NodeCollector(self.view))
        self._lock = threading.Lock()
        # One render at a time: concurrent scrapes of a changed state wait for the same page.
        self._render = threading.Lock()
        self._snapshot: NodeSnapshot | None = None
        self._refreshed_at: float | None = None
        self._live: dict[str, LiveSocket] = {}
        self._resources: dict[str, str] = {}
        self._version = 0
        self._page: tuple[int, bytes] | None = None
        self.renders = 0  # how many times the page was built (tests check scrapes reuse it)

    # --- written by the event loop ------------------------------------------------------

    def set_snapshot(self, snapshot: NodeSnapshot) -> None:
        """A refresh finished: keep its snapshot, learn which socket serves what, time its plugin RPCs."""
        for p in snapshot.plugins:
            if p.latency_ms is not None:
                self.rpc_duration.labels("GetDevicePluginOptions").observe(p.latency_ms / 1000)
        with self._lock:
            resources = dict(self._resources)
            resources.update({p.socket: p.resource for p in snapshot.plugins if p.resource})
            self._resources = resources
            self._snapshot = snapshot
            self._refreshed_at = time.time()
            self._version += 1

    def set_live(self, socket: str, live: LiveSocket | None) -> None:
        """A stream sent a list, broke, or its socket was forgotten (``None``)."""
        with self._lock:
            current = dict(self._live)
            if live is None:
                current.pop(socket, None)
            else:
                current[socket] = live
            self._live = current
            self._version += 1

    def observe_rpc(self, rpc: str, seconds: float) -> None:
        self.rpc_duration.labels(rpc).observe(seconds)
        with self._lock:
            self._version += 1

    # --- read by scrapes ------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether the first refresh is done (``/healthz`` answers 200 from then on)."""
        return self._refreshed_at is not None

    def view(self) -> ExporterView:
        with self._lock:
            return ExporterView(self._snapshot, self._live, self._resources, self._refreshed_at)

    def page(self) -> bytes:
        """The exposition text of the current state, built once per change."""
        with self._lock:
            version, page = self._version, self._page
        if page is not None and page[0] == version:
            return page[1]
        with self._render:
            with self._lock:
                if self._page is not None and self._page[0] == self._version:
                    return self._page[1]
                version = self._version
            text = generate_latest(self.registry)
            self.renders += 1
            with self._lock:
                self._page = (version, text)
        return text
