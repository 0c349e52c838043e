"""Live control of a running in-process plugin from another shell.

Each running plugin listens on ``<control_dir>/<its socket name>.ctl`` (the CLI
uses ``<root>/run/devctl/plugins``, so ``DEVCTL_ROOT`` finds the simulator's
plugins as well). The protocol is one JSON object per line each way:

    {"op": "info"}                                   -> {"ok": true, "resource": ..., "socket": ..., "devices": [...]}
    {"op": "set-health", "id": ID, "health": H}      -> {"ok": true} | {"ok": false, "error": "..."}
    {"op": "add", "id": ID, "numa": [0], "health": H}
    {"op": "remove", "id": ID}

A line protocol on a plain unix socket keeps the control path free of gRPC, and
anyone can drive it with ``socat`` when devctl is not at hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from devctl.model import HEALTHY, UNHEALTHY, Device
from devctl.serial import to_plain

if TYPE_CHECKING:
    from devctl.plugin.server import DevicePluginServer

SUFFIX = ".ctl"
LINE_LIMIT = 16 * 1024 * 1024  # a device list of thousands of devices still fits in one line


class ControlError(Exception):
    """The plugin could not be reached or did not answer; the message is one line."""


class NoPlugin(ControlError):
    """No running plugin serves the resource."""


def default_control_dir(root: str) -> str:
    """Where the CLI and the simulator put control sockets: ``<root>/run/devctl/plugins``."""
    return os.path.join(root, "run", "devctl", "plugins")


def control_path(control_dir: str, socket_name: str) -> str:
    return os.path.join(control_dir, socket_name + SUFFIX)


def health_value(text: str) -> str:
    """``healthy``/``unhealthy`` in any case as the wire's ``Healthy``/``Unhealthy``; ValueError otherwise."""
    for value in (HEALTHY, UNHEALTHY):
        if text.lower() == value.lower():
            return value
    raise ValueError(f"health must be {HEALTHY} or {UNHEALTHY}, not {text!r}")


class ControlServer:
    """Answers control requests for one DevicePluginServer on its ``.ctl`` socket."""

    def __init__(self, plugin: DevicePluginServer, control_dir: str):
        self.plugin = plugin
        self.path = control_path(control_dir, plugin.spec.socket)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, self.path, limit=LINE_LIMIT)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(json.dumps(self.handle(line)).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError):
            pass  # the client went away, or sent a line past the limit
        finally:
            writer.close()

    def handle(self, line: bytes) -> dict[str, Any]:
        """One request line to one reply; every failure becomes ``{"ok": false, "error": ...}``."""
        try:
            request = json.loads(line)
            if not isinstance(request, Mapping):
                raise ValueError("a request is a JSON object")
            reply = self._apply(request)
        except (ValueError, KeyError, TypeError) as e:  # DeviceError is a ValueError
            message = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            return {"ok": False, "error": message}
        return {"ok": True, **reply}

    def _apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        plugin = self.plugin
        op = request.get("op")
        if op == "info":
            return {
                "resource": plugin.spec.resource,
                "socket": plugin.socket_path,
                "registered": plugin.registered,
                "devices": to_plain(plugin.devices),
            }
        if op == "set-health":
            plugin.set_health(str(request["id"]), health_value(str(request["health"])))
        elif op == "add":
            numa = request.get("numa") or []
            plugin.add(
                Device(
                    id=str(request["id"]),
                    health=health_value(str(request.get("health", HEALTHY))),
                    numa_nodes=tuple(int(n) for n in numa),
                )
            )
        elif op == "remove":
            plugin.remove(str(request["id"]))
        else:
            raise ValueError(f"unknown op {op!r}: use info, set-health, add or remove")
        return {}


async def _exchange(path: str, request: Mapping[str, Any]) -> dict[str, Any]:
    reader, writer = await asyncio.open_unix_connection(path, limit=LINE_LIMIT)
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        line = await reader.readline()
    finally:
        writer.close()
    if not line:
        raise ConnectionError("closed without an answer")
    reply = json.loads(line)
    if not isinstance(reply, dict):
        raise ValueError("not a JSON object")
    return reply


async def _ask_all(control_dir: str, timeout: float) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """``info`` from every ``.ctl`` socket at once: the answers, and the sockets we may not open."""
    try:
        paths = sorted(e.path for e in os.scandir(control_dir) if e.name.endswith(SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        return [], [control_dir]

    async def info(path: str) -> dict[str, Any] | PermissionError | None:
        try:
            return await asyncio.wait_for(_exchange(path, {"op": "info"}), timeout)
        except PermissionError as e:
            return e
        except (OSError, ValueError, asyncio.TimeoutError):
            return None

    replies = await asyncio.gather(*(info(p) for p in paths))
    pairs = list(zip(paths, replies, strict=True))
    answered = [(path, reply) for path, reply in pairs if isinstance(reply, dict)]
    denied = [path for path, reply in pairs if isinstance(reply, PermissionError)]
    return answered, denied


async def running(control_dir: str, timeout: float) -> list[tuple[str, dict[str, Any]]]:
    """Every running plugin's control socket with its ``info`` reply.

    All ``.ctl`` sockets are asked at once under the deadline; stale ones (a
    plugin killed without cleaning up), silent and forbidden ones are left out.
    """
    return (await _ask_all(control_dir, timeout))[0]


async def control(control_dir: str, resource: str, request: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """Send ``request`` to the running plugin that serves ``resource`` and return its reply.

    A reply with ``"ok": false`` (unknown device, bad health) is returned as is;
    NoPlugin when no running plugin serves the resource, ControlError when one
    may not be asked (permission denied) or does not answer within ``timeout``.
    """
    answered, denied = await _ask_all(control_dir, timeout)
    path = next((p for p, info in answered if info.get("resource") == resource), None)
    if path is None and denied:
        raise ControlError(f"{denied[0]}: permission denied (plugins run as another user; try as root)")
    if path is None:
        raise NoPlugin(f"no running devctl plugin serves {resource} (looked in {control_dir})")
    try:
        return await asyncio.wait_for(_exchange(path, request), timeout)
    except asyncio.TimeoutError:
        raise ControlError(f"the plugin serving {resource} did not answer within {timeout:g}s ({path})") from None
    except (OSError, ValueError) as e:
        raise ControlError(f"the plugin serving {resource} failed to answer: {e} ({path})") from None
