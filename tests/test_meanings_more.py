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
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env

from devctl.sim.thread import SimHandle

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
