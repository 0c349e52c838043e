"""A running in-process DRA driver's control socket: ``devctl plugin set-health|add|remove DRIVER POOL/DEVICE``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from devctl.lab.lineserver import LineServer
from devctl.lab.plugin.control import control_path
from devctl.lab.plugin.dra_spec import UNKNOWN, DraDevice
from devctl.model import HEALTHY, UNHEALTHY

if TYPE_CHECKING:
    from devctl.lab.plugin.dra import DraDriver


def health_value(text: str) -> str:
    for value in (HEALTHY, UNHEALTHY, UNKNOWN):
        if text.lower() == value.lower():
            return value
    raise ValueError(f"health must be {HEALTHY}, {UNHEALTHY} or {UNKNOWN}, not {text!r}")


class DraControlServer(LineServer):
    """``devctl plugin set-health|add|remove DRIVER POOL/DEVICE`` for a running driver, as for device plugins.

    Its ``info`` names the driver as ``resource`` so that the device plugins'
    control client finds it by the same argument; ``kind`` says it is DRA.
    """

    def __init__(self, driver: DraDriver, control_dir: str):
        super().__init__(control_path(control_dir, f"dra-{driver.spec.driver}"), self._answer)
        self.driver = driver

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self._apply(request)
        except (ValueError, KeyError, TypeError) as e:
            return {"ok": False, "error": f"missing field {e}" if isinstance(e, KeyError) else str(e)}
        return {"ok": True, **reply}

    def _apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        d = self.driver
        op = request.get("op")
        if op == "info":
            info: dict[str, Any] = {
                "kind": "dra",
                "resource": d.spec.driver,
                "pool": d.spec.pool,
                "socket": d.socket_path,
                "registration": d.registration_path,
                "registered": d.registered,
            }
            if request.get("devices", True) is not False:  # as a device plugin's control socket: the lists are long
                info["devices"] = [
                    {"id": f"{d.spec.pool}/{x.name}", "health": x.health, "numa_nodes": list(x.numa_nodes)}
                    for x in d.devices
                ]
                info["prepared"] = {uid: list(names) for uid, names in d.prepared.items()}
            return info
        if op == "set-health":
            d.set_health(str(request["id"]), health_value(str(request["health"])), str(request.get("message", "")))
        elif op == "add":
            numa = tuple(int(n) for n in request.get("numa") or [])
            health = health_value(str(request.get("health", HEALTHY)))
            d.add(DraDevice(name=str(request["id"]), numa_nodes=numa, health=health))
        elif op == "remove":
            d.remove(str(request["id"]))
        else:
            raise ValueError(f"unknown op {op!r}: use info, set-health, add or remove")
        return {}
