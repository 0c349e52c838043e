"""Issue 29 item 5's last "one meaning" items, on a real simulated node or a real root, as a person reads them.

- fds closed to devctl when devctl is root already: the line and doctor's hint say so, not "run as root";
- the node's real name in hints, from the kubelet's --hostname-override or <root>/etc/hostname;
- a resource whose plugin lists only unhealthy devices is not a bare no-plugin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helpers import DEVCTL, devctl_env, run_devctl

from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import SimHandle, running_sim

SETPRIV = shutil.which("setpriv")


def _as_root_without_dac(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``devctl --root ROOT ARGS`` as root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (a container's root)."""
    return subprocess.run(
        [str(SETPRIV), "--bounding-set", "-dac_override,-dac_read_search", *DEVCTL, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=devctl_env(),
    )


@pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv to drop root's DAC rights")
def test_fds_closed_even_to_root_are_named_so_not_run_as_root(sim_node: SimHandle) -> None:
    # A process whose fd directory root may not open: mode 000, read by a root without the DAC capabilities.
    fd = sim_node.root / "proc" / "4242" / "fd"
    fd.mkdir(parents=True)
    (fd.parent / "cmdline").write_bytes(b"python\0x\0")
    fd.chmod(0)
    who = _as_root_without_dac(sim_node.root, "who")
    assert who.returncode == 0, who.stderr
    [line] = [x for x in who.stderr.splitlines() if "/proc" in x]
    assert "processes cannot be read even as root" in line
    assert "run as root" not in line
    assert "GPU-0" in who.stdout  # the holders that could be read are still shown
    doctor = _as_root_without_dac(sim_node.root, "doctor", "-o", "json")
    [finding] = [f for f in json.loads(doctor.stdout)["findings"] if f["subject"] == "procs"]
    assert finding["code"] == "permission-denied"
    assert "even as root" in finding["message"]
    assert "as root" not in finding["hint"]


# --- a resource whose plugin lists only unhealthy devices; the node's name in hints ---------------------------

ALL_UNHEALTHY = """
resources:
  - name: example.com/gpu
    socket: gpu.sock
    devices: [{id: gpu-0, health: Unhealthy}, {id: gpu-1, health: Unhealthy}]
  - name: example.com/fpga
    socket: fpga.sock
    devices: [{id: fpga-0}]
"""


@pytest.fixture
def vendor_node(short_root: Path) -> Iterator[SimHandle]:
    """A simulated node whose GPU plugin lists only unhealthy devices, its plugins as a vendor's are: without
    devctl's control sockets (removed), so only the kubelet's device IDs can name their sockets."""
    with running_sim(short_root, parse_scenario(yaml.safe_load(ALL_UNHEALTHY))) as handle:
        for control in (short_root / "run" / "devctl" / "plugins").glob("*.ctl"):
            control.unlink()
        yield handle


def _findings(root: Path) -> dict[tuple[str, str], dict[str, str]]:
    result = run_devctl("--root", str(root), "doctor", "-o", "json")
    assert result.exit_code in (0, 1), result.stderr
    findings = json.loads(result.stdout)["findings"]
    # A socket by its file name; a resource by its name.
    return {
        (f["code"], f["subject"].rpartition("/")[2] if f["subject"].startswith("/") else f["subject"]): f
        for f in findings
    }


def test_a_plugin_with_only_unhealthy_devices_is_named_as_the_likely_plugin(vendor_node: SimHandle) -> None:
    findings = _findings(vendor_node.root)
    no_plugin = findings["no-plugin", "example.com/gpu"]
    assert "gpu.sock answers with only unhealthy devices (2)" in no_plugin["message"]
    assert "by elimination" in no_plugin["message"] and "likely its plugin" in no_plugin["message"]
    assert "only the checkpoint still names it" not in no_plugin["message"]
    assert "devctl call --socket" in no_plugin["hint"] and "gpu.sock list" in no_plugin["hint"]
    unknown = findings["unknown-resource", "gpu.sock"]
    assert "likely the plugin of example.com/gpu" in unknown["message"]
    assert ("no-plugin", "example.com/fpga") not in findings


def _kubelet(root: Path, pid: int, *args: str) -> None:
    d = root / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "comm").write_bytes(b"kubelet\n")  # as the kernel names it: only its command line is then read
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in ("/usr/bin/kubelet", *args)) + b"\0")


def _node_hint(root: Path) -> str:
    return _findings(root)["no-plugin", "example.com/gpu"]["hint"]


def test_hints_name_the_node_as_the_kubelet_registers_it(vendor_node: SimHandle) -> None:
    root = vendor_node.root
    # Neither a kubelet under <proc> nor <root>/etc/hostname: the placeholder, as before.
    assert "spec.nodeName=<node>)" in _node_hint(root)
    # The host's name, trimmed and lower-cased as the kubelet makes it.
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "hostname").write_text("GPU-Host-3\n")
    assert "spec.nodeName=gpu-host-3)" in _node_hint(root)
    # A kubelet without --hostname-override is named by the host's name too; with one, by that (the last one).
    _kubelet(root, 70, "--config=/var/lib/kubelet/config.yaml")
    assert "spec.nodeName=gpu-host-3)" in _node_hint(root)
    shutil.rmtree(root / "proc" / "70")
    _kubelet(root, 71, "--hostname-override", "first", "--hostname-override=Worker-7.Example", "--v=2")
    assert "spec.nodeName=worker-7.example)" in _node_hint(root)
    # A name no Node can have (shell characters from a hostile file) is never put into a command.
    shutil.rmtree(root / "proc" / "71")
    (root / "etc" / "hostname").write_text("a;reboot\n")
    assert "spec.nodeName=<node>)" in _node_hint(root)
