"""A kernel device event (udev) as it joins a timeline: made by ``devctl.node.udev``, shown by every face."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class KernelEvent:
    """One kernel device event, as it joins the watch timeline.

    ``name`` is the kernel's name of the device (``0000:3b:00.0``, ``card0``,
    ``eth0``, ``mlx5_0``); ``driver`` the bound driver when the event names one.
    """

    time: datetime
    action: str
    subsystem: str
    name: str
    devpath: str
    driver: str | None = None

    @property
    def event(self) -> str:
        """The ``event`` value on the timeline: ``udev-add``, ``udev-remove``, ``udev-change``, ..."""
        return f"udev-{self.action}"
