"""Shared fixtures: short temporary roots, because a unix socket path has at most 107 bytes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
TESTDATA = SHARED / "testdata"


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A fresh node root under /tmp with a short name; pytest's tmp_path is too long for sockets."""
    path = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
