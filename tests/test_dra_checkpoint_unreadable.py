"""A dra_manager_state that is there but cannot be read is never reported as absent (issue: one bad file)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_devctl


def node_with(root: Path, dra_state: bytes | None) -> Path:
    kubelet = root / "var/lib/kubelet"
    (kubelet / "device-plugins").mkdir(parents=True)
    if dra_state is not None:
        (kubelet / "dra_manager_state").write_bytes(dra_state)
    return root


def test_a_malformed_dra_manager_state_reads_unreadable_not_absent(tmp_path: Path) -> None:
    root = node_with(tmp_path, b'{"Data": "{not json", "Checksum": 1}')
    table = run_devctl("checkpoint", root=root)
    assert "dra_manager_state: unreadable (" in table.stdout
    assert "absent" not in table.stdout.split("dra_manager_state:", 1)[1]
    assert "not a DRA manager checkpoint" in table.stderr  # the why, once, on stderr
    dra = json.loads(run_devctl("checkpoint", "-o", "json", root=root).stdout)["dra"]
    assert dra["format"] is None
    assert "not a DRA manager checkpoint" in dra["error"]


def test_a_missing_dra_manager_state_is_absent_with_no_error(tmp_path: Path) -> None:
    root = node_with(tmp_path, None)
    assert "dra_manager_state: absent (" in run_devctl("checkpoint", root=root).stdout
    dra = json.loads(run_devctl("checkpoint", "-o", "json", root=root).stdout)["dra"]
    assert (dra["format"], dra["error"]) == (None, None)
