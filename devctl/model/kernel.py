"""The kernel's log as devctl reads it: one record, what it says of a device, and what a read found.

``devctl.node.kmsg`` makes ``KernelRecord`` values from ``/dev/kmsg`` (or a saved file in its format);
``devctl.analyze.kernel`` fills in ``device`` (a ``DeviceMention``) from the record's text. Every string
here came from the kernel or a file: it passes ``devctl.base.escape.escape`` before a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from devctl.model import SourceError

# The ``kind`` values of a DeviceMention (cli.md's ``kind`` for source ``kernel``).
XID = "xid"  # NVRM: Xid (PCI:0000:3b:00): 79, ...
AER = "aer"  # PCIe Advanced Error Reporting: the device the error concerns
FALLEN_OFF_BUS = "fallen-off-bus"  # "GPU has fallen off the bus" without an Xid number on the line
PCI = "pci"  # any other driver line naming a PCI address (mlx5_core 0000:5e:00.0: ...)


@dataclass(frozen=True)
class DeviceMention:
    """What one kernel line says of one device.

    ``pci`` is the kernel's spelling (``0000:3b:00.0``; an Xid line names no function: ``.0``),
    ``None`` when the line names none it could tell; ``xid`` the NVIDIA Xid number; ``meaning`` our
    words for it (``None`` for an Xid devctl has no words for: it reads ``Xid N``); ``driver`` the
    driver or subsystem that wrote the line (``nvidia``, ``pcieport``, ``mlx5_core``) when it says;
    ``gpu_uuid`` the UUID of ``NVRM: GPU at PCI:...: GPU-<uuid>`` lines.
    """

    kind: str
    pci: str | None = None
    xid: int | None = None
    meaning: str | None = None
    driver: str | None = None
    gpu_uuid: str | None = None

    @property
    def what(self) -> str:
        """The one line a person reads: ``Xid 79: GPU has fallen off the bus``, ``AER: ...``."""
        if self.kind == XID:
            return f"Xid {self.xid}: {self.meaning}" if self.meaning else f"Xid {self.xid}"
        return self.meaning or self.kind


@dataclass(frozen=True)
class KernelRecord:
    """One record of the kernel's log (``PRI,SEQ,USEC,FLAGS[,...];text`` and its continuation lines).

    ``seq`` is the kernel's 64-bit sequence number; ``usec`` microseconds since boot on the kernel's
    printk clock (it does not run while the machine is suspended); ``time`` that instant in UTC,
    from the boot time of ``<proc>/stat`` (``None`` when the boot time is unknown: never guessed).
    ``level`` is the syslog priority (0 emerg .. 7 debug), ``facility`` the syslog facility: 0 is the
    kernel itself, and userspace cannot write facility 0 to ``/dev/kmsg`` (a line written by a process
    has 1 or more). ``text`` is the message line as the kernel wrote it (the kernel already writes
    non-printable bytes and a newline inside a message as ``\\xNN``), cut at 8 KiB (``cut``).
    ``fields`` are the ``KEY=value`` dictionary lines that follow it (`` SUBSYSTEM=pci``,
    `` DEVICE=+pci:0000:3b:00.0``), in order; ``more`` any other continuation line (a saved log's),
    kept apart rather than joined so that ``text`` stays one line. ``caller`` is the ``caller=T123``
    of a kernel built with CONFIG_PRINTK_CALLER. ``device`` is filled by ``devctl.analyze.kernel``.
    """

    seq: int
    usec: int
    time: datetime | None
    level: int
    facility: int
    text: str
    fields: tuple[tuple[str, str], ...] = ()
    more: tuple[str, ...] = ()
    caller: str | None = None
    cut: bool = False
    device: DeviceMention | None = None

    @property
    def from_kernel(self) -> bool:
        """Written by the kernel (facility 0), not by a process through ``/dev/kmsg``."""
        return self.facility == 0

    def field(self, key: str) -> str | None:
        """The value of the dictionary line ``key`` (``DEVICE``, ``SUBSYSTEM``), ``None`` without one."""
        for name, value in self.fields:
            if name == key:
                return value
        return None


@dataclass(frozen=True)
class RecordsLost:
    """A gap in the sequence: ``count`` records between ``after`` and ``before`` were never read.

    On the live device the kernel overwrote them before devctl read them (``read()`` said EPIPE);
    in a saved file they were missing from it. ``after`` is ``None`` when the gap is before the first
    record read (the kernel had already dropped the oldest): that is not reported as a loss.
    """

    after: int
    before: int

    @property
    def count(self) -> int:
        """How many sequence numbers were skipped."""
        return self.before - self.after - 1

    @property
    def notice(self) -> str:
        """One line for a person."""
        plural = "" if self.count == 1 else "s"
        return f"kernel log: {self.count} record{plural} lost (sequence {self.after + 1}..{self.before - 1})"


@dataclass(frozen=True)
class KmsgRead:
    """What one read of the kernel log found.

    ``records`` in the order read (at most the reader's bound, the newest kept); ``lost`` each sequence
    gap; ``skipped`` lines that were not records (junk, or a continuation with no record before it);
    ``dropped`` records read but pushed out by the bound; ``boot_time`` the boot time used for ``time``
    (``None``: unknown, and every record's ``time`` is ``None``); ``error`` set when the log could not be
    read at all (no permission, missing, a FIFO), and then there are no records.
    """

    path: str
    records: tuple[KernelRecord, ...] = ()
    lost: tuple[RecordsLost, ...] = ()
    skipped: int = 0
    dropped: int = 0
    boot_time: datetime | None = None
    error: SourceError | None = None

    @property
    def notices(self) -> tuple[str, ...]:
        """One line each: the gaps, then the lines skipped and the records dropped by the bound."""
        lines = [gap.notice for gap in self.lost]
        if self.skipped:
            lines.append(
                f"kernel log: {self.skipped} line{'' if self.skipped == 1 else 's'} that are not records skipped"
            )
        if self.dropped:
            lines.append(f"kernel log: {self.dropped} older records not kept (the bound is {len(self.records)})")
        return tuple(lines)
