"""The kubelet's log lines about one pod: from a log file read from its end, or from ``journalctl -u kubelet``.

Bounded both ways: a file is read only in its last ``TAIL_BYTES`` (8 MiB; a log of several GiB costs
the same as a small one), the journal only for the last hour and the last 20,000 lines, under a
deadline (a journalctl that hangs is killed). Only lines that name the pod as a whole token (its UID, or
``namespace/name`` as klog's ``pod="ns/name"`` spells it, never as the start of ``ns/name10``) are kept,
at most ``MAX_LINES`` of them, the newest. Read-only: nothing is written, no unit is touched.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterable

from devctl.base.waits import within
from devctl.model.runtime import LogLine
from devctl.node.files import FileReadError, FileRefused, open_regular

TAIL_BYTES = 8 * 1024 * 1024
MAX_LINES = 50
MAX_LINE_CHARS = 2000
JOURNAL_ARGS = ("-u", "kubelet", "--no-pager", "-o", "short-iso", "--since", "-1h", "-n", "20000")
_NO_LIMIT = 1 << 62

# klog's header (``E1203 13:00:00.123456 1234 file.go:12] ...``) and journalctl's short-iso stamp.
_KLOG = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})(?:\.\d+)?\s")
_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\S*\s")


def line_time(line: str) -> str | None:
    """The time a klog or short-iso line carries: ``2026-12-03T13:00:00``, or ``12-03 13:00:00`` (klog has no year)."""
    if m := _ISO.match(line):
        return m.group(1)
    if m := _KLOG.match(line):
        return f"{m.group(1)}-{m.group(2)} {m.group(3)}"
    return None


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def names(line: str, key: str) -> bool:
    """Whether ``line`` holds ``key`` as a whole token: ``ns/name`` is never the start of ``ns/name10``,
    ``ns/name-b`` or ``ns/name.b``, nor the end of ``xns/name``; a full stop that ends a sentence still ends it."""
    at = line.find(key)
    while at >= 0:
        end = at + len(key)
        before = line[at - 1] if at else " "
        after = line[end : end + 2]
        next_ = after[1:2] if after[:1] == "." else after[:1]  # a dot then a name character goes on the name
        if before not in _NAME_CHARS and before != "." and next_ not in _NAME_CHARS:
            return True
        at = line.find(key, at + 1)
    return False


def matching(lines: Iterable[str], needles: Iterable[str]) -> tuple[LogLine, ...]:
    """The last ``MAX_LINES`` lines naming any of ``needles`` as a whole token, each cut to ``MAX_LINE_CHARS``."""
    keys = [n for n in needles if n]
    found = [ln for ln in lines if any(names(ln, k) for k in keys)]
    return tuple(LogLine(line_time(ln), ln[:MAX_LINE_CHARS]) for ln in found[-MAX_LINES:])


def tail_text(path: str, limit: int = TAIL_BYTES) -> list[str]:
    """The whole lines of the last ``limit`` bytes of the regular file ``path``; raises FileReadError.

    Never opens a device, FIFO or socket (devctl.node.files); a first line cut by the window is dropped.
    """
    try:
        fd, size = open_regular(path, _NO_LIMIT, None)
    except FileRefused as refused:
        raise _read_error(path, refused) from None
    try:
        start = max(0, size - limit)
        data = os.pread(fd, limit, start)
    except OSError as err:
        raise _read_error(path, FileRefused(err.strerror or str(err), err)) from None
    finally:
        os.close(fd)
    if start > 0:  # the window's first line is cut: dropped, up to a newline or a hole of NULs
        cut = min((i for i in (data.find(b"\n"), data.find(b"\0")) if i >= 0), default=len(data))
        data = data[cut:]
    # A hole (copytruncate's NULs, a sparse file) ends the line before it.
    return re.sub(rb"\0+", b"\n", data).decode("utf-8", "replace").splitlines()


def _read_error(path: str, refused: FileRefused) -> FileReadError:
    from devctl.model import ErrorKind

    kind = ErrorKind.OTHER if refused.error is None else ErrorKind.of_oserror(refused.error)
    return FileReadError(path, refused.reason, kind)


def file_lines(path: str, needles: Iterable[str]) -> tuple[LogLine, ...]:
    """The lines about the pod in the kubelet log file ``path`` (its last 8 MiB); raises FileReadError."""
    return matching(tail_text(path), needles)


def journalctl() -> str | None:
    """journalctl's path when the node has one, else None."""
    return shutil.which("journalctl")


async def journal_lines(needles: Iterable[str], timeout: float, program: str | None = None) -> tuple[LogLine, ...]:
    """The lines about the pod in the kubelet's journal (the last hour); raises OSError or TimeoutError.

    journalctl runs with ``JOURNAL_ARGS`` and is killed at ``timeout``; at most ``TAIL_BYTES`` of its output are read.
    """
    exe = program or journalctl()
    if exe is None:
        raise FileNotFoundError("journalctl: not on this node")
    proc = await asyncio.create_subprocess_exec(
        exe,
        *JOURNAL_ARGS,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        data = await within(_read_bounded(proc.stdout), timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    return matching(data.decode("utf-8", "replace").splitlines(), needles)


async def _read_bounded(stream: asyncio.StreamReader | None) -> bytes:
    """What ``stream`` says until its end, at most ``TAIL_BYTES``."""
    chunks: list[bytes] = []
    left = TAIL_BYTES
    while stream is not None and left > 0 and (chunk := await stream.read(min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
