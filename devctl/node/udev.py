"""Kernel device events (add, remove, change, bind, unbind) of the devices device plugins serve.

A GPU that falls off the bus shows up here first (a PCI ``remove``), and in
the plugin's ListAndWatch a moment later (the device turns Unhealthy);
``devctl watch --udev`` puts both on one timeline.

The pyudev monitor is a netlink socket: its file descriptor is watched with
``loop.add_reader`` and drained without blocking, so the event loop never
waits on it and no thread is needed.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from devctl.base.errors import DevctlError
from devctl.model.udev import KernelEvent

# GPUs and accelerators (pci, drm), NICs and their SR-IOV functions (net,
# infiniband), and devices handed to VMs or DPDK (vfio).
SUBSYSTEMS = ("pci", "drm", "net", "infiniband", "vfio")

# libudev only subscribes to udevd's events when udevd runs, which it tells by
# this file (systemd src/libsystemd/sd-device/device-monitor.c); otherwise its
# monitor silently receives nothing. In containers udevd does not run.
UDEV_CONTROL = "/run/udev/control"


class UdevUnavailable(DevctlError):
    """Kernel device events cannot be read here (no libudev, no netlink permission, ...)."""


def event_from_device(device: Any, when: datetime | None = None) -> KernelEvent:
    """A pyudev Device received from a monitor as a KernelEvent."""
    return KernelEvent(
        time=when or datetime.now(timezone.utc),
        action=device.action or "change",
        subsystem=device.subsystem or "",
        name=device.sys_name,
        devpath=device.device_path,
        driver=device.driver or None,
    )


def open_monitor(subsystems: Sequence[str] = SUBSYSTEMS, source: str | None = None) -> tuple[Any, str]:
    """A started, non-blocking pyudev monitor and the source it reads (``udev`` or ``kernel``).

    Without a running udevd the kernel's own uevents are read instead: they
    carry the same action, subsystem, path and driver, only earlier and
    without udev's database properties.
    """
    if source is None:
        source = "udev" if os.path.exists(UDEV_CONTROL) else "kernel"
    try:
        import pyudev

        monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source=source)
        for subsystem in subsystems:
            monitor.filter_by(subsystem)
        monitor.start()
        os.set_blocking(monitor.fileno(), False)
    except ImportError as e:
        raise UdevUnavailable(f"kernel device events cannot be read: {e}") from None
    except OSError as e:
        raise UdevUnavailable(f"kernel device events cannot be read: {e.strerror or e}") from None
    return monitor, source


async def kernel_events(
    subsystems: Sequence[str] = SUBSYSTEMS,
    *,
    source: str | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> AsyncIterator[KernelEvent]:
    """Yield kernel device events of ``subsystems`` as they happen, until the caller stops.

    Raises :class:`UdevUnavailable` (one line) when they cannot be read;
    ``on_notice`` hears what a person should know but that does not stop it
    (udevd not running, events lost to a full socket buffer).
    """
    monitor, used = open_monitor(subsystems, source)
    if used == "kernel" and source is None and on_notice is not None:
        on_notice(f"udev is not running here (no {UDEV_CONTROL}); reading the kernel's device events directly")
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[KernelEvent | OSError] = asyncio.Queue()

    def drain() -> None:
        while True:
            try:
                device = monitor.poll(timeout=0)
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    # The kernel drops uevents when the socket buffer is full; say so, keep going.
                    if on_notice is not None:
                        on_notice("some kernel device events were lost (netlink buffer full)")
                    continue
                queue.put_nowait(e)
                return
            if device is None:
                return
            queue.put_nowait(event_from_device(device))

    fd = monitor.fileno()
    loop.add_reader(fd, drain)
    try:
        while True:
            item = await queue.get()
            if isinstance(item, OSError):
                raise UdevUnavailable(f"reading kernel device events failed: {item.strerror or item}")
            yield item
    finally:
        loop.remove_reader(fd)
