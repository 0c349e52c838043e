"""A host with no kubelet: every read command exits 3 there, topo and who too, though sysfs and /proc read."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_devctl


@pytest.mark.parametrize("command", ["topo", "who", "ls", "pods", "devices"])
def test_a_root_without_a_kubelet_is_exit_3_with_one_line(short_root: Path, command: str) -> None:
    (short_root / "sys/devices/system/node/node0").mkdir(parents=True)
    (short_root / "sys/devices/system/node/node0/cpulist").write_text("0-3\n")
    (short_root / "proc").mkdir()
    result = run_devctl("--root", str(short_root), command)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert "is this a node?" in result.stderr


def test_cdi_specs_on_a_host_without_a_kubelet_are_still_an_answer(short_root: Path) -> None:
    spec = short_root / "etc/cdi/a.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(
        "cdiVersion: 0.6.0\nkind: vendor.example/gpu\ndevices:\n  - name: g0\n    containerEdits:\n      env: [A=1]\n"
    )
    result = run_devctl("--root", str(short_root), "cdi", "vendor.example/gpu=g0")
    assert result.exit_code == 0, result.stderr
