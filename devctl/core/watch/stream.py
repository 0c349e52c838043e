"""One ListAndWatch stream opened with its first list, and the timings every follower shares.

A stream is dialled as the socket file it is (its inode kept, so a follower can tell a replaced socket), and
its first list read within a deadline: ``open_stream`` gives both, or raises ``StreamEnded`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone

from devctl.base.errors import DevctlError
from devctl.base.waits import within
from devctl.core.watch.sockets import inode_of
from devctl.model import Device, PluginStatus
from devctl.node.deviceplugin import DevicePluginClient
from devctl.node.rpc import check_socket

# How often a live stream checks that its socket file is still the one it dialled.
# A kubelet restart deletes every socket in the plugins dir
# (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go, Start -> cleanup); the
# kubelet then cannot reach a plugin until the plugin serves a new socket, even
# if our old connection still lives.
SOCKET_POLL = 0.25
# A connection that lived this long resets the backoff; a flapping stream does not.
STABLE_AFTER = 2.0
# When the oldest list not yet taken from a stream waited longer than this, take the newest
# instead: each list is the full list, and a person wants the present, not a queue of the past.
BEHIND = 0.1
# How often at most a stream says that it skipped lists to keep up.
SKIP_NOTICE_EVERY = 5.0
# How often the scouts list the plugins dir, and when they dial a failed socket again.
SCOUT_POLL = 0.2
SCOUT_RETRY = 1.0
SCOUT_RETRY_CAP = 8.0


def now() -> datetime:
    return datetime.now(timezone.utc)


class StreamEnded(DevctlError):
    """A stream session ended; the message says why, in one line, and ``status`` how a source is shown for it."""

    def __init__(self, message: str, status: PluginStatus = PluginStatus.UNREACHABLE):
        super().__init__(message)
        self.status = status


def exists(path: str | None) -> bool:
    return path is not None and os.path.exists(path)


@dataclass
class OpenStream:
    """A ListAndWatch stream with its first list already read: what a session starts from."""

    socket: str
    inode: int | None
    client: DevicePluginClient
    stream: AsyncIterator[tuple[Device, ...]]
    first: tuple[Device, ...]
    took: float  # seconds from the call to its first list

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.stream.aclose()  # type: ignore[attr-defined]
        await self.client.close()


async def open_stream(socket: str, timeout: float, first_within: float | None) -> OpenStream:
    """Dial ``socket`` and read its first list (within ``first_within`` seconds, or however long it takes)."""
    await check_socket(socket, timeout)
    inode = inode_of(socket)
    client = DevicePluginClient(socket, timeout)
    stream = client.list_and_watch(behind=BEHIND)
    try:
        clock = time.perf_counter()
        try:
            first = await within(stream.__anext__(), first_within)
        except asyncio.TimeoutError:
            raise StreamEnded(f"{socket}: no device list within {first_within:g}s", PluginStatus.TIMEOUT) from None
        except StopAsyncIteration:
            raise StreamEnded(f"{socket}: ListAndWatch ended before the first list") from None
    except BaseException:
        with contextlib.suppress(Exception):
            await stream.aclose()  # type: ignore[attr-defined]
        await client.close()
        raise
    return OpenStream(socket, inode, client, stream, first, time.perf_counter() - clock)
