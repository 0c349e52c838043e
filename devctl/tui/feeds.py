"""Where the TUI's data comes from: the node (or a snapshot file), and the in-process plugins it may drive.

The app never reaches for a socket itself: it is handed a feed, an object with
``snapshot()``, ``events(resolve)`` and ``change_token()``, and optionally
``controls``. ``NodeFeed`` reads a live node through ``devctl.core.collect`` and
``devctl.core.watch``; ``SnapshotFeed`` shows a saved snapshot; tests pass their
own small objects of the same shape. No widgets here.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from devctl.base.errors import DevctlError
from devctl.base.escape import unescape
from devctl.base.waits import within
from devctl.core.events import Notice, WatchEvent
from devctl.model import HEALTHY, UNHEALTHY, Device, NodePaths, NodeSnapshot
from devctl.model.serial import from_json_line

if TYPE_CHECKING:
    from devctl.core.collect import Progress
    from devctl.core.doctor import DoctorExtras

# socket path -> resource, for ``watch`` (see devctl.core.watch.Resolver)
Resolver = Callable[[], Awaitable[Mapping[str, str | None]]]


class Feed(Protocol):
    """What the app needs from a data source."""

    async def snapshot(self, progress: Callable[[Progress], None] | None = None) -> NodeSnapshot:
        """Everything at once (pod-resources, plugins, checkpoint, topology); failures inside as SourceErrors.

        ``progress``, when given, hears what is still awaited and can show what
        has answered meanwhile (``devctl.core.collect.Progress``).
        """
        ...

    def events(self, resolve: Resolver) -> AsyncGenerator[object, None]:
        """Live ListAndWatch events of every plugin, for as long as the caller iterates."""
        ...

    def change_token(self) -> object:
        """Something cheap that changes when the node's allocations may have changed."""
        ...


class PluginHandle(Protocol):
    """The part of ``devctl.lab.plugin.server.DevicePluginServer`` that the keys use."""

    @property
    def devices(self) -> tuple[Device, ...]: ...

    def set_health(self, device_id: str, health: str) -> None: ...

    def add(self, device: Device) -> None: ...

    def remove(self, device_id: str) -> None: ...


class FeedControlError(DevctlError):
    """A key that cannot act: no in-process plugin for the resource, or an unknown device."""


class PluginControls:
    """Flip health, add and remove devices of the plugins running in this process.

    These are direct calls on the plugin objects (same process, same event
    loop): the change goes out on every open ListAndWatch stream, the
    kubelet's included, and comes back to the TUI like any other event.
    """

    def __init__(self, plugins: Mapping[str, PluginHandle]):
        self.plugins = plugins

    def resources(self) -> tuple[str, ...]:
        return tuple(sorted(self.plugins))

    def _plugin(self, resource: str) -> PluginHandle:
        try:
            return self.plugins[resource]
        except KeyError:
            raise FeedControlError(f"{resource} is not served from this process") from None

    def toggle_health(self, resource: str, device_id: str) -> str:
        """Healthy becomes Unhealthy and anything else Healthy; returns the new health."""
        plugin = self._plugin(resource)
        current = next((d for d in plugin.devices if d.id == device_id), None)
        if current is None:
            raise FeedControlError(f"{resource} has no device {device_id}")
        health = UNHEALTHY if current.health == HEALTHY else HEALTHY
        plugin.set_health(device_id, health)
        return health

    def add_device(self, resource: str, like: str | None = None) -> str:
        """Add a healthy device named after the existing ones, on the NUMA nodes of ``like``; returns its ID."""
        plugin = self._plugin(resource)
        devices = plugin.devices
        template = next((d for d in devices if d.id == like), devices[-1] if devices else None)
        new_id = next_device_id(resource, [d.id for d in devices], template.id if template else None)
        plugin.add(Device(new_id, HEALTHY, template.numa_nodes if template else ()))
        return new_id

    def remove_device(self, resource: str, device_id: str) -> None:
        plugin = self._plugin(resource)
        if all(d.id != device_id for d in plugin.devices):
            raise FeedControlError(f"{resource} has no device {device_id}")
        plugin.remove(device_id)


