"""Many CDI specs scanned by a helper process: the same specs as read in process, whatever the helper does."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

from devctl.node.cdi import MAX_SPEC_BYTES, read_cdi
from devctl.node.cdi_scan import scan_in_child

PLAIN = """cdiVersion: 0.6.0
kind: k8s.gpu.example/claim
containerEdits:
  env:
  - CLAIM={n}
devices:
- name: d{n}
  containerEdits:
    deviceNodes:
    - path: /dev/g{n}
      type: c
      major: 240
      minor: {n}
    mounts:
    - hostPath: /opt/lib{n}
      containerPath: /lib{n}
"""


def _node(tmp_path: Path) -> tuple[tuple[str, ...], str, str]:
    """A spec dir with every kind of file a node may hold, and a sysfs that traces minor 0 to NUMA node 1."""
    sysfs = tmp_path / "sys"
    fn = sysfs / "devices" / "pci0000:00" / "0000:00:04.0"
    fn.mkdir(parents=True)
    (fn / "numa_node").write_text("1\n")
    (sysfs / "dev" / "char").mkdir(parents=True)
    (sysfs / "dev" / "char" / "240:0").symlink_to("../../devices/pci0000:00/0000:00:04.0")
    etc, run = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    etc.mkdir()
    run.mkdir()
    for n in range(6):
        (run / f"plain{n}.yaml").write_text(PLAIN.format(n=n))
    (etc / "plain0.yaml").write_text(PLAIN.format(n=0))  # the same kind and device in a lower-priority dir
    (run / "quoted.yaml").write_text(PLAIN.format(n=7).replace("CLAIM=7", "'CLAIM=7'"))  # PyYAML's to load
    (run / "when.yaml").write_text(PLAIN.format(n=8) + "annotations:\n  at: 2026-12-02\n")  # a date: PyYAML's
    (run / "spec.json").write_text(
        json.dumps({"cdiVersion": "0.6.0", "kind": "v.example/j", "devices": [{"name": "j"}]})
    )
    (run / "latin1.yaml").write_bytes(PLAIN.format(n=9).replace("/opt", "/\xe9").encode("latin-1"))
    (run / "broken.yaml").write_text("cdiVersion: 0.6.0\nkind: [\n")
    (run / "unknown.yaml").write_text(PLAIN.format(n=10) + "extra: 1\n")
    (run / "twice.yaml").write_text(PLAIN.format(n=11) + "- name: d11\n  containerEdits:\n    env:\n    - A=1\n")
    with open(run / "huge.yaml", "wb") as f:
        f.truncate(MAX_SPEC_BYTES + 1)  # sparse: refused by its size
    os.mkfifo(run / "fifo.yaml")  # no regular file: listed by neither side, and neither may block on it
    (run / "zero.yaml").symlink_to("/dev/zero")
    (run / "new\nline.yaml").write_text(PLAIN.format(n=12))
    return (str(etc), str(run)), str(tmp_path), str(sysfs)


def test_the_helper_reads_what_the_process_reads(tmp_path: Path) -> None:
    dirs, root, sysfs = _node(tmp_path)
    alone = read_cdi(dirs, root, sysfs, helper_from=10**9)
    helped = read_cdi(dirs, root, sysfs, helper_from=1)
    assert helped == alone
    state, errors = helped
    assert errors == []
    by_name = {os.path.basename(s.path): s for s in state.specs}
    assert by_name["plain0.yaml"].devices[0].edits.device_nodes[0].numa_node == 1
    assert by_name["quoted.yaml"].edits.env == ("CLAIM=7",)
    assert by_name["latin1.yaml"].error.endswith("not UTF-8 text")
    assert "not YAML" in by_name["broken.yaml"].error
    assert by_name["unknown.yaml"].error.endswith("unknown field 'extra'")
    assert by_name["twice.yaml"].error.endswith("device 'd11' defined twice")
    assert "too large to read" in by_name["huge.yaml"].error
    assert "zero.yaml" not in by_name and "fifo.yaml" not in by_name  # no regular file: no spec, either way
    assert by_name["new\nline.yaml"].error is None


def test_the_helper_itself_scans_the_plain_specs_and_leaves_the_rest(tmp_path: Path) -> None:
    """Not a fallback that hides a helper that never works: its own answers, file by file."""
    dirs, _, _ = _node(tmp_path)
    run = Path(dirs[1])
    names = ["plain1.yaml", "quoted.yaml", "when.yaml", "latin1.yaml", "huge.yaml", "zero.yaml", "fifo.yaml", "gone"]
    docs = scan_in_child([str(run / n) for n in names], MAX_SPEC_BYTES)
    assert docs is not None
    assert docs[0] is not None and docs[0][0]["devices"][0]["name"] == "d1"
    assert docs[1:] == [None] * 7  # the caller reads each of these itself and says why


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / f"python-{len(list(tmp_path.glob('python-*')))}"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_helper_that_cannot_start_or_fails_leaves_the_reading_to_the_process(tmp_path: Path) -> None:
    dirs, root, sysfs = _node(tmp_path)
    alone = read_cdi(dirs, root, sysfs, helper_from=10**9)
    for python in (
        str(tmp_path / "no-such-python"),
        _fake_python(tmp_path, "exit 3"),
        _fake_python(tmp_path, "cat >/dev/null; printf 'garbage'"),
        _fake_python(
            tmp_path, f"exec {sys.executable} -c 'import marshal, sys; sys.stdout.buffer.write(marshal.dumps([]))'"
        ),
    ):
        assert read_cdi(dirs, root, sysfs, helper_from=1, python=python) == alone, python


def test_a_helper_that_hangs_is_killed_at_its_deadline(tmp_path: Path) -> None:
    hung = _fake_python(tmp_path, "exec sleep 30")
    start = time.monotonic()
    assert scan_in_child(["/nonexistent.yaml"], MAX_SPEC_BYTES, python=hung, deadline=0.5) is None
    assert time.monotonic() - start < 5


def test_nothing_beside_devctl_shadows_the_helpers_standard_library(tmp_path: Path, monkeypatch) -> None:
    """devctl may sit in site-packages beside a module named like one of the standard library's."""
    import devctl
    from devctl.fast import helper

    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "devctl").symlink_to(Path(devctl.__file__).parent)
    (site / "re.py").write_text("raise SystemExit(9)\n")  # yamlsubset's one import
    monkeypatch.setattr(helper, "PACKAGE_ROOT", str(site))
    spec = tmp_path / "s.yaml"
    spec.write_text(PLAIN.format(n=1))
    docs = scan_in_child([str(spec)], MAX_SPEC_BYTES)
    assert docs is not None and docs[0] is not None and docs[0][0]["kind"] == "k8s.gpu.example/claim"
