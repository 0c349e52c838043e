"""Every default table on the default simulated node fits 80 columns; -o wide keeps every value whole (issue 29, 7).

GIVEN the default simulated node (long names: ``hardware-vendor.example/foo``,
``node-exporter-7xk2p``, ``gpu.example.com-reg.sock``), WHEN each read command
prints its default table, THEN no line is wider than 80 columns (display width:
wcwidth's when installed), a cut value keeps its head and tail around ``…`` and
health is never cut, and ``-o wide`` still carries each full value. A pod's
devices' health is answered by ``pods`` and ``get`` (HEALTHY) and by
``devices --pod NS/NAME`` (one row per device with its health).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import devctl

from devctl.lab.sim.scenario import default_scenario
from devctl.lab.sim.thread import running_sim

WIDTH = 80
FOO, NIC = "hardware-vendor.example/foo", "intel.com/sriov_netdevice"

try:
    from wcwidth import wcswidth

    def width(line: str) -> int:
        return max(wcswidth(line), len(line))
except ImportError:  # no wcwidth: every character the tables print here takes one column

    def width(line: str) -> int:
        return len(line)


@pytest.fixture(scope="module")
def node() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, default_scenario(), grace_period=5.0):
            yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


TABLES = [
    ("ls",),
    ("devices",),
    ("pods",),
    ("plugins",),
    ("checkpoint",),
    ("claims",),
    ("cdi",),
    ("topo",),
    ("who",),
    ("get", "ml/train-0"),
    ("get", "ml/train-1"),
    ("devices", "--pod", "ml/train-1"),
]


@pytest.mark.parametrize("command", TABLES, ids=" ".join)
def test_every_default_table_fits_80_columns(node: Path, command: tuple[str, ...]) -> None:
    r = devctl(node, *command)
    assert r.exit_code == 0, r.stderr
    # The simulated node lives under a temporary root, which a real node's / does not add to a path.
    lines = r.stdout.replace(str(node), "").splitlines()
    assert lines
    too_wide = [line for line in lines if width(line) > WIDTH]
    assert not too_wide, f"{' '.join(command)}: wider than {WIDTH}: {too_wide}"


def test_the_checkpoint_path_keeps_its_file_name_and_wide_the_whole_path(node: Path) -> None:
    # Not stripped of the root here: the path is cut to fit, whatever the root.
    narrow = devctl(node, "checkpoint").stdout.splitlines()[0]
    assert width(narrow) <= WIDTH and narrow.endswith("/kubelet_internal_checkpoint")
    wide = devctl(node, "checkpoint", "-o", "wide").stdout.splitlines()[0]
    assert wide == f"path:       {node}/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"


def row(text: str, first: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first] or f" {first} " in line)


def test_a_cut_value_keeps_head_and_tail_and_wide_the_whole_value(node: Path) -> None:
    devices = devctl(node, "devices").stdout
    foo = row(devices, "foo-0")
    assert foo[0] != FOO and foo[0].startswith("hardware-") and foo[0].endswith("/foo") and "…" in foo[0]
    assert foo[2] == "Healthy"  # health is never cut
    assert row(devices, "GPU-5")[2] == "Unhealthy"
    wide = devctl(node, "devices", "-o", "wide").stdout
    assert row(wide, "foo-0")[0] == FOO and row(wide, "0000:3b:02.0")[0] == NIC
    pods = devctl(node, "pods", "-o", "wide").stdout
    assert "node-exporter-7xk2p" in pods and "node-exporter " in pods
    plugins = devctl(node, "plugins", "-o", "wide").stdout
    assert FOO in plugins and "gpu.example.com-reg.sock" in plugins
    cut_pods = devctl(node, "pods").stdout
    assert "node-exporter-7xk2p" not in cut_pods and row(cut_pods, "monitoring")[1].endswith("7xk2p")


def test_pods_and_get_say_how_many_of_a_containers_devices_are_healthy(node: Path) -> None:
    pods = devctl(node, "pods").stdout
    assert pods.splitlines()[0].split() == ["NAMESPACE", "POD", "CONTAINER", "DEVICES", "HEALTHY", "CPUS"]
    # ml/train-1 holds GPU-4, GPU-6 (Healthy) and DRA devices gpu-2 (Healthy) and gpu-3 (Unhealthy).
    train1 = row(pods, "train-1")
    assert train1[-2:] == ["3/4", "16-21"]
    train0 = [line.split() for line in pods.splitlines() if " train-0 " in line]
    assert ["5/5", "2-9"] in [t[-2:] for t in train0]  # four GPUs and a NIC, all Healthy
    assert row(pods, "monitoring")[-2:] == ["<none>", "<none>"]  # no device: no health to tell
    get = devctl(node, "get", "ml/train-1").stdout.splitlines()
    assert get[1].split()[-2:] == ["3/4", "16-21"]


def test_a_plugin_device_that_goes_unhealthy_shows_in_pods_get_and_wide(short_root: Path) -> None:
    with running_sim(short_root, default_scenario()) as sim:
        sim.set_health("nvidia.com/gpu", "GPU-2", "Unhealthy")
        assert row(devctl(short_root, "devices").stdout, "GPU-2")[2] == "Unhealthy"
        train0 = [line.split() for line in devctl(short_root, "pods").stdout.splitlines() if " trainer " in line]
        assert ["4/5", "2-9"] in [t[-2:] for t in train0]
        wide = devctl(short_root, "get", "ml/train-0", "-o", "wide").stdout
        assert "nvidia.com/gpu=GPU-0,GPU-1,GPU-2(Unhealthy),GPU-3" in wide


def test_devices_pod_lists_the_pods_devices_with_their_health(node: Path) -> None:
    r = devctl(node, "devices", "--pod", "ml/train-1")
    assert r.exit_code == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    assert [(x[1], x[2]) for x in rows] == [
        ("GPU-4", "Healthy"),
        ("GPU-6", "Healthy"),
        ("sim-node/gpu-2", "Healthy"),
        ("sim-node/gpu-3", "Unhealthy"),
    ]
    assert all(x[-1] == "ml/train-1" for x in rows)
    # NAME alone: that pod in whichever namespace runs it.
    assert devctl(node, "devices", "--pod", "train-1").stdout == r.stdout
    # A pod the node does not run: one line, exit 1, no table.
    missing = devctl(node, "devices", "--pod", "ml/train-9")
    assert missing.exit_code == 1 and missing.stdout == ""
    assert "devctl: pod train-9 in namespace ml not found" in missing.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("ls", "-o", "wide"),
        ("devices", "-o", "wide"),
        ("pods",),
        ("claims",),
    ],
    ids=" ".join,
)
def test_sort_by_takes_every_column_as_its_header_reads(node: Path, command: tuple[str, ...]) -> None:
    headers = devctl(node, *command).stdout.splitlines()[0].split()
    for header in headers:
        if header == "PROCS":  # counted after the rows are sorted: not a column to sort by
            continue
        for spelling in (header, header.lower()):
            r = devctl(node, *command, "--sort-by", spelling)
            assert r.exit_code == 0, f"{command} --sort-by {spelling}: {r.stderr}"
            assert r.stdout.splitlines()[0].split() == headers


def test_pods_sort_by_healthy_puts_the_sick_container_first(node: Path) -> None:
    rows = devctl(node, "pods", "--sort-by", "HEALTHY").stdout.splitlines()[1:]
    assert " train-1 " in rows[0]  # 3/4: the only container with a device that is not Healthy
