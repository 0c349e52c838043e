"""Hostile files planted where devctl reads: never opened unless regular, never quoted, never hiding the others.

A symlink planted at a kubelet state file may name a device whose mere
``open()`` changes the node (``/dev/watchdog`` arms). Tests cannot make such
a device, so they plant a FIFO and a unix socket and watch the FIFO with
inotify: an ``IN_OPEN`` event is queued by the kernel at the moment anything
opens it for reading or writing (an ``O_PATH`` look does not count), so "no
event" is proof that devctl never opened it, with no timing involved.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_devctl

from devctl.node.cdi import read_cdi
from devctl.node.checkpoint import read_checkpoint
from devctl.node.dra_checkpoint import read_dra_checkpoint
from devctl.node.files import FileReadError, read_file
from devctl.node.gojson import CHECKPOINT_LIMIT, CheckpointError
from devctl.node.kubeletstate import StateError, read_cpu_state

BOUND = 20  # seconds: generous; a refused read takes milliseconds
IN_OPEN = 0x20
SECRET = "root:$6$s4lt$Zm9vYmFyYmF6cXV4:19000:0:99999:7:::\nsvc: hunter2-very-secret-token\n"
GOOD = "cdiVersion: 0.6.0\nkind: v.example/c\ndevices:\n- name: d\n  containerEdits:\n    env:\n    - A=1\n"


class OpenWatch:
    """An inotify watch for IN_OPEN on one path; ``opened()`` says whether anything opened it since."""

    def __init__(self, path: Path):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        assert self._libc.inotify_add_watch(self.fd, os.fsencode(path), IN_OPEN) >= 0

    def opened(self) -> bool:
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            return False
        at = 0
        while at < len(data):  # struct inotify_event: wd, mask, cookie, len, then len bytes of name
            _, mask, _, size = struct.unpack_from("iIII", data, at)
            if mask & IN_OPEN:
                return True
            at += 16 + size
        return False

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[tuple[Path, OpenWatch]]:
    path = tmp_path / "planted-fifo"
    os.mkfifo(path)
    watch = OpenWatch(path)
    try:
        yield path, watch
    finally:
        watch.close()


def test_the_watch_sees_an_open(fifo):
    """The proof's own check: a non-blocking open for reading, as devctl's reader did before, is seen."""
    path, watch = fifo
    os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    assert watch.opened()


def _kubelet_dir(tmp_path: Path) -> Path:
    kubelet = tmp_path / "kubelet"
    (kubelet / "device-plugins").mkdir(parents=True)
    return kubelet


READERS = [
    ("device-plugins/kubelet_internal_checkpoint", read_checkpoint, CheckpointError),
    ("dra_manager_state", read_dra_checkpoint, CheckpointError),
    ("cpu_manager_state", read_cpu_state, StateError),
    ("any", read_file, FileReadError),
]


@pytest.mark.parametrize(("name", "reader", "error"), READERS, ids=[r[0].split("/")[-1] for r in READERS])
def test_a_link_to_a_fifo_is_refused_without_opening_it(tmp_path, fifo, name, reader, error):
    target, watch = fifo
    link = _kubelet_dir(tmp_path) / name
    link.symlink_to(target)
    with pytest.raises(error, match="not a regular file but a FIFO"):
        reader(str(link))
    assert not watch.opened()


def test_a_link_to_a_socket_is_named_a_socket(tmp_path):
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s"))
        (tmp_path / "link").symlink_to(tmp_path / "s")
        with pytest.raises(FileReadError) as err:
            read_file(str(tmp_path / "link"))
    assert err.value.reason == "not a regular file but a socket"


def test_devctl_checkpoint_never_opens_planted_links(tmp_path, fifo):
    """As a user runs it: each planted file is one warning line, and the FIFO behind them was never opened."""
    target, watch = fifo
    kubelet = _kubelet_dir(tmp_path)
    for name in ("device-plugins/kubelet_internal_checkpoint", "dra_manager_state", "cpu_manager_state"):
        (kubelet / name).symlink_to(target)
    args = ["--kubelet-dir", str(kubelet), "--plugins-dir", str(kubelet / "device-plugins"), "--timeout", "1"]
    r = run_devctl(*args, "checkpoint", "-o", "json", timeout=BOUND)
    errors = {e["source"]: e["message"] for e in json.loads(r.stdout)["errors"]}
    assert errors["checkpoint"].endswith("kubelet_internal_checkpoint: not a regular file but a FIFO")
    assert errors["dra-checkpoint"] == f"{kubelet}/dra_manager_state: not a regular file but a FIFO"
    assert not watch.opened()


def test_a_checkpoint_above_the_bound_is_refused_unread(tmp_path):
    path = _kubelet_dir(tmp_path) / "device-plugins/kubelet_internal_checkpoint"
    with open(path, "wb") as f:
        f.truncate(CHECKPOINT_LIMIT + 1024 * 1024)  # sparse: no block written
    for reader in (read_checkpoint, read_dra_checkpoint):
        with pytest.raises(CheckpointError) as err:
            reader(str(path))
        assert err.value.reason == "too large to read: 65 MiB, the limit is 64 MiB"


# --- CDI specs ------------------------------------------------------------------------------


def _assert_secret_nowhere(*texts: str) -> None:
    for text in texts:
        for word in ("hunter2", "s4lt", "Zm9v", "19000", "99999"):
            assert word not in text


@pytest.mark.parametrize("helper_from", [1, 100], ids=["helper", "in-process"])
def test_a_spec_linked_out_of_its_dir_is_refused_and_never_quoted(tmp_path, helper_from):
    (tmp_path / "secret").write_text(SECRET)
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "good.yaml").write_text(GOOD)
    (cdi / "in.yaml").symlink_to(cdi / "good.yaml")  # a link within the dir still reads
    for name in ("shadow.yaml", "shadow.json"):
        (cdi / name).symlink_to(tmp_path / "secret")
    state, _ = read_cdi((str(cdi),), str(tmp_path), str(tmp_path / "sys"), helper_from=helper_from)
    assert [(os.path.basename(s.path), s.error) for s in state.specs] == [
        ("good.yaml", None),
        ("in.yaml", None),
        ("shadow.json", f"{cdi}/shadow.json: a link to a file outside its directory: not read"),
        ("shadow.yaml", f"{cdi}/shadow.yaml: a link to a file outside its directory: not read"),
    ]


def test_a_spec_with_secret_text_in_the_dir_shows_none_of_it(tmp_path):
    """A spec that is a secret itself (copied in, not linked): the reason says what is wrong, never the text."""
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "good.yaml").write_text(GOOD)
    (cdi / "x.yaml").write_text(SECRET)
    (cdi / "y.yaml").write_text("[a, *hunter2]\n")  # PyYAML quotes an undefined alias
    (cdi / "z.yaml").write_text(GOOD + "- name: hunter2-token-with:two:colons\n  containerEdits: {env: [A=1]}\n" * 2)
    args = ["--root", str(tmp_path), "--cdi-dirs", str(cdi), "--timeout", "1", "cdi"]
    table = run_devctl(*args, timeout=BOUND)
    shown = run_devctl(*args, "-o", "json", timeout=BOUND)
    _assert_secret_nowhere(table.stdout, table.stderr, shown.stdout, shown.stderr)
    specs = {os.path.basename(s["path"]): s["error"] for s in json.loads(shown.stdout)["specs"]}
    assert specs["good.yaml"] is None
    assert re.fullmatch(f"{cdi}/x.yaml: spec: unknown field a string of [0-9]+ characters", specs["x.yaml"])
    assert specs["y.yaml"].startswith(f"{cdi}/y.yaml: not YAML: found undefined alias")
    assert re.fullmatch(f"{cdi}/z.yaml: device a string of [0-9]+ characters defined twice", specs["z.yaml"])


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml"])
def test_a_deeply_nested_spec_is_one_line_and_the_others_read(tmp_path, name):
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "good.yaml").write_text(GOOD)
    (cdi / name).write_text("[" * 100_000 + "]" * 100_000)
    args = ["--root", str(tmp_path), "--cdi-dirs", str(cdi), "--timeout", "1", "cdi"]
    r = run_devctl(*args, "-o", "json", timeout=BOUND)
    specs = {os.path.basename(s["path"]): s for s in json.loads(r.stdout)["specs"]}
    assert specs["good.yaml"]["devices"] == ["d"] and specs["good.yaml"]["error"] is None
    # JSON: json's recursion limit; YAML: the subset's or PyYAML's own depth limit, either one line
    reason = "not JSON: nested too deeply" if name.endswith(".json") else "not YAML: (nested too deeply|exceeded .*)"
    assert re.fullmatch(f"{cdi}/{name}: {reason}", specs[name]["error"])
    table = run_devctl(*args, timeout=BOUND)
    assert "Traceback" not in r.stderr + table.stderr
    assert [line for line in table.stderr.splitlines() if "cdi:" in line] == [f"warning: cdi: {specs[name]['error']}"]


# --- other parsers ---------------------------------------------------------------------------


def test_a_deeply_nested_from_file_is_one_line(tmp_path):
    path = tmp_path / "snap.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    r = run_devctl("--from", str(path), "ls", timeout=BOUND)
    assert (r.exit_code, r.stdout, r.stderr.splitlines()) == (
        3,
        "",
        [f"devctl: --from {path}: not JSON: nested too deeply"],
    )


def test_a_deeply_nested_dra_checkpoint_is_one_line(tmp_path):
    path = tmp_path / "dra_manager_state"
    data = '{"kind":"DRACheckpoint","ClaimInfoStateList":' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text(json.dumps({"Data": data, "Checksum": 1}))
    with pytest.raises(CheckpointError) as err:
        read_dra_checkpoint(str(path))
    assert err.value.reason == "not a DRA manager checkpoint: Data is not JSON: nested too deeply"


def test_a_dra_checkpoint_of_another_kind_does_not_quote_it(tmp_path):
    path = tmp_path / "dra_manager_state"
    path.write_text(json.dumps({"Data": json.dumps({"kind": SECRET}), "Checksum": 1}))
    with pytest.raises(CheckpointError) as err:
        read_dra_checkpoint(str(path))
    assert err.value.reason == (
        f"not a DRA manager checkpoint: Data kind is a string of {len(SECRET)} characters, expected 'DRACheckpoint'"
    )


def test_kubelet_state_nested_or_secret_is_one_line(tmp_path):
    deep = tmp_path / "cpu_manager_state"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(StateError, match="^" + f"{deep}: not JSON: nested too deeply" + "$"):
        read_cpu_state(str(deep))
    deep.write_text(json.dumps({"policyName": "static", "defaultCpuSet": SECRET, "checksum": 1}))
    with pytest.raises(StateError) as err:
        read_cpu_state(str(deep))
    _assert_secret_nowhere(str(err.value))
