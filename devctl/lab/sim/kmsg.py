"""The simulated node's kernel log: ``<root>/dev/kmsg``, a regular file in ``/dev/kmsg``'s record format.

Each record is ``PRI,SEQ,USEC,FLAGS;text`` and its continuation lines (`` KEY=value``), as the kernel's
``/dev/kmsg`` gives them (Documentation/ABI/testing/dev-kmsg), so ``devctl.node.kmsg`` reads it as it reads a
saved log. The node also writes ``<root>/proc/stat``'s ``btime`` (it "booted" an hour before it started),
from which a reader turns a record's microseconds since boot into wall time.

Lines come from the scenario's ``kernel:`` key (written at start, or ``after`` seconds after it) and from
``devctl sim kmsg TEXT`` through the control socket (op ``kmsg``). The text is escaped as the kernel
escapes it (a byte below 0x20, from 0x7f, or a backslash as ``\\xNN``), so one record stays one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.waits import cancel_and_wait
from devctl.lab.made import Made

KERN_WARNING = 4  # NVRM writes Xids at this level
MAX_TEXT = 8 * 1024  # what one line may hold (the reader cuts there too)
UPTIME_AT_START = 3600  # seconds the simulated node had been up when it started


class KernelScenarioError(DevctlError, ValueError):
    """A bad ``kernel:`` entry; the message is one line naming it."""


@dataclass(frozen=True)
class KernelLine:
    """One line the simulated kernel writes: ``after`` seconds after the node started (0: at start)."""

    text: str
    after: float = 0.0
    level: int = KERN_WARNING
    fields: tuple[tuple[str, str], ...] = ()  # dictionary lines: (("SUBSYSTEM", "pci"), ("DEVICE", "+pci:..."))


def _after(value: Any, where: str) -> float:
    text = str(value).strip()
    scale = 1.0
    if text.endswith("ms"):
        text, scale = text[:-2], 0.001
    elif text.endswith("s"):
        text = text[:-1]
    try:
        seconds = float(text) * scale
    except ValueError:
        raise KernelScenarioError(f"{where}.after: {value!r} is not a number of seconds (5, 2.5s, 300ms)") from None
    if not 0 <= seconds <= 86400:
        raise KernelScenarioError(f"{where}.after: {value!r} must be between 0 and a day")
    return seconds


def _line(item: Any, where: str) -> KernelLine:
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, Mapping):
        raise KernelScenarioError(f"{where}: a line of text or a mapping with text, after, level, fields")
    if stray := set(item) - {"text", "after", "level", "fields"}:
        raise KernelScenarioError(f"{where}: unknown field {sorted(stray)[0]!r} (text, after, level, fields)")
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise KernelScenarioError(f"{where}.text: the line's text is required")
    if len(text.encode()) > MAX_TEXT:
        raise KernelScenarioError(f"{where}.text: longer than {MAX_TEXT} bytes")
    level = item.get("level", KERN_WARNING)
    if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 7:
        raise KernelScenarioError(f"{where}.level: {level!r} is not a syslog level 0..7")
    fields = item.get("fields") or {}
    if not isinstance(fields, Mapping) or not all(isinstance(k, str) and k.isupper() for k in fields):
        raise KernelScenarioError(f"{where}.fields: a mapping of upper-case keys (SUBSYSTEM: pci)")
    return KernelLine(text, _after(item.get("after", 0), where), level, tuple((k, str(v)) for k, v in fields.items()))


def parse_kernel(value: Any) -> tuple[KernelLine, ...]:
    """The scenario's ``kernel:`` list: each a string (written at start) or ``{text, after, level, fields}``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise KernelScenarioError("kernel: a list of lines")
    return tuple(_line(item, f"kernel[{i}]") for i, item in enumerate(value))


def kernel_escape(text: str) -> bytes:
    """``text`` as the kernel writes a message in ``/dev/kmsg``: bytes < 0x20, >= 0x7f and ``\\`` as ``\\xNN``."""
    out = bytearray()
    for byte in text.encode("utf-8", "replace"):
        if byte < 0x20 or byte >= 0x7F or byte == 0x5C:
            out += b"\\x%02x" % byte
        else:
            out.append(byte)
    return bytes(out)


def format_record(seq: int, usec: int, line: KernelLine, facility: int = 0) -> bytes:
    """One record and its dictionary lines, each ending in a newline."""
    head = b"%d,%d,%d,-;" % (facility * 8 + line.level, seq, usec) + kernel_escape(line.text[:MAX_TEXT]) + b"\n"
    return head + b"".join(b" " + kernel_escape(f"{k}={v}") + b"\n" for k, v in line.fields)


class SimKmsg:
    """The simulated node's kernel log: lays out ``<root>/dev/kmsg`` and ``<proc>/stat``, appends records."""

    def __init__(self, root: str | os.PathLike[str], proc: str | os.PathLike[str], lines: tuple[KernelLine, ...] = ()):
        self.path = Path(root) / "dev" / "kmsg"
        self.stat = Path(proc) / "stat"
        self.lines = lines
        self.boot = int(time.time()) - UPTIME_AT_START
        self.seq = 0
        self._task: asyncio.Task[None] | None = None

    def lay_out(self, made: Made) -> None:
        """Write the boot time and the log with the lines due at start; both recorded as made."""
        made.makedirs(self.path.parent)
        made.makedirs(self.stat.parent)
        self.stat.write_text(f"cpu  0 0 0 0 0 0 0 0 0 0\nbtime {self.boot}\n")
        made.file(self.stat)
        self.path.write_bytes(b"")
        made.file(self.path)
        for line in self.lines:
            if line.after == 0:
                self.append(line)

    def append(self, line: KernelLine) -> int:
        """Append one record, stamped now; returns its sequence number."""
        seq = self.seq
        usec = max(0, int((time.time() - self.boot) * 1_000_000))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            os.write(fd, format_record(seq, usec, line))  # one write: a reader never sees half a record
        finally:
            os.close(fd)
        self.seq += 1
        return seq

    def start(self) -> None:
        """Write the delayed lines in their time (a task on the running loop)."""
        later = sorted((line for line in self.lines if line.after > 0), key=lambda line: line.after)
        if later:
            self._task = asyncio.create_task(self._later(later), name="kernel log")

    async def _later(self, lines: list[KernelLine]) -> None:
        started = time.monotonic()
        for line in lines:
            await asyncio.sleep(max(0.0, started + line.after - time.monotonic()))
            with contextlib.suppress(OSError):
                self.append(line)

    async def control(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Op ``kmsg``: ``{"text": ..., "level": 4}`` -> ``{"ok": true, "seq": N}``."""
        try:
            line = _line({k: v for k, v in message.items() if k in ("text", "level")}, "kmsg")
            return {"ok": True, "seq": self.append(line), "path": str(self.path)}
        except KernelScenarioError as e:
            return {"ok": False, "error": str(e)}
        except OSError as e:
            return {"ok": False, "error": f"cannot append to {self.path}: {e.strerror or e}"}

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
