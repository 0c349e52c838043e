"""``devctl record`` with a hostile ``--root``: the default journal never lands outside the root, and a bad
option is refused before anything is made on the node.

Each node is a fake root under tmp_path with no kubelet: a refused journal ends ``record`` at once (exit 1,
one line), an accepted one starts recording and is stopped with SIGINT once its file is there.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

from helpers import DEVCTL, devctl_env, run_devctl

from devctl.node.journal import JournalError
from devctl.node.journal_dir import open_dir_under


def _refused(root: Path) -> str:
    result = run_devctl("record", "--root", str(root), timeout=20)
    assert result.exit_code == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0], lines
    return lines[0]


def test_a_journal_directory_linked_out_of_the_root_is_refused_and_nothing_is_written_outside(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "node", tmp_path / "outside"
    (root / "var" / "lib").mkdir(parents=True)
    outside.mkdir()
    (root / "var" / "lib" / "devctl").symlink_to(outside)
    line = _refused(root)
    assert "leads out of --root" in line
    assert list(outside.iterdir()) == []


def test_a_parent_linked_out_of_the_root_is_refused_and_nothing_is_made_there(tmp_path: Path) -> None:
    root, outside = tmp_path / "node", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "var").symlink_to(outside)
    _refused(root)
    assert list(outside.iterdir()) == []  # not even lib/devctl made out there


def _lines_until(proc: subprocess.Popen[bytes], word: bytes, timeout: float = 30.0) -> bytes:
    """stderr read until a line holds ``word`` (the recorder is then past its start-up), bounded."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while word not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
    return seen


def test_a_link_that_stays_inside_the_root_is_followed(tmp_path: Path) -> None:
    root = tmp_path / "node"
    (root / "data" / "devctl").mkdir(parents=True)
    (root / "var" / "lib").mkdir(parents=True)
    (root / "var" / "lib" / "devctl").symlink_to("../../data/devctl")
    proc = subprocess.Popen([*DEVCTL, "record", "--root", str(root)], env=devctl_env(), stderr=subprocess.PIPE)
    try:
        # The kernel log's notice comes from the recorder's run, after Ctrl-C is its own.
        seen = _lines_until(proc, b"kmsg")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, seen + err
    journal = root / "data" / "devctl" / "journal"
    assert journal.stat().st_size >= 64  # the header written, under the root


def test_a_bound_of_zero_is_a_usage_error_before_any_directory_is_made(tmp_path: Path) -> None:
    root = tmp_path / "node"
    root.mkdir()
    result = run_devctl("record", "--root", str(root), "--max-size", "0", timeout=20)
    assert result.exit_code == 2
    assert "--max-size 0" in result.stderr and "between" in result.stderr
    assert list(root.iterdir()) == []
    named = tmp_path / "elsewhere" / "journal"
    result = run_devctl("record", "--root", str(root), "--journal", str(named), "--max-size", "1", timeout=20)
    assert result.exit_code == 2
    assert not named.parent.exists()


def test_a_link_swapped_in_after_the_check_is_not_followed(tmp_path: Path, monkeypatch) -> None:
    """The openat walk itself refuses a link, whatever the resolution saw (the race the check alone leaves)."""
    root, outside = tmp_path / "node", tmp_path / "outside"
    (root / "var" / "lib").mkdir(parents=True)
    outside.mkdir()
    (root / "var" / "lib" / "devctl").symlink_to(outside)
    real = os.path.realpath
    # The resolution is fooled (as if the link appeared just after it looked); the walk still sees the link.
    monkeypatch.setattr(os.path, "realpath", lambda p: real(p) if "devctl" not in str(p) else str(p))
    try:
        fd = open_dir_under(str(root), str(root / "var" / "lib" / "devctl"), "journal")
    except JournalError as err:
        assert "not a directory under the root" in str(err)
    else:
        os.close(fd)
        raise AssertionError("followed a link out of the root")
    assert list(outside.iterdir()) == []
