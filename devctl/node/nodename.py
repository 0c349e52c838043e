"""The node's name as the kubelet registers its Node object, for hints that tell a person what to type.

The kubelet names its Node ``--hostname-override`` when it is given, else the
host's name, trimmed and lower-cased (k8s.io/component-helpers/node/util
GetHostname). devctl finds the kubelet among ``<proc>/*`` (the process named
``kubelet`` by its ``comm``, whose argv[0]'s basename is ``kubelet``) and takes its last
``--hostname-override``; a kubelet without one is named by
``<root>/etc/hostname``. Several kubelets that disagree, a name that is no
DNS subdomain (RFC 1123, as Kubernetes requires of a Node's name), or nothing
readable: ``None``, and hints keep ``<node>``.

Read-only and bounded: at most ``MAX_PIDS`` process directories, each one's
``comm`` (a few bytes) and only a kubelet's ``cmdline``, through the safe reader
(devctl.node.files.read_regular: a regular file, at most ``MAX_CMDLINE`` bytes),
the hostname file likewise. Never raises.
"""

from __future__ import annotations

import os
import re

from devctl.node.files import FileRefused, read_regular

MAX_PIDS = 100_000
MAX_CMDLINE = 256 * 1024
MAX_HOSTNAME = 4096
MAX_COMM = 64  # the kernel's comm is at most 15 bytes and a newline
FLAG = "--hostname-override"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def valid(name: str) -> str | None:
    """``name`` as the kubelet makes it (trimmed, lower case) when it can name a Node, else None."""
    name = name.strip().lower()
    return name if len(name) <= 253 and _NAME.fullmatch(name) else None


def _read(path: str, limit: int) -> bytes | None:
    try:
        return read_regular(path, limit)
    except (FileRefused, OSError):
        return None


def override(argv: list[str]) -> str | None:
    """The value of the last ``--hostname-override`` (``=VALUE`` or ``VALUE`` next) in ``argv``; None without one."""
    value = None
    for i, arg in enumerate(argv):
        if arg.startswith(FLAG + "="):
            value = arg[len(FLAG) + 1 :]
        elif arg == FLAG and i + 1 < len(argv):
            value = argv[i + 1]
    return value or None


def kubelet_argvs(proc: str) -> list[list[str]]:
    """The command lines of the processes under ``proc`` whose argv[0] is a ``kubelet``."""
    try:
        with os.scandir(proc) as entries:
            pids = [e.name for e in entries if e.name.isascii() and e.name.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids[:MAX_PIDS]:
        # The name first: a command line is read only for a process the kernel calls kubelet.
        comm = _read(f"{proc}/{pid}/comm", MAX_COMM)
        if comm is None or comm.strip() != b"kubelet":
            continue
        data = _read(f"{proc}/{pid}/cmdline", MAX_CMDLINE)
        if not data:  # gone, closed to us, or a kernel thread (an empty command line)
            continue
        argv = data.decode("utf-8", "replace").split("\0")
        if os.path.basename(argv[0]) == "kubelet":
            found.append(argv[1:])
    return found


def node_name(proc: str, root: str) -> str | None:
    """The kubelet's node name as read under ``proc`` and ``root``, or None when unknown (see the module)."""
    hostname: str | None = None

    def host() -> str | None:
        nonlocal hostname
        if hostname is None:
            data = _read(os.path.join(root or "/", "etc/hostname"), MAX_HOSTNAME)
            hostname = valid(data.decode("utf-8", "replace")) or "" if data else ""
        return hostname or None

    names = set()
    for argv in kubelet_argvs(proc) if proc else []:
        given = override(argv)
        names.add(valid(given) if given is not None else host())
    if not names:
        return host()
    return names.pop() if len(names) == 1 else None


__all__ = ["node_name", "override", "valid"]
