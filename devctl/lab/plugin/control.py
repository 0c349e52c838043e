"""Live control of a running in-process plugin from another shell.

Each running plugin listens on ``<control_dir>/<its socket name>.ctl`` (the CLI
uses ``<root>/run/devctl/plugins``, so ``DEVCTL_ROOT`` finds the simulator's
plugins as well). The protocol is one JSON object per line each way:

    {"op": "info"}                                   -> {"ok": true, "resource": ..., "socket": ..., "devices": [...]}
    {"op": "info", "devices": false}                 -> the same without "devices" (who serves what, cheaply)
    {"op": "set-health", "id": ID, "health": H}      -> {"ok": true} | {"ok": false, "error": "..."}
    {"op": "add", "id": ID, "numa": [0], "health": H}
    {"op": "remove", "id": ID}

The socket speaks ``devctl.control``'s JSON lines, as the simulator's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from devctl.base.errors import DevctlError
from devctl.lab.lineserver import LineServer
from devctl.lab.plugin.spec import UnknownDevice
from devctl.model import HEALTHY, UNHEALTHY, Device
from devctl.model.serial import to_plain
from devctl.node.control import ControlSocketError, request
from devctl.node.controlsockets import SUFFIX, ask_all, control_path, default_control_dir, running

if TYPE_CHECKING:
    from devctl.lab.plugin.server import DevicePluginServer

__all__ = [
    "SUFFIX",
    "ControlError",
    "ControlServer",
    "NoPlugin",
    "control",
    "control_path",
    "default_control_dir",
    "health_value",
    "running",
]


class ControlError(DevctlError):
    """The plugin could not be reached or did not answer; the message is one line."""


class NoPlugin(ControlError):
    """No running plugin serves the resource."""


def health_value(text: str) -> str:
    """``healthy``/``unhealthy`` in any case as the wire's ``Healthy``/``Unhealthy``; ValueError otherwise."""
    for value in (HEALTHY, UNHEALTHY):
        if text.lower() == value.lower():
            return value
    raise ValueError(f"health must be {HEALTHY} or {UNHEALTHY}, not {text!r}")


class ControlServer(LineServer):
    """Answers control requests for one DevicePluginServer on its ``.ctl`` socket."""

    def __init__(self, plugin: DevicePluginServer, control_dir: str):
        super().__init__(control_path(control_dir, plugin.spec.socket), self._answer)
        self.plugin = plugin

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """A refusal (unknown device, bad health, missing field) becomes ``{"ok": false, "error": ...}``.

        ``"unknown": true`` marks a device ID the plugin does not have: a name that does not exist, not a bad request.
        """
        try:
            reply = self._apply(request)
        except (ValueError, KeyError, TypeError) as e:  # DeviceError is a ValueError
            message = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            return {"ok": False, "error": message, "unknown": isinstance(e, UnknownDevice)}
        return {"ok": True, **reply}

    def _apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        plugin = self.plugin
        op = request.get("op")
        if op == "info":
            info = {"resource": plugin.spec.resource, "socket": plugin.socket_path, "registered": plugin.registered}
            if request.get("devices", True) is not False:
                info["devices"] = to_plain(plugin.devices)
            return info
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


async def control(control_dir: str, resource: str, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """Send ``message`` to the running plugin that serves ``resource`` and return its reply.

    A reply with ``"ok": false`` (unknown device, bad health) is returned as is;
    NoPlugin when no running plugin serves the resource, ControlError when one
    may not be asked (permission denied) or does not answer within ``timeout``.
    """
    answered, denied = await ask_all(control_dir, timeout)
    path = next((p for p, info in answered if info.get("resource") == resource), None)
    if path is None and denied:
        raise ControlError(f"{denied[0]}: permission denied (plugins run as another user; try as root)")
    if path is None:
        from devctl.base.names import likely

        guess = likely(resource, (str(info.get("resource") or "") for _, info in answered))
        hint = f"did you mean {guess}? " if guess else ""
        raise NoPlugin(f"no running devctl plugin serves {resource} ({hint}looked in {control_dir})")
    try:
        return await request(path, message, timeout)
    except ControlSocketError as e:
        raise ControlError(f"the plugin serving {resource} failed to answer: {e}") from None
