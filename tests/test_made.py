"""devctl.lab.made.Made removes only what a run recorded, with rmdir: what it did not make stays."""

from __future__ import annotations

import os
from pathlib import Path

from devctl.lab.made import Made


def test_a_made_directory_keeps_a_directory_it_did_not_make(tmp_path: Path) -> None:
    made = Made()
    made.makedirs(tmp_path / "a/b")
    (tmp_path / "a/b/node.sock").write_text("")  # the node's own file in a made directory
    (tmp_path / "a/mine").mkdir()
    (tmp_path / "a/mine/file").write_text("keep\n")
    made.remove()
    assert (tmp_path / "a/mine/file").read_text() == "keep\n"
    assert sorted(os.listdir(tmp_path / "a")) == ["mine"]  # b went; a stays, for it holds mine


def test_new_dirs_records_only_what_appeared(tmp_path: Path) -> None:
    (tmp_path / "before").mkdir()
    made = Made()
    with made.new_dirs(tmp_path):
        (tmp_path / "new/deeper").mkdir(parents=True)
    made.remove()
    assert sorted(os.listdir(tmp_path)) == ["before"]


def test_remove_under_takes_only_that_subtree(tmp_path: Path) -> None:
    made = Made()
    made.makedirs(tmp_path / "pods/one/containers")
    made.makedirs(tmp_path / "pods/two")
    made.remove(under=tmp_path / "pods/one")
    assert sorted(os.listdir(tmp_path / "pods")) == ["two"]
    made.remove()
    assert not (tmp_path / "pods").exists()


def test_a_made_directory_swapped_for_a_symlink_is_left_alone(tmp_path: Path) -> None:
    made = Made()
    made.makedirs(tmp_path / "d")
    os.rmdir(tmp_path / "d")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/file").write_text("keep\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "d")
    made.remove()
    assert (tmp_path / "elsewhere/file").read_text() == "keep\n"
    assert (tmp_path / "d").is_symlink()
