"""The PCI function behind each device node host path an allocation names, by ``stat`` alone (issue 33).

A device plugin's Allocate reply gives a container device nodes by host path (``/dev/nvidia0``); the
checkpoint keeps them. On the node, ``stat(<root>/dev/nvidia0).st_rdev`` is the node's major:minor, and
``<sysfs>/dev/char/<major>:<minor>`` links into the device that owns it, under its PCI function (the same
walk as ``node/cdi`` makes for a CDI spec's node without numbers).

Stat only: a device node, a FIFO or a socket is never opened (opening some devices has effects, and a FIFO
would block); symlinks are followed under the root as the node would (``sockets.in_root``). Bounded: at most
``MAX_PATHS`` paths, and no new ``stat`` once ``budget`` seconds have passed; what was left out is one line.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass

from devctl.base.errors import ErrorKind
from devctl.model import SourceError
from devctl.node.cdi import Owners
from devctl.node.sockets import OutsideRoot, in_root

SOURCE = "host-nodes"
MAX_PATHS = 4096


@dataclass(frozen=True)
class HostNodes:
    """What the host paths lead to: a PCI address, or None for a char device no PCI function owns.

    A path that is missing, unreadable or no character device is not in ``nodes`` (nothing is known of it).
    """

    nodes: dict[str, str | None]
    errors: tuple[SourceError, ...] = ()


def trace_host_nodes(
    root: str, sysfs: str, paths: Iterable[str], *, limit: int = MAX_PATHS, budget: float | None = None
) -> HostNodes:
    """Each host path's character device traced major:minor → ``<sysfs>/dev/char`` → its PCI function."""
    owner_of = Owners(sysfs).of
    wanted = list(dict.fromkeys(p for p in paths if p.startswith("/")))
    errors: list[SourceError] = []
    if len(wanted) > limit:
        errors.append(
            SourceError(SOURCE, f"{len(wanted) - limit} host paths not traced (at most {limit})", ErrorKind.TOO_LARGE)
        )
        wanted = wanted[:limit]
    end = None if budget is None else time.monotonic() + budget
    nodes: dict[str, str | None] = {}
    for i, path in enumerate(wanted):
        if end is not None and time.monotonic() > end:
            message = f"{len(wanted) - i} host paths not traced within {budget:g} s"
            errors.append(SourceError(SOURCE, message, ErrorKind.TIMEOUT))
            break
        try:
            st = os.stat(in_root(root, path))
        except (OSError, OutsideRoot, ValueError):
            continue
        if not stat.S_ISCHR(st.st_mode):
            continue
        nodes[path] = owner_of(os.major(st.st_rdev), os.minor(st.st_rdev))[0]
    return HostNodes(nodes, tuple(errors))
