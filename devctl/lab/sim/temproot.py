"""Temporary roots of ``devctl sim`` and ``devctl demo``: fresh for each run, removed at its end, swept after a kill.

A run removes its own root when it ends, whatever ends it (see
``devctl.cli.signals``), but SIGKILL, a crash or a power cut leaves it in
/tmp. So each temporary root records its owner (pid, the process' start time,
and the boot it ran in: a pid alone is reused), and every new run first removes
the roots of its kind whose owner is gone. A root is only ever removed when all
of these hold: its name has our prefix, it is a real directory (not a symlink)
of mode 0700 owned by this user, its owner record is a regular file of this
user that names a process that no longer runs. When anything is unclear (no
record, /proc unreadable) the root is kept.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from pathlib import Path

from devctl.lab.made import Made

log = logging.getLogger("devctl.lab.sim")

TMP = "/tmp"  # short: every socket path of the node must fit in 107 bytes
OWNER = ".devctl-owner"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _boot_id() -> str | None:
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """The process' start time in clock ticks since boot (/proc/PID/stat field 22), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    fields = text[text.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def owner_record() -> dict[str, object]:
    """Who this process is, in a form that still tells it apart after its pid is reused."""
    pid = os.getpid()
    return {"pid": pid, "start": _start_time(pid), "boot": _boot_id()}


def create(prefix: str, made: Made) -> Path:
    """Remove dead runs' roots of ``prefix``, then make a fresh root (recorded in ``made``) with our owner record."""
    sweep(prefix)
    root = made.temp_dir(prefix, TMP)
    owner = os.path.join(root, OWNER)
    fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        json.dump(owner_record(), f)
    made.file(owner)
    return Path(root)


def _owner_gone(root: str) -> bool:
    """Whether ``root`` is one of ours whose owner no longer runs; False whenever that is not certain."""
    me = os.geteuid()
    try:
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != me or stat.S_IMODE(st.st_mode) != 0o700:
            return False
        fd = os.open(os.path.join(root, OWNER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != me or info.st_size > 4096:
            return False
        try:
            record = json.loads(f.read())
            pid, start, boot = int(record["pid"]), record["start"], record["boot"]
        except (ValueError, KeyError, TypeError):
            return False
    if boot is not None and boot != _boot_id():
        return True  # recorded in an earlier boot: every process of it is gone
    if not os.path.isdir("/proc/self"):
        return False  # no /proc to ask: keep it
    now = _start_time(pid)
    return now is None or (start is not None and now != start)


def sweep(prefix: str) -> list[str]:
    """Remove the temporary roots of ``prefix`` whose owner is gone; the paths removed."""
    try:
        with os.scandir(TMP) as entries:
            candidates = [e.path for e in entries if e.name.startswith(prefix)]
    except OSError:
        return []
    removed = []
    for root in candidates:
        if _owner_gone(root):
            shutil.rmtree(root, ignore_errors=True)  # fd-based on Linux: never follows a symlink out
            log.info("removed %s, left by a run that was killed", root)
            removed.append(root)
    return removed
