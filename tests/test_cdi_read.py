"""CDI spec files read from real dirs: the one-line reasons a spec is rejected, what is listed, device nodes traced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devctl.node.cdi import read_cdi

HEAD = {"cdiVersion": "0.6.0", "kind": "v.example/c"}


ENV = {"env": ["A=1"]}  # a device's edits may not be empty


def _node(**fields: object) -> dict:
    return {"devices": [{"name": "d", "containerEdits": {"deviceNodes": [{"path": "/dev/x", **fields}]}}]}


# Each field checked, in the order the runtime reports them: the reason names where the first bad one is.
BAD = [
    ({"devices": [{"name": "d", "extra": 1}]}, "devices[0]: unknown field 'extra'"),
    ({"devices": ["d"]}, "devices[0]: not a mapping"),
    ({"devices": [{"name": "", "containerEdits": ENV}]}, "devices[0]: no name"),
    (
        {"devices": [{"name": "d", "containerEdits": {"hooks": [], "bad": 1}}]},
        "devices[0].containerEdits: unknown field 'bad'",
    ),
    ({"devices": [{"name": "d", "containerEdits": []}]}, "devices[0].containerEdits: not a mapping"),
    (
        {"devices": [{"name": "d", "containerEdits": ENV}], "containerEdits": {"env": "A=1"}},
        "containerEdits.env: not a list",
    ),
    (
        {"devices": [{"name": "d", "containerEdits": {"env": [[1]]}}]},
        "devices[0].containerEdits.env[0]: not a string",
    ),
    (
        {"devices": [{"name": "d", "containerEdits": {"env": [1]}}]},
        "devices[0].containerEdits.env[0]: env entry '1' is not KEY=VALUE",
    ),
    (
        {"devices": [{"name": "d", "containerEdits": {"deviceNodes": [{}]}}]},
        "devices[0].containerEdits.deviceNodes[0]: no path",
    ),
    (_node(hostPath=[5]), "devices[0].containerEdits.deviceNodes[0].hostPath: not a string"),
    (_node(major="1", minor=True), "devices[0].containerEdits.deviceNodes[0].major: not an integer"),
    (_node(major=1, minor=True), "devices[0].containerEdits.deviceNodes[0].minor: not an integer"),
    (_node(hostPath={}, major="x"), "devices[0].containerEdits.deviceNodes[0].hostPath: not a string"),
    (
        {"devices": [{"name": "d", "containerEdits": {"mounts": [{"hostPath": "/a"}], "env": ["A"]}}]},
        "devices[0].containerEdits.env[0]: env entry 'A' is not KEY=VALUE",
    ),
    (
        {"devices": [{"name": "d", "containerEdits": {"mounts": [{"hostPath": "/a"}]}}]},
        "devices[0].containerEdits.mounts[0]: needs hostPath and containerPath",
    ),
    (
        {"cdiVersion": "1.1.0", "devices": [{"name": "d", "containerEdits": {"netDevices": [{"name": "n"}]}}]},
        "devices[0].containerEdits.netDevices[0]: no hostInterfaceName",
    ),
    (
        {"devices": [{"name": "d", "containerEdits": ENV}, {"name": "d", "containerEdits": ENV}]},
        "device 'd' defined twice",
    ),
]


@pytest.mark.parametrize(("body", "reason"), BAD)
def test_a_bad_field_is_one_line_naming_it(tmp_path: Path, body: dict, reason: str) -> None:
    (tmp_path / "s.json").write_text(json.dumps(HEAD | body))
    (tmp_path / "s.yaml").write_text(json.dumps(HEAD | body))  # flow YAML: the safe loader's path
    state, errors = read_cdi((str(tmp_path),), str(tmp_path), str(tmp_path / "sys"))
    assert errors == []
    assert [s.error for s in state.specs] == [f"{tmp_path}/s.json: {reason}", f"{tmp_path}/s.yaml: {reason}"]


def test_only_regular_files_and_links_to_them_are_specs(tmp_path: Path) -> None:
    spec = "cdiVersion: 0.6.0\nkind: v.example/c\ndevices:\n- name: d\n  containerEdits:\n    env: [A=1]\n"
    (tmp_path / "b.yaml").write_text(spec)
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    (tmp_path / "dir.yaml").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "c.yml").write_text(spec)
    state, errors = read_cdi((str(tmp_path),), str(tmp_path), str(tmp_path / "sys"))
    assert errors == []
    assert [(os.path.basename(s.path), s.error) for s in state.specs] == [("a.yaml", None), ("b.yaml", None)]


def test_device_nodes_sharing_a_number_are_traced_alike(tmp_path: Path) -> None:
    """Two specs naming 240:0 (and one 240:1 behind no PCI function): each node its function and NUMA node."""
    sysfs = tmp_path / "sys"
    fn = sysfs / "devices" / "pci0000:00" / "0000:00:04.0"
    fn.mkdir(parents=True)
    (fn / "numa_node").write_text("1\n")
    (fn / "gpu0").mkdir()
    (sysfs / "dev" / "char").mkdir(parents=True)
    (sysfs / "dev" / "char" / "240:0").symlink_to("../../devices/pci0000:00/0000:00:04.0/gpu0")
    (sysfs / "dev" / "char" / "240:2").symlink_to("../../devices/pci0000:00/0000:00:04.0")
    (sysfs / "devices" / "virtual").mkdir()
    (sysfs / "dev" / "char" / "240:1").symlink_to("../../devices/virtual")
    # Links as sysfs never writes them, resolved as realpath would: "..", "." and an absolute path.
    (sysfs / "dev" / "char" / "240:4").symlink_to("../../devices/pci0000:00/0000:00:04.0/gpu0/..")
    (sysfs / "dev" / "char" / "240:5").symlink_to("../.././devices/pci0000:00/../pci0000:00/0000:00:04.0/gpu0")
    (sysfs / "dev" / "char" / "240:6").symlink_to(fn)
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    for name, minors in (("a", (0, 1)), ("b", (0, 2, 3, 4, 5, 6))):
        nodes = [{"path": f"/dev/g{m}", "major": 240, "minor": m} for m in minors]
        (cdi / f"{name}.yaml").write_text(
            f"cdiVersion: 0.6.0\nkind: v.example/{name}\ndevices:\n- name: d\n  containerEdits:\n    deviceNodes:\n"
            + "".join(f"    - path: {n['path']}\n      major: 240\n      minor: {n['minor']}\n" for n in nodes)
        )
    state, _ = read_cdi((str(cdi),), str(tmp_path), str(sysfs))
    traced = [[(n.minor, n.pci, n.numa_node) for n in s.devices[0].edits.device_nodes] for s in state.specs]
    assert traced == [
        [(0, "0000:00:04.0", 1), (1, None, None)],
        [(0, "0000:00:04.0", 1), (2, "0000:00:04.0", 1), (3, None, None)] + [(m, "0000:00:04.0", 1) for m in (4, 5, 6)],
    ]