_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def next_device_id(resource: str, existing: list[str], like: str | None) -> str:
    """A new, unused ID in the style of ``like`` (``GPU-7`` -> ``GPU-8``), else ``<name part>-N``."""
    taken = set(existing)
    match = _TRAILING_NUMBER.match(like or "")
    prefix = match.group(1) if match else resource.rsplit("/", 1)[-1] + "-"
    width = len(match.group(2)) if match and match.group(2).startswith("0") else 0
    numbers = [int(m.group(2)) for i in existing if (m := _TRAILING_NUMBER.match(i)) and m.group(1) == prefix]
    n = max(numbers, default=-1) + 1
    while f"{prefix}{n:0{width}d}" in taken:
        n += 1
    return f"{prefix}{n:0{width}d}"


def file_token(path: str) -> object:
    """A file's identity and change time, or None when it is missing: cheap to ask often."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class NodeFeed:
    """A live node: collect for snapshots, watch for ListAndWatch events, the checkpoint for changes.

    The kubelet rewrites its checkpoint after every allocation and every device
    update (pkg/kubelet/cm/devicemanager/manager.go, writeCheckpoint), so its
    change time says when pod-resources is worth asking again: it has no watch
    RPC, and its rate limit is shared by every client of the node.

    With ``watch_subprocess`` the ListAndWatch streams are followed by a
    ``devctl watch -o json`` child process instead of in this one: every
    message is a plugin's full device list, and turning 10,000 devices into
    events twenty times a second takes most of a core, which then is not the
    one that answers the keyboard.
    """

    def __init__(
        self,
        paths: NodePaths,
        timeout: float,
        *,
        controls: PluginControls | None = None,
        watch_subprocess: bool = False,
    ):
        self.paths = paths
        self.timeout = timeout
        self.controls = controls
        self.watch_subprocess = watch_subprocess

    async def snapshot(self, progress: Callable[[Progress], None] | None = None) -> NodeSnapshot:
        from devctl.core.collect import collect
        from devctl.model import ALL_SOURCES, HOLDER_SOURCES, NODE_NAME

        want = ALL_SOURCES | HOLDER_SOURCES | {NODE_NAME}  # NODE_NAME: the findings' hints name the node
        return await collect(self.paths, self.timeout, want=want, progress=progress)

    def events(self, resolve: Resolver) -> AsyncGenerator[object, None]:
        if self.watch_subprocess:
            return watch_in_child(self.paths, self.timeout)
        from devctl.core.watch import watch

        return watch(self.paths, wait=True, timeout=self.timeout, resolve=resolve)

    def change_token(self) -> object:
        return file_token(self.paths.checkpoint)

    async def doctor_extras(self, snapshot: NodeSnapshot) -> DoctorExtras:
        """What ``devctl doctor`` reads beside the snapshot (devctl.core.doctor), so the findings are its own."""
        from devctl.core.doctor import read_extras

        return await read_extras(snapshot, self.timeout)

    async def reread(self, snapshot: NodeSnapshot, sockets: tuple[str, ...]) -> NodeSnapshot:
        """The kubelet's allocatable devices and these plugin sockets read again a moment later, as
        ``devctl doctor`` reads them before it calls a plugin and the kubelet in disagreement."""
        from devctl.analyze.doctor import RECHECK_AFTER
        from devctl.core.collect import reread

        return await reread(snapshot, self.timeout, sockets, after=min(RECHECK_AFTER, self.timeout))


class WatchStopped(DevctlError):
    """The ``devctl watch`` child ended; the message says how, on one line."""


def watch_command(paths: NodePaths, timeout: float) -> list[str]:
    """``devctl watch`` of every plugin of this node, one JSON object per event (cli.md), waiting for plugins.

    ``--notices=json``: its notices come on stderr as ``devctl.model.serial`` JSON lines too.
    """
    return [
        sys.executable,
        "-m",
        "devctl",
        f"--root={paths.root}",
        f"--kubelet-dir={paths.kubelet_dir}",
        f"--plugins-dir={paths.plugins_dir}",
        f"--pod-resources={paths.pod_resources}",
        f"--sysfs={paths.sysfs}",
        f"--pod-logs={paths.pod_logs}",
        f"--timeout={timeout:g}",
        "watch",
        "--wait",
        "--output=json",
        "--notices=json",
    ]


def event_from_json(line: bytes) -> object | None:
    """One line of ``devctl watch -o json`` as a WatchEvent (None for a line that is not one).

    Read by ``devctl.model.serial``, which wrote it: every key the child wrote comes back, ``message`` too.
    """
    try:
        return from_json_line(WatchEvent, line)
    except ValueError:  # not JSON, not UTF-8, or not an event (PlainError)
        return None


def notice_from_line(raw: bytes) -> Notice:
    """One line of the child's stderr as a Notice: a ``devctl.model.serial`` JSON line comes back whole
    (its time, resource and socket); any other line (a ``devctl: ...`` line, ending the child) is its message."""
    if raw.startswith(b"{"):
        with contextlib.suppress(ValueError):
            return from_json_line(Notice, raw)
    # The child escaped the line for a terminal; the log escapes it again where it draws it.
    message = unescape(raw.decode(errors="replace").strip().removeprefix("devctl: "))
    return Notice(datetime.now(timezone.utc), message)


async def watch_in_child(paths: NodePaths, timeout: float) -> AsyncGenerator[object, None]:
    """Events of ``devctl watch -o json --notices=json`` run as a child; its status lines (stderr) come as Notices.

    Raises WatchStopped when the child ends by itself; the child is stopped
    when the caller stops iterating.
    """
    child = await asyncio.create_subprocess_exec(
        *watch_command(paths, timeout),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
        # Same process group as the TUI: when the SSH session hangs up, the hangup ends the child too.
        # (A Ctrl-C is a key to the TUI's raw terminal, not a signal, so it never reaches the child.)
    )
    queue: asyncio.Queue[object] = asyncio.Queue()
    done = object()
    last_error = ""

    async def events(stream: asyncio.StreamReader) -> None:
        async for line in stream:
            if (event := event_from_json(line)) is not None:
                queue.put_nowait(event)
        queue.put_nowait(done)

    async def notices(stream: asyncio.StreamReader) -> None:
        nonlocal last_error
        async for raw in stream:
            notice = notice_from_line(raw)
            if notice.message:
                last_error = notice.message
                queue.put_nowait(notice)
        queue.put_nowait(done)

    assert child.stdout is not None and child.stderr is not None
    readers = [asyncio.ensure_future(events(child.stdout)), asyncio.ensure_future(notices(child.stderr))]
    try:
        ended = 0
        while ended < len(readers):
            item = await queue.get()
            if item is done:
                ended += 1
                continue
            yield item
        status = await child.wait()
        raise WatchStopped(f"devctl watch exited with status {status}" + (f": {last_error}" if last_error else ""))
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        if child.returncode is None:
            child.terminate()
            try:
                await within(child.wait(), 3)
            except asyncio.TimeoutError:
                child.kill()
                await child.wait()


class SnapshotFeed:
    """A snapshot read from a file (``devctl --from FILE tui``): nothing live, nothing changes."""

    controls = None
    live = False  # the screen says when it was taken and offers no refresh

    def __init__(self, snapshot: NodeSnapshot):
        self._snapshot = snapshot

    async def snapshot(self, progress: Callable[[Progress], None] | None = None) -> NodeSnapshot:
        return self._snapshot

    async def events(self, resolve: Resolver) -> AsyncGenerator[object, None]:
        return
        yield

    def change_token(self) -> object:
        return None


class LogCapture(logging.Handler):
    """Keeps log records for the event log while the TUI owns the terminal.

    A plugin or the simulator running in this process logs to stderr, which
    would scribble over the screen; while the app runs, their records land
    here instead. ``emit`` may be called from any thread.
    """

    def __init__(self, limit: int = 500):
        super().__init__(logging.WARNING)
        self.records: collections.deque[logging.LogRecord] = collections.deque(maxlen=limit)
        self.on_record: Callable[[], Any] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.on_record is not None:
            self.on_record()

    def drain(self) -> list[logging.LogRecord]:
        out = []
        while self.records:
            out.append(self.records.popleft())
        return out


@contextlib.contextmanager
def captured_logs() -> Iterator[LogCapture]:
    """While the app runs, log records go to a LogCapture instead of the handlers on stderr."""
    root = logging.getLogger()
    capture = LogCapture()
    saved = root.handlers[:]
    root.handlers = [capture]
    try:
        yield capture
    finally:
        root.handlers = saved
