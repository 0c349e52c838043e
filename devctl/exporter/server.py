"""``devctl exporter`` at work: refresh the node every interval, follow the streams, serve the page over HTTP.

The event loop does all node I/O: ``collect`` once per interval (pod-resources,
the checkpoint, sysfs, a probe of each plugin and DRA driver, dra_manager_state,
the CDI specs — a few RPCs, far inside the kubelet's pod-resources rate limit of
100/s shared by every client) and the live streams. A thread renders the page
after each change; the HTTP server is a process of its own (``httpd``) that is
sent every page and only writes bytes, so a slow scraper never holds up a
stream, and a scrape never waits on the node nor on this interpreter's lock.
SIGTERM or SIGINT ends both cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from devctl.base.errors import DevctlError
from devctl.exporter.dra import DraStreams, followable
from devctl.exporter.live import PluginStreams
from devctl.exporter.metrics import READ, prepare
from devctl.exporter.state import ExporterState
from devctl.fast import httpd
from devctl.fast.httpd import FRAME
from devctl.model import NodePaths, NodeSnapshot

if TYPE_CHECKING:
    from devctl.core.recorder import Recorder

log = logging.getLogger(__name__)

# Loopback unless the admin says otherwise: any client that reaches the port can use the HTTP process' bounded share
# of the node (docs/exporter.md); the DaemonSet listens on the pod's addresses, with deploy/networkpolicy.yaml.
DEFAULT_LISTEN = "127.0.0.1:9477"
DEFAULT_INTERVAL = 15.0


class HttpEnded(DevctlError):
    """The HTTP process died under the exporter; the message is one line."""


class ListenError(DevctlError, ValueError):
    """A ``--listen`` value that is not HOST:PORT; the message is one line."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every address) or ``[::1]:PORT`` as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. :9477 or 127.0.0.1:9477")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


class HttpProcess:
    """The HTTP side (``httpd``) as a child process, serving the listening socket bound here.

    Binding here makes an address in use this process' usage error; the child
    gets the socket and the pages, and ends when its stdin closes. ``limits`` are
    ``httpd.Limits`` as ``NAME=VALUE`` (tests shorten the clocks); none: the defaults.
    """

    def __init__(self, listen: tuple[str, int], limits: Sequence[str] = ()):
        family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
        self.socket = socket.create_server(listen, family=family, backlog=128)
        self.address = self.socket.getsockname()[:2]
        script = os.path.abspath(httpd.__file__)  # run as a script: the standard library only
        self.proc = subprocess.Popen(
            [sys.executable, "-I", script, str(self.socket.fileno()), CONTENT_TYPE_LATEST, *limits],
            stdin=subprocess.PIPE,
            pass_fds=(self.socket.fileno(),),
        )
        self.socket.close()  # the child's now; this process only feeds it
        self._lock = threading.Lock()

    def publish(self, ready: bool, text: bytes, gzipped: bytes) -> None:
        """Send a page (from the renderer thread); a child that is gone is _watch_http's to report."""
        assert self.proc.stdin is not None
        try:
            with self._lock:
                self.proc.stdin.write(FRAME.pack(ready, len(text), len(gzipped)))
                self.proc.stdin.write(text)
                self.proc.stdin.write(gzipped)
                self.proc.stdin.flush()
        except (OSError, ValueError):  # a broken pipe, or stdin closed at shutdown
            pass

    def close(self) -> None:
        """End the child: its stdin closes, it stops serving and exits."""
        with self._lock, contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def _refresh(paths: NodePaths, timeout: float, interval: float, state: ExporterState, dra: DraStreams) -> None:
    """Read every source once per ``interval``, never more often, and publish the snapshot."""
    from devctl.core.collect import collect
    from devctl.core.doctor import read_extras

    before: NodeSnapshot | None = None
    while True:
        started = time.monotonic()
        snapshot = await collect(paths, timeout, want=frozenset(READ))
        dra.follow(followable(snapshot.plugins))
        # doctor's own readings beside the snapshot, as `devctl doctor` takes them (the journal's history aside:
        # a day of it read at every refresh would cost more than the rest; docs/exporter.md)
        extras = await read_extras(snapshot, timeout, history=False)
        live, resources = state.learn(snapshot)
        # The views and doctor's checks are pure CPU work: off the loop, so no stream waits on them.
        refresh = await asyncio.to_thread(prepare, snapshot, live, resources, time.time(), extras, before)
        state.set_refresh(refresh)
        before = snapshot
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def serve(
    paths: NodePaths,
    listen: tuple[str, int],
    interval: float,
    timeout: float,
    on_listening: Callable[[str, int], None] = lambda host, port: None,
    recorder: Recorder | None = None,
    kmsg: str | None = None,
) -> None:
    """Run the exporter until SIGTERM or SIGINT; raises OSError when the address cannot be bound.

    With ``recorder`` (``--journal``) it records the node's events while it serves (``devctl record``'s use-case).
    """
    # Prometheus computes rates itself; the `_created` series only double the histogram's size.
    disable_created_metrics()
    http = HttpProcess(listen)
    state = ExporterState(http.publish)
    try:
        state.render()  # the page before the first refresh: /healthz says 503 until that one is done
        state.start_renderer()
        on_listening(str(http.address[0]), int(http.address[1]))
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        streams = PluginStreams(
            paths.plugins_dir, timeout, state.set_live, state.observe_rpc, root=paths.root, paths=paths
        )
        dra = DraStreams(paths, timeout, state.set_dra)
        tasks = [
            asyncio.ensure_future(_refresh(paths, timeout, interval, state, dra)),
            asyncio.ensure_future(streams.run()),
            asyncio.ensure_future(dra.run()),
            asyncio.ensure_future(_watch_http(http)),
        ]
        if recorder is not None:
            tasks.append(asyncio.ensure_future(_record(recorder, paths, stop, kmsg, timeout)))
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
    finally:
        state.stop_renderer()
        http.close()


async def _record(recorder: Recorder, paths: NodePaths, stop: asyncio.Event, kmsg: str | None, timeout: float) -> None:
    """Record until stopped; a journal that fails (a full disk) is one line, and the exporter goes on serving."""
    await recorder.run(paths, stop, kmsg=kmsg, timeout=timeout)
    if recorder.failure is not None:
        log.warning("%s", recorder.failure)
    await stop.wait()


async def _watch_http(http: HttpProcess) -> None:
    """Raise HttpEnded once the HTTP process is gone: an exporter that cannot be scraped must not look alive."""
    # A thread waits for the child; it returns at the latest when close() ends the child.
    status = await asyncio.to_thread(http.proc.wait)
    raise HttpEnded(f"the HTTP server process ended (exit status {status})")
