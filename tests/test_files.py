"""Files devctl reads that are not regular files or are too large: one line each, never a hang.

Every case is a real file system object in tmp_path: a FIFO (``os.mkfifo``,
which blocked ``open()`` forever), symlinks to ``/dev/zero`` (endless) and
``/dev/null`` (a character device), a directory, and a sparse file above the
size limit (``truncate``: no disk used). Commands run as real processes so
that a hang fails the test by its timeout instead of stalling the suite.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import run_devctl

from devctl.lab.sim.scenario import ScenarioError, default_scenario, load_scenario
from devctl.lab.sim.thread import running_sim
from devctl.model import ErrorKind
from devctl.node.checkpoint import read_checkpoint
from devctl.node.files import MAX_FILE_BYTES, FileReadError, read_file
from devctl.node.gojson import CheckpointError
from devctl.node.sysfs import read_topology

GPU = "nvidia.com/gpu"
BOUND = 10  # seconds: a read that blocks is a failure, not a slow pass


@pytest.fixture(scope="module")
def default_node():
    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, default_scenario(), grace_period=5.0) as handle:
            yield handle
    finally:
        shutil.rmtree(root, ignore_errors=True)


def make(kind: str, path: Path) -> str:
    """A ``kind`` of file system object at ``path``; the reason devctl must give for it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "not a regular file but a FIFO"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
        return "not a regular file but a character device"
    if kind == "dev-null":
        path.symlink_to("/dev/null")
        return "not a regular file but a character device"
    if kind == "directory":
        path.mkdir()
        return "not a regular file but a directory"
    if kind == "oversize":
        with open(path, "wb") as f:
            f.truncate(MAX_FILE_BYTES + 1024 * 1024)  # sparse: no block is written
        return "too large to read: 257 MiB, the limit is 256 MiB"
    raise AssertionError(kind)


KINDS = ["fifo", "dev-zero", "dev-null", "directory", "oversize"]


def bounded(fn, *args):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result(BOUND)


@pytest.mark.parametrize("kind", KINDS)
def test_read_file_refuses_at_once(tmp_path, kind):
    path = tmp_path / "f"
    reason = make(kind, path)
    with pytest.raises(FileReadError) as err:
        bounded(read_file, str(path))
    assert (str(err.value), err.value.reason, err.value.kind) == (f"{path}: {reason}", reason, ErrorKind.OTHER)


def test_read_file_reads_a_regular_file_and_enforces_its_limit(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 5000)
    assert read_file(str(path)) == b"x" * 5000
    assert read_file(str(path), limit=5000) == b"x" * 5000
    with pytest.raises(FileReadError, match="too large to read: 5000 bytes, the limit is 4999 bytes"):
        read_file(str(path), limit=4999)
    (tmp_path / "link").symlink_to(path)
    assert read_file(str(tmp_path / "link")) == b"x" * 5000
    with pytest.raises(FileReadError) as err:
        read_file(str(tmp_path / "missing"))
    assert (err.value.reason, err.value.kind) == ("no such file", ErrorKind.MISSING)


def test_a_sysfs_file_that_reports_4096_bytes_reads_what_it_holds():
    # A real sysfs attribute: stat says 4096, the content is a few bytes.
    assert os.stat("/sys/devices/system/cpu/online").st_size == 4096
    assert read_file("/sys/devices/system/cpu/online").strip()


@pytest.mark.parametrize("kind", KINDS)
def test_the_checkpoint_reader(tmp_path, kind):
    path = tmp_path / "kubelet_internal_checkpoint"
    reason = make(kind, path).replace("the limit is 256 MiB", "the limit is 64 MiB")  # the checkpoints' own bound
    with pytest.raises(CheckpointError) as err:
        bounded(read_checkpoint, str(path))
    assert (err.value.reason, err.value.kind) == (reason, ErrorKind.OTHER)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_sysfs_leaves_out_an_attribute_that_is_not_a_file(tmp_path, kind):
    pci = tmp_path / "bus/pci/devices/0000:3b:00.0"
    pci.mkdir(parents=True)
    (pci / "vendor").write_text("0x10de\n")
    make(kind, pci / "numa_node")
    (cpu := tmp_path / "devices/system/cpu").mkdir(parents=True)
    make(kind, cpu / "online")
    topo = bounded(read_topology, str(tmp_path), False)
    (device,) = topo.pci_devices
    assert (device.vendor_id, device.numa_node) == ("0x10de", -1)
    assert topo.numa_nodes[0].cpus == ()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "oversize"])
def test_a_scenario_file(tmp_path, kind):
    path = tmp_path / "scenario.yaml"
    reason = make(kind, path)
    with pytest.raises(ScenarioError, match=f"^{path}: {reason}$"):
        bounded(load_scenario, str(path))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dev-null", "oversize"])
def test_a_checkpoint_that_is_not_a_file_is_one_warning_and_the_rest_shows(default_node, tmp_path, kind):
    reason = make(kind, tmp_path / "kubelet_internal_checkpoint").replace("is 256 MiB", "is 64 MiB")
    args = ["--timeout", "2", "--plugins-dir", str(tmp_path)]
    warning = f"warning: checkpoint: {tmp_path}/kubelet_internal_checkpoint: {reason}"
    ls = run_devctl(*args, "ls", root=default_node.root, timeout=BOUND)
    assert (ls.exit_code, ls.stderr.splitlines()) == (0, [warning])
    assert GPU in ls.stdout  # pod-resources still answers
    doc = run_devctl(*args, "ls", "-o", "json", root=default_node.root, timeout=BOUND).json
    assert doc["errors"] == [
        {"source": "checkpoint", "message": warning.split(": ", 2)[2], "kind": "other", "subject": None},
    ]
    # devctl checkpoint shows the DRA checkpoint too: it still reads, so the broken one is a warning, not exit 3
    shown = run_devctl(*args, "checkpoint", root=default_node.root, timeout=BOUND)
    assert (shown.exit_code, shown.stderr.splitlines()) == (0, [warning])
    assert "dra_manager_state" in shown.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "oversize"])
def test_a_from_file_that_is_not_a_file_is_exit_3(tmp_path, kind):
    path = tmp_path / "snap.json"
    reason = make(kind, path)
    r = run_devctl("--from", str(path), "ls", timeout=BOUND)
    assert r.exit_code == 3 and r.stdout == ""
    assert r.stderr.splitlines() == [f"devctl: --from {path}: {reason}"]


def test_a_plugin_config_that_is_a_fifo_is_a_usage_error(tmp_path):
    path = tmp_path / "plugin.yaml"
    reason = make("fifo", path)
    r = run_devctl("plugin", "serve", "--config", str(path), "--no-register", timeout=BOUND)
    assert r.exit_code == 2
    assert f"{path}: {reason}" in r.stderr and len(r.stderr.splitlines()) == 1
