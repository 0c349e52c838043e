"""``devctl watch --udev``: kernel device events on the plugin timeline.

The end-to-end test runs in private mount and network namespaces (``unshare``):
there it marks udevd as running with a tmpfs on /run, and sends a device event
the way udevd does — a ``libudev`` message on netlink group 2 — which pyudev's
real monitor receives through its real kernel filter. Nothing reaches the
host's /run or its udev listeners. Where namespaces cannot be made, it is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devctl.model.udev import KernelEvent
from devctl.node.udev import event_from_device

TESTS = Path(__file__).resolve().parent
NETLINK_KOBJECT_UEVENT = 15
UDEV_GROUP = 2  # udevd's multicast group; the kernel's own is 1
UDEV_MONITOR_MAGIC = 0xFEEDCAFE
_M = 0x5BD1E995


def murmur2(data: bytes, seed: int = 0) -> int:
    """MurmurHash2, which libudev's in-kernel socket filter uses to match the subsystem of a udevd message."""
    h = (seed ^ len(data)) & 0xFFFFFFFF
    whole = len(data) // 4 * 4
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * _M) & 0xFFFFFFFF
        h = ((h * _M) & 0xFFFFFFFF) ^ k
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * _M) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * _M) & 0xFFFFFFFF
    return h ^ (h >> 15)


def send_udev_event(properties: dict[str, str]) -> None:
    """Broadcast a device event as udevd does (systemd sd-device/device-monitor.c, device_monitor_send_device)."""
    body = b"".join(f"{k}={v}".encode() + b"\0" for k, v in properties.items())
    header = struct.pack(
        "=8sIIIIIIII",
        b"libudev",
        socket.htonl(UDEV_MONITOR_MAGIC),
        40,  # header size
        40,  # properties offset
        len(body),
        socket.htonl(murmur2(properties["SUBSYSTEM"].encode())),
        0,  # devtype hash
        0,  # tag bloom filter, high and low
        0,
    )
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_KOBJECT_UEVENT) as s:
        s.bind((0, 0))
        s.sendto(header + body, (0, UDEV_GROUP))


def test_murmur2_matches_the_reference_vectors() -> None:
    # Austin Appleby's MurmurHash2, seed 0.
    assert murmur2(b"") == 0
    assert murmur2(b"hello") == 0xE56129CB


def test_an_event_from_a_udev_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a monitor hands over (a pyudev Device) becomes a KernelEvent with action, name and driver."""
    import pyudev

    # udev_device_new_from_environment builds a device from the variables udevd passes to RUN programs.
    for key, value in {
        "ACTION": "unbind",
        "DEVPATH": "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
        "SUBSYSTEM": "pci",
        "DRIVER": "nvidia",
        "SEQNUM": "42",
    }.items():
        monkeypatch.setenv(key, value)
    device = pyudev.Devices.from_environment(pyudev.Context())
    event = event_from_device(device)
    assert isinstance(event, KernelEvent)
    assert (event.event, event.subsystem, event.name, event.driver) == ("udev-unbind", "pci", "0000:3b:00.0", "nvidia")
    assert event.devpath == "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
    assert event.time.tzinfo is not None


# What runs inside the namespaces: a plugin, `devctl watch --udev` on it, a GPU that falls off the bus, and
# then the plugin marking it unhealthy.
CHILD = """
import asyncio, json, sys
sys.path.insert(0, {tests!r})
from test_watch_udev import send_udev_event
from devctl.lab.plugin.server import DevicePluginServer
from devctl.lab.plugin.spec import PluginSpec, counted_devices

