"""Running devctl plugins, as the node shows them: their control sockets and what each says it serves.

A devctl plugin (``devctl plugin serve``, the simulator's plugins) listens on
``<root>/run/devctl/plugins/<its socket name>.ctl`` beside its plugin socket;
its ``info`` reply names the resource and the plugin socket. The socket
resolver (``devctl.core.collect``, ``devctl.node.sockets``) reads them as one more
source, so this side lives in ``node/``; the server side is ``devctl.lab.plugin.control``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from devctl.node.control import AccessDenied, ControlSocketError, request

SUFFIX = ".ctl"


def default_control_dir(root: str) -> str:
    """Where the CLI and the simulator put control sockets: ``<root>/run/devctl/plugins``."""
    return os.path.join(root, "run", "devctl", "plugins")


def control_path(control_dir: str, socket_name: str) -> str:
    return os.path.join(control_dir, socket_name + SUFFIX)


async def ask_all(control_dir: str, timeout: float) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """``info`` without devices from every ``.ctl`` socket at once: the answers, and the sockets we may not open."""
    try:
        paths = sorted(e.path for e in os.scandir(control_dir) if e.name.endswith(SUFFIX))
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        return [], [control_dir]

    async def info(path: str) -> dict[str, Any] | AccessDenied | None:
        try:
            # Without the devices: who serves what is all this asks, and a DRA driver's list is 30 KB for 250.
            return await request(path, {"op": "info", "devices": False}, timeout)
        except AccessDenied as e:
            return e
        except ControlSocketError:
            return None

    replies = await asyncio.gather(*(info(p) for p in paths))
    pairs = list(zip(paths, replies, strict=True))
    answered = [(path, reply) for path, reply in pairs if isinstance(reply, dict)]
    denied = [path for path, reply in pairs if isinstance(reply, AccessDenied)]
    return answered, denied


async def running(control_dir: str, timeout: float) -> list[tuple[str, dict[str, Any]]]:
    """Every running plugin's control socket with its ``info`` reply.

    All ``.ctl`` sockets are asked at once under the deadline; stale ones (a
    plugin killed without cleaning up), silent and forbidden ones are left out.
    """
    return (await ask_all(control_dir, timeout))[0]
