"""Every default table fits an 80-column terminal (issue 10, items 2 and 9), as an SSH user's window is.

GIVEN the default simulated node, WHEN each read command prints its default
table at COLUMNS=80, THEN no line is longer than 80 characters, except by
what a long name forces: the simulated node lives under a temporary root
(``/tmp/dc…``), which a real node's ``/`` does not add to a path, and the
default scenario has names longer than a column's usual 16 characters
(``hardware-vendor.example/foo`` is 27). Each such name may widen its column
by its excess, nothing else may; the names are listed per command below.
``watch`` prints in fixed columns, so a long resource name never pushes the
column after it. NUMA unknown is ``<none>`` in tables and ``null`` in JSON;
``devices -o wide`` and the JSON name the PCI function behind a device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import devctl, run_devctl
from test_watch_cli import start, watches  # noqa: F401  (watches: a fixture)

from devctl.lab.plugin.spec import PluginSpec
from devctl.lab.sim.scenario import default_scenario
from devctl.lab.sim.scenario_dra import DraScenario
from devctl.lab.sim.thread import running_sim
from devctl.model import Device
from devctl.node.pciids import pci_names

WIDTH = 80
NAME = 16  # a name up to this long fits its column; a longer one widens it by the excess
FOO, NIC = "hardware-vendor.example/foo", "intel.com/sriov_netdevice"
CDI_NAME = "k8s.gpu.example.com/claim=158f1769-9654-5f67-b802-69d9a887a8c0-gpu-0"  # the longest CDI name in use

# command -> the long names (one per column at most) that may widen its table, and why they are there.
LONG_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("ls",): (),
    ("devices",): (),  # a long RESOURCE, ID or ALLOCATED-TO is cut in its middle (-o wide: whole)
    ("pods",): (),  # so is a long NAMESPACE, POD or CONTAINER (node-exporter-7xk2p, a DaemonSet pod's)
    ("get", "ml/train-0"): (),
    ("get", "ml/train-1"): (),
    ("topo",): (),
    ("plugins",): (),  # SOCKET, RESOURCE cut
    ("checkpoint",): (),  # POD, CONTAINER, RESOURCE cut
    ("doctor",): (),
    ("claims",): (),
    ("cdi",): (),  # NAME (a DRA claim's CDI names carry its UID) and USED-BY cut
    ("who",): (),  # DEVICE, COMMAND, POD, CONTAINER cut
    ("call", "nvidia.com/gpu", "list"): (),
    ("call", "nvidia.com/gpu", "options"): (),
    ("watch", "--once"): (),
}


@contextlib.contextmanager
def sim_root(scenario) -> Iterator[object]:
    root = Path(tempfile.mkdtemp(prefix="dc", dir="/tmp"))
    try:
        with running_sim(root, scenario, grace_period=5.0) as handle:
            yield handle
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def default_node():
    with sim_root(default_scenario()) as handle:
        yield handle


def excess(names: tuple[str, ...]) -> int:
    return sum(max(0, len(n) - NAME) for n in names)


@pytest.mark.parametrize("command", list(LONG_NAMES), ids=" ".join)
def test_the_default_table_fits_80_columns(default_node, command, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))  # doctor wraps its messages and hints at the terminal's width
    if command[0] == "watch":  # a process of its own: its streams end with the watch
        r = run_devctl(*command, root=default_node.root, env={"COLUMNS": str(WIDTH)})
    else:
        r = devctl(default_node.root, *command)
    assert r.exit_code in (0, 1), r.stderr  # doctor: 1, the default node plants an error
    lines = r.stdout.replace(str(default_node.root), "").splitlines()  # a real node's root is /
    assert lines, r.stderr
    allowed = WIDTH + excess(LONG_NAMES[command])
    too_long = [line for line in lines if len(line) > allowed]
    assert not too_long, f"{' '.join(command)}: wider than {allowed}: {too_long}"
    if not LONG_NAMES[command]:
        return
    # The long names are what widens it: the same table on a node with short names would fit.
    assert any(len(line) > WIDTH for line in lines)
    assert all(any(n in r.stdout for n in LONG_NAMES[command]) for line in lines if len(line) > WIDTH)


def test_wide_has_the_rest(default_node) -> None:
    narrow = devctl(default_node.root, "devices").stdout.splitlines()[0].split()
    wide = devctl(default_node.root, "devices", "-o", "wide").stdout.splitlines()[0].split()
    assert narrow == ["RESOURCE", "ID", "HEALTH", "NUMA", "ALLOCATED-TO"]
    assert wide[: len(narrow)] == narrow and {"STATE", "PCI", "VENDOR", "MODEL", "DRIVER", "PROCS"} <= set(wide)
    pods = devctl(default_node.root, "pods", "-o", "wide").stdout.splitlines()[0].split()
    assert pods[6:] == ["MEMORY", "NUMA", "CLAIMS"]
    claims = devctl(default_node.root, "claims", "-o", "wide").stdout.splitlines()[0].split()
    assert claims[-4:] == ["DEVICES", "HEALTH", "UID", "CDI"]


def test_numa_unknown_is_none_in_tables_and_null_in_json(default_node) -> None:
    root = default_node.root
    topo = devctl(root, "topo", "-o", "json").json
    assert None in [n["id"] for n in topo["numa_nodes"]] and -1 not in [n["id"] for n in topo["numa_nodes"]]
    for command in (["devices"], ["topo"], ["cdi"], ["checkpoint", "-o", "wide"], ["claims", "-o", "wide"]):
        cells = [cell for line in devctl(root, *command).stdout.splitlines() for cell in line.split()]
        assert "-1" not in cells and "-" not in cells, command
    gpu1 = next(line.split() for line in devctl(root, "devices").stdout.splitlines() if " sim-node/gpu-1 " in line)
    assert gpu1[3] == "<none>"  # a DRA device in no claim: no CDI device node says its NUMA node


def test_devices_name_their_pci_function(default_node) -> None:
    rows = {d["id"]: d for d in devctl(default_node.root, "devices", "-o", "json").json["devices"]}
    # An SR-IOV VF is listed by its PCI address; the scenario's sysfs has its IDs and bound driver.
    vf = rows["0000:3b:02.0"]["pci"]
    assert (vf["address"], vf["vendor_id"], vf["driver"]) == ("0000:3b:02.0", "0x8086", "iavf")
    # A DRA device in a claim: its CDI device node leads through /sys/dev/char to a function.
    gpu = rows["sim-node/gpu-0"]["pci"]
    assert gpu["address"].startswith("0000:d0:") and gpu["driver"] == "gpu"
    assert rows["GPU-7"]["pci"] is None  # nothing leads from it to hardware: null, not a guess
    wide = devctl(default_node.root, "devices", "-o", "wide").stdout.splitlines()
    header = wide[0]
    row = next(line for line in wide if line.startswith(NIC) and " 0000:3b:02.0 " in line)
    assert row[header.index("PCI") :].split()[0] == "0000:3b:02.0"
    assert row[header.index("DRIVER") :].split()[0] == "iavf"
    if vf["vendor"] is not None:  # named where the machine has udev's or the PCI IDs database's names
        assert row[header.index("VENDOR") :].startswith(vf["vendor"])


def test_pci_ids_database_names_vendor_and_device(tmp_path: Path) -> None:
    db = tmp_path / "pci.ids"
    db.write_text(
        "# comment\n"
        "10de  NVIDIA Corporation\n"
        "\t20b5  GA100 [A100 PCIe 80GB]\n"
        "\t\t10de 1533  A100 80GB PCIe\n"
        "8086  Intel Corporation\n"
        "\t154c  Ethernet Virtual Function 700 Series\n"
        "C 02  Network controller\n"
        "\t00  Ethernet controller\n"
    )
    names = pci_names([("0x10de", "0x20b5"), ("0x8086", "0xffff"), ("0x1234", "0x0001")], str(db))
    assert names == {
        ("10de", "20b5"): ("NVIDIA Corporation", "GA100 [A100 PCIe 80GB]"),
        ("8086", "ffff"): ("Intel Corporation", None),  # a known vendor, an unknown device
    }
    assert pci_names([("0x10de", "0x20b5")], str(tmp_path / "absent")) == {}  # no database: just the IDs


SHORT, LONG = "a.io/x", "very-long-vendor-name.example.com/accelerator-with-a-rather-long-name"


@pytest.fixture
def two_names(short_root: Path):
    scenario = dataclasses.replace(
        default_scenario(),
        resources=(
            PluginSpec(SHORT, (Device("x-0"), Device("x-1")), "short.sock"),
            PluginSpec(LONG, (Device("l-0"), Device("l-1")), "long.sock"),
        ),
        pods=(),
        processes=(),
        dra=DraScenario(),  # device plugins only: a driver's lines would come between
    )
    with running_sim(short_root, scenario) as handle:
        yield handle


def test_watch_columns_line_up_whatever_the_name_length(two_names, watches) -> None:  # noqa: F811
    w = start(watches, two_names.root, "watch")
    header = w.line()[1]

    def lines_until(text: str) -> list[str]:
        out = []
        while not out or text not in out[-1]:
            out.append(w.line()[1])
        return out

    rows = lines_until(SHORT if SHORT not in (first := w.line()[1]) else LONG)  # both snapshots, either order
    rows.insert(0, first)
    two_names.set_health(LONG, "l-0", "Unhealthy")
    rows += lines_until(f"{LONG}/l-0")
    two_names.set_health(SHORT, "x-1", "Unhealthy")
    rows += lines_until(f"{SHORT}/x-1")
    change, obj = header.index("CHANGE"), header.index("OBJECT")
    assert len(rows) == 4
    for line in rows:  # a column never pushes the next: each starts where its header does
        assert line[change - 3 : change] == "   " and line[change] != " ", line
        assert line[obj - 3 : obj] == "   " and line[obj] != " ", line
        assert line[obj:].startswith((SHORT, LONG))
    assert "Healthy→Unhealthy" in rows[2] and "Healthy→Unhealthy" in rows[3]
    assert len(header) <= WIDTH
    assert all(len(line) <= WIDTH for line in rows if LONG not in line)  # only the long name runs past 80
