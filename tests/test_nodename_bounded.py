"""The node's name is read for doctor alone, and only a kubelet's command line is read for it (issue 30, R3b).

``ls``, the guard and each exporter refresh read the plugins; they used to walk every
``<proc>/*/cmdline`` for a name only doctor's hints show. The fake ``<proc>`` here holds
5,000 processes: the assertions are on which files were opened, never on time.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import devctl

from devctl.core.collect import collect
from devctl.model import ALL_SOURCES, EXTRA_SOURCES, NODE_NAME
from devctl.node.paths import resolve_paths

PROCESSES = 5_000
KUBELET_PID = 4_321


def _process(proc: Path, pid: int, comm: str, argv: tuple[str, ...]) -> None:
    d = proc / str(pid)
    d.mkdir()
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


@pytest.fixture(scope="module")
def crowded_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root whose <proc> holds 5,000 processes, one of them a kubelet with --hostname-override."""
    root = tmp_path_factory.mktemp("crowded")
    proc = root / "proc"
    proc.mkdir()
    for pid in range(1, PROCESSES + 1):
        if pid == KUBELET_PID:
            _process(proc, pid, "kubelet", ("/usr/bin/kubelet", "--v=2", "--hostname-override=Worker-9"))
        else:
            # A process whose command line would name it a kubelet, but the kernel calls it bash: never read.
            _process(proc, pid, "bash", ("/usr/bin/kubelet", f"--hostname-override=decoy-{pid}"))
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("host-1\n")
    return root


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every path os.open is given while the test runs (from any thread)."""
    seen: list[str] = []
    lock = threading.Lock()
    real = os.open

    def counting(path: str | bytes | os.PathLike[str], *args: object, **kwargs: object) -> int:
        with lock:
            seen.append(os.fsdecode(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting)
    yield seen


def _cmdlines(seen: list[str]) -> list[str]:
    return [p for p in seen if p.endswith("/cmdline")]


def test_ls_reads_no_command_line(crowded_root: Path, opened: list[str]) -> None:
    # WHEN ls runs on a node whose <proc> holds 5,000 processes
    result = devctl(crowded_root, "ls", "-o", "json")
    # THEN it answers (no kubelet: exit 3 with its line) and no process's command line nor comm was opened
    assert result.exit_code in (0, 3), result.stderr
    assert _cmdlines(opened) == []
    assert not [p for p in opened if p.endswith("/comm")]


def test_the_plugins_read_without_node_name_walks_no_proc(crowded_root: Path, opened: list[str]) -> None:
    paths = resolve_paths(root=str(crowded_root), env={})
    snapshot = asyncio.run(collect(paths, 2.0, want=ALL_SOURCES))
    assert snapshot.node_name is None  # not asked: unknown, not guessed
    assert _cmdlines(opened) == []


def test_the_node_name_reads_only_the_kubelets_command_line(crowded_root: Path, opened: list[str]) -> None:
    paths = resolve_paths(root=str(crowded_root), env={})
    snapshot = asyncio.run(collect(paths, 2.0, want={NODE_NAME}))
    # THEN the kubelet's --hostname-override names the node, and of 5,000 command lines only its own was read
    assert snapshot.node_name == "worker-9"
    assert _cmdlines(opened) == [f"{crowded_root}/proc/{KUBELET_PID}/cmdline"]


def test_doctor_and_snapshot_ask_for_the_node_name(crowded_root: Path) -> None:
    assert NODE_NAME in EXTRA_SOURCES  # what cli/doctor and cli/read's snapshot read beyond ALL_SOURCES
    result = devctl(crowded_root, "snapshot")
    assert json.loads(result.stdout)["node_name"] == "worker-9"