async def main():
    spec = PluginSpec(resource="example.com/gpu", devices=counted_devices("example.com/gpu", 2), socket="g.sock")
    async with DevicePluginServer(spec, {plugins!r}, register=False) as plugin:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "devctl", "--root", {root!r}, "watch", "--udev", "--socket", plugin.socket_path,
            "-o", "json", "--count", "{count}", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        # The snapshot: by now the monitor listens (watch opens it with the streams, before any reply comes).
        lines = [await asyncio.wait_for(proc.stdout.readline(), 20)]
        # A device of a subsystem nobody watches: the kernel-side filter drops it.
        send_udev_event({{"ACTION": "add", "DEVPATH": "/devices/virtual/input/input9", "SUBSYSTEM": "input",
                         "SEQNUM": "1"}})
        send_udev_event({{"ACTION": "remove", "DEVPATH": "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                         "SUBSYSTEM": "pci", "DRIVER": "nvidia", "SEQNUM": "2"}})
        if {udevd}:
            lines.append(await asyncio.wait_for(proc.stdout.readline(), 20))  # the event, before the flip
        else:
            await asyncio.sleep(0.3)  # time for an event that must not come
        plugin.set_health("gpu-1", "Unhealthy")
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    lines += out.splitlines()
    print(json.dumps({{"rc": proc.returncode, "lines": [l.decode() for l in lines], "stderr": err.decode()}}))

asyncio.run(main())
"""


def _in_namespaces(script: Path, udevd_running: bool) -> dict:
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    probe = subprocess.run(
        ["unshare", "--mount", "--net", "--fork", "sh", "-c", "mount -t tmpfs tmpfs /run"],
        capture_output=True,
        timeout=10,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make mount and network namespaces here: {probe.stderr.decode().strip()}")
    setup = "mount -t tmpfs tmpfs /run"
    if udevd_running:
        setup += " && mkdir /run/udev && touch /run/udev/control"
    r = subprocess.run(
        [
            "unshare",
            "--mount",
            "--net",
            "--fork",
            "sh",
            "-c",
            f'{setup} && exec "$0" "$1"',
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(TESTS.parent),
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and netlink multicast need root")
@pytest.mark.parametrize("udevd", [True, False], ids=["udevd", "no-udevd"])
def test_a_kernel_device_event_joins_the_plugin_timeline(short_root: Path, udevd: bool) -> None:
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    script = short_root / "child.py"
    # Without udevd, libudev would hear nothing: watch reads the kernel's own events instead and says so,
    # once. Only the kernel sends on that group, so there the udevd-style message is not seen.
    count = 3 if udevd else 2
    child = CHILD.format(tests=str(TESTS), root=str(short_root), plugins=str(plugins), count=count, udevd=udevd)
    script.write_text(textwrap.dedent(child))
    result = _in_namespaces(script, udevd)
    assert result["rc"] == 0, result["stderr"]
    events = [json.loads(line) for line in result["lines"]]
    assert [e["event"] for e in events] == (["snapshot", "udev-remove", "health"] if udevd else ["snapshot", "health"])
    assert result["stderr"].count("udev is not running here") == (0 if udevd else 1), result["stderr"]
    if not udevd:
        return
    snapshot, kernel, health = events
    assert kernel == {
        "time": kernel["time"],
        "event": "udev-remove",
        "device": "0000:3b:00.0",
        "subsystem": "pci",
        "devpath": "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
        "driver": "nvidia",
    }
    assert (health["event"], health["device"], health["to"]) == ("health", "gpu-1", "Unhealthy")
    assert snapshot["time"] <= kernel["time"] <= health["time"]


def test_without_pyudev_the_watch_says_so_once_and_goes_on(short_root: Path) -> None:
    """Where kernel events cannot be read at all, one line on stderr, and the plugins are still watched."""
    plugins = short_root / "var/lib/kubelet/device-plugins"
    plugins.mkdir(parents=True)
    script = short_root / "nopyudev.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, subprocess, sys
            from devctl.lab.plugin.server import DevicePluginServer
            from devctl.lab.plugin.spec import PluginSpec, counted_devices

            # The watch runs in a Python where `import pyudev` fails, as on a host without it.
            RUN = "import sys; sys.modules['pyudev'] = None; from devctl.cli.app import main; main()"

            async def main():
                spec = PluginSpec(resource="example.com/gpu", devices=counted_devices("example.com/gpu", 3))
                async with DevicePluginServer(spec, {str(plugins)!r}, register=False) as plugin:
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable, "-c", RUN, "--root", {str(short_root)!r}, "watch", "--udev",
                        "-o", "json", "--duration", "1.5", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    out, err = await asyncio.wait_for(proc.communicate(), 30)
                sys.stdout.write(out.decode())
                sys.stderr.write(err.decode())
                sys.exit(proc.returncode)

            asyncio.run(main())
            """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["event"] for line in r.stdout.splitlines()] == ["snapshot"]
    said = [line for line in r.stderr.splitlines() if "kernel device events" in line]
    assert len(said) == 1, r.stderr
    assert said[0].startswith("devctl: kernel device events cannot be read:")
    assert said[0].endswith("going on without kernel device events")
    assert "Traceback" not in r.stderr
