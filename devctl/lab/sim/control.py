"""The running simulator's control socket ``<root>/run/devctl/sim.ctl``, so another shell can drive it.

It speaks ``devctl.control``'s JSON lines, as the plugins' control sockets do:

    {"op": "info"}                           -> {"ok": true, "root": ..., "resources": [...], "pods": [...], ...}
    {"op": "restart-kubelet", "wait": true}  -> {"ok": true, "registered": [...]} | {"ok": false, "error": "..."}

``devctl sim restart-kubelet`` is the client; ``socat`` works too.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from devctl.base.errors import DevctlError
from devctl.lab.lineserver import LineServer
from devctl.node import control

Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


class SimNotRunning(DevctlError):
    """No simulator answers at that root; the message is one line."""


def control_socket(root: str) -> str:
    """Where the simulator of ``root`` listens: ``<root>/run/devctl/sim.ctl``."""
    return os.path.join(root, "run", "devctl", "sim.ctl")


class SimControlServer(LineServer):
    """Answers control requests with ``handlers[op](request)``; one connection may send many lines."""

    def __init__(self, path: str, handlers: Mapping[str, Handler]):
        super().__init__(path, self._dispatch)
        self.handlers = dict(handlers)

    async def _dispatch(self, request: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(str(request.get("op")))
        if handler is None:
            return {"ok": False, "error": f"unknown op {request.get('op')!r}; known: {', '.join(self.handlers)}"}
        return await handler(request)


async def request(root: str, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """Send one request to the simulator of ``root``; SimNotRunning when none answers there."""
    try:
        return await control.request(control_socket(root), message, timeout)
    except control.NotListening as e:
        raise SimNotRunning(f"no simulated node runs at {root} ({e.reason}); start one with: devctl sim") from None
    except control.AccessDenied as e:
        raise SimNotRunning(f"the simulated node at {root} refused: {e.reason} (it runs as another user)") from None
    except control.ControlSocketError as e:
        raise SimNotRunning(f"the simulated node at {root} did not answer ({e.reason})") from None
