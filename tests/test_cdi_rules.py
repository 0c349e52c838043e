"""CDI specs checked by the runtime library's rules: each spec here breaks exactly one rule, or none.

The base spec is valid; each case changes one thing in it. What a user checks:
the spec's one-line reason names the file and the rule, the spec's devices
are not used (a name only it defines is unresolvable, never resolved), and
the same spec read by the helper process (100 specs and more) gets the same
verdict.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import run_devctl

from devctl.node.cdi import read_cdi

BOUND = 20  # seconds: generous; a read of a few specs takes milliseconds


def _base() -> dict[str, Any]:
    return {
        "cdiVersion": "0.3.0",
        "kind": "vendor.example/gpu",
        "containerEdits": {"env": ["SPEC=1"]},
        "devices": [
            {
                "name": "g",
                "containerEdits": {
                    "deviceNodes": [{"path": "/dev/g0", "type": "c", "major": 240, "minor": 0, "permissions": "rw"}],
                    "mounts": [{"hostPath": "/opt/g", "containerPath": "/g", "options": ["ro"]}],
                    "hooks": [{"hookName": "createContainer", "path": "/bin/true", "env": ["A=1"]}],
                },
            }
        ],
    }


def _dev(spec: dict[str, Any]) -> dict[str, Any]:
    edits: dict[str, Any] = spec["devices"][0]["containerEdits"]
    return edits


def _set(change: Any) -> dict[str, Any]:
    spec = _base()
    change(spec)
    return spec


# (id, the one change, what the reason must say)
INVALID = [
    ("version-0.0.0", lambda s: s.update(cdiVersion="0.0.0"), "cdiVersion '0.0.0' is not a CDI version"),
    ("version-unknown", lambda s: s.update(cdiVersion="1.2.0"), "cdiVersion '1.2.0' is not a CDI version"),
    ("version-missing", lambda s: s.pop("cdiVersion"), "no cdiVersion"),
    ("version-0.2.0", lambda s: s.update(cdiVersion="0.2.0"), "the oldest version read is 0.3.0"),
    ("vendor-dash-end", lambda s: s.update(kind="vendor.com-/gpu"), "vendor 'vendor.com-' does not end with"),
    ("vendor-digit-first", lambda s: s.update(kind="1vendor/gpu"), "vendor '1vendor' does not start with a letter"),
    ("vendor-empty", lambda s: s.update(kind="gpu"), "kind: empty vendor"),
    ("class-equals-end", lambda s: s.update(kind="vendor.example/gpu="), "class a string of 4 characters does not end"),
    ("class-bad-char", lambda s: s.update(kind="vendor.example/g_p@u"), "class 'g_p@u' has a character other"),
    ("device-no-edits", lambda s: s["devices"][0].pop("containerEdits"), "device 'g' has no containerEdits"),
    ("device-empty-edits", lambda s: s["devices"][0].update(containerEdits={"env": []}), "has no containerEdits"),
    ("device-name-slash", lambda s: s["devices"][0].update(name="g/0"), "device name 'g/0' has a character other"),
    ("device-name-dash-end", lambda s: s["devices"][0].update(name="g-"), "does not start and end with a letter"),
    ("device-twice", lambda s: s["devices"].append(copy.deepcopy(s["devices"][0])), "device 'g' defined twice"),
    ("no-devices", lambda s: s.update(devices=[]), "no devices"),
    ("hostpath-0.4.0", lambda s: _dev(s)["deviceNodes"][0].update(hostPath="/dev/h"), "hostPath needs 0.5.0"),
    ("digit-name-0.4.0", lambda s: s["devices"][0].update(name="0"), "starting with a digit needs 0.5.0"),
    ("mount-type-0.3.0", lambda s: _dev(s)["mounts"][0].update(type="bind"), "a mount's type needs 0.4.0"),
    ("annotations-0.5.0", lambda s: s.update(annotations={"a": "b"}), "annotations needs 0.6.0"),
    ("device-annotations-0.5.0", lambda s: s["devices"][0].update(annotations={"a": "b"}), "annotations needs 0.6"),
    ("class-dot-0.5.0", lambda s: s.update(kind="vendor.example/g.pu"), "a dot in the kind's class needs 0.6.0"),
    ("gids-0.6.0", lambda s: _dev(s).update(additionalGids=[44]), "additionalGids needs 0.7.0"),
    ("intelrdt-0.6.0", lambda s: _dev(s).update(intelRdt={"closID": "c"}), "intelRdt needs 0.7.0"),
    ("netdevices-1.0.0", lambda s: _dev(s).update(netDevices=[{"hostInterfaceName": "e", "name": "n"}]), "1.1.0"),
    ("node-unknown-field", lambda s: _dev(s)["deviceNodes"][0].update(devicePath="/x"), "unknown field 'devicePath'"),
    ("spec-unknown-field", lambda s: s.update(extra=1), "spec: unknown field 'extra'"),
    ("mount-unknown-field", lambda s: _dev(s)["mounts"][0].update(readOnly=True), "unknown field 'readOnly'"),
    ("node-permissions", lambda s: _dev(s)["deviceNodes"][0].update(permissions="rwx"), "permissions 'rwx' are not"),
    ("node-type", lambda s: _dev(s)["deviceNodes"][0].update(type="x"), "type 'x' is not b, c, u or p"),
    ("node-no-path", lambda s: _dev(s)["deviceNodes"][0].update(path=""), "deviceNodes[0]: no path"),
    ("env-no-equals", lambda s: s["containerEdits"].update(env=["SPEC"]), "env entry 'SPEC' is not KEY=VALUE"),
    ("env-equals-first", lambda s: s["containerEdits"].update(env=["=1"]), "env entry a string of 2 characters is not"),
    ("hook-name", lambda s: _dev(s)["hooks"][0].update(hookName="preStart"), "hookName 'preStart' is not an OCI"),
    ("hook-no-path", lambda s: _dev(s)["hooks"][0].update(path=""), "hooks[0]: no path"),
    ("hook-env", lambda s: _dev(s)["hooks"][0].update(env=["A"]), "hooks[0].env[0]: env entry 'A' is not"),
    ("mount-no-container-path", lambda s: _dev(s)["mounts"][0].pop("containerPath"), "needs hostPath and container"),
    ("major-string", lambda s: _dev(s)["deviceNodes"][0].update(major="240"), "major: not an integer"),
    ("gid-negative", lambda s: s.update(cdiVersion="0.7.0") or _dev(s).update(additionalGids=[-1]), "not a non-neg"),
]

VALID = [
    ("base-0.3.0", lambda s: None),
    ("version-v-prefix", lambda s: s.update(cdiVersion="v0.3.0")),
    ("gids-0.7.0", lambda s: s.update(cdiVersion="0.7.0") or _dev(s).update(additionalGids=[44])),
    ("gids-any-case", lambda s: s.update(cdiVersion="0.7.0") or _dev(s).update(additionalGIDs=[44])),
    ("hostpath-0.5.0", lambda s: s.update(cdiVersion="0.5.0") or _dev(s)["deviceNodes"][0].update(hostPath="/h")),
    ("annotations-0.6.0", lambda s: s.update(cdiVersion="0.6.0", annotations={"bad key!": "any"})),
    (
        "netdevices-1.1.0",
        lambda s: s.update(cdiVersion="1.1.0") or _dev(s).update(netDevices=[{"hostInterfaceName": "e", "name": "n"}]),
    ),
    ("hookname-any-case", lambda s: _dev(s)["hooks"][0].update(hookname=_dev(s)["hooks"][0].pop("hookName"))),
]


def _write(directory: Path, name: str, spec: dict[str, Any]) -> None:
    # Block YAML as tools write it (the fast subset's path), or JSON for a .json name.
    text = json.dumps(spec) if name.endswith(".json") else yaml.safe_dump(spec, sort_keys=False)
    (directory / name).write_text(text)


def _read(directory: Path, helper: bool) -> dict[str, Any]:
    state, errors = read_cdi(
        (str(directory),), str(directory), str(directory / "sys"), helper_from=1 if helper else 10**9
    )
    assert errors == []
    return {Path(s.path).name: s for s in state.specs}


@pytest.mark.parametrize(("case", "change", "reason"), INVALID, ids=[c[0] for c in INVALID])
@pytest.mark.parametrize("helper", [False, True], ids=["in-process", "helper"])
def test_a_spec_breaking_one_rule_is_one_line_naming_the_file_and_the_rule(
    tmp_path: Path, case: str, change: Any, reason: str, helper: bool
) -> None:
    _write(tmp_path, "s.yaml", _set(change))
    _write(tmp_path, "s.json", _set(change))
    specs = _read(tmp_path, helper)
    for name in ("s.json", "s.yaml"):
        error = specs[name].error
        assert error is not None and error.startswith(f"{tmp_path}/{name}: "), (case, name, error)
        assert reason in error and "\n" not in error, (case, name, error)
        assert specs[name].devices == ()


@pytest.mark.parametrize(("case", "change"), VALID, ids=[c[0] for c in VALID])
@pytest.mark.parametrize("helper", [False, True], ids=["in-process", "helper"])
def test_a_valid_spec_is_read_whole(tmp_path: Path, case: str, change: Any, helper: bool) -> None:
    _write(tmp_path, "s.yaml", _set(change))
    _write(tmp_path, "s.json", _set(change))
    specs = _read(tmp_path, helper)
    for name in ("s.json", "s.yaml"):
        spec = specs[name]
        assert spec.error is None, (case, name, spec.error)
        assert [d.name for d in spec.devices] == ["g"]
        assert [n.path for n in spec.devices[0].edits.device_nodes] == ["/dev/g0"]


def test_a_key_twice_is_refused_and_a_yaml_spec_named_json_is_read(tmp_path: Path) -> None:
    spec = yaml.safe_dump(_base(), sort_keys=False)
    (tmp_path / "twice.yaml").write_text(spec + "kind: other.example/gpu\n")
    (tmp_path / "twice.json").write_text(json.dumps(_base())[:-1] + ', "kind": "vendor.example/gpu"}')
    (tmp_path / "yaml.json").write_text(spec)
    (tmp_path / "numbers.yaml").write_text(spec.replace("name: g", "name: 7").replace("0.3.0", "0.5.0"))
    specs = _read(tmp_path, helper=False)
    assert (
        specs["twice.yaml"].error
        == f"{tmp_path}/twice.yaml: not YAML: found duplicate key at line {spec.count(chr(10)) + 1}"
    )
    assert specs["twice.json"].error == f"{tmp_path}/twice.json: not YAML: found duplicate key at line 1"
    assert specs["yaml.json"].error is None and specs["yaml.json"].kind == "vendor.example/gpu"
    # A number where a string belongs is that string, as the runtime's YAML-to-JSON step makes it.
    assert specs["numbers.yaml"].error is None and [d.name for d in specs["numbers.yaml"].devices] == ["7"]


def test_devctl_cdi_shows_an_invalid_spec_beside_a_valid_one_without_a_false_conflict(tmp_path: Path) -> None:
    """The issue's case: a spec the runtime refuses beside a valid one defining the same device, and gids at 0.7.0."""
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    _write(cdi, "good.yaml", _base())
    _write(cdi, "old.yaml", _set(lambda s: _dev(s)["deviceNodes"][0].update(hostPath="/dev/h")))  # needs 0.5.0
    _write(
        cdi,
        "gids.yaml",
        _set(lambda s: s.update(kind="example.com/device", cdiVersion="0.7.0") or _dev(s).update(additionalGids=[44])),
    )
    _write(cdi, "only.yaml", _set(lambda s: s.update(kind="only.example/x", cdiVersion="0.0.0")))
    args = ["--root", str(tmp_path), "--cdi-dirs", str(cdi), "--timeout", "1", "cdi"]
    names = ["vendor.example/gpu=g", "example.com/device=g", "only.example/x=g"]
    table = run_devctl(*args, *names, timeout=BOUND)
    shown = run_devctl(*args, *names, "-o", "json", timeout=BOUND)
    # exit 1: a name asked for that no valid spec defines is not found, as for a claim
    assert shown.exit_code == 1 and "CDI name only.example/x=g not found" in shown.stderr, shown.stderr
    status = {n["name"]: n["status"] for n in shown.json["names"]}
    assert status == {  # the unknown name gets no row, only its line
        "vendor.example/gpu=g": "resolved",
        "example.com/device=g": "resolved",
    }
    assert {n["name"]: n["spec"] for n in shown.json["names"]}["vendor.example/gpu=g"] == str(cdi / "good.yaml")
    specs = {Path(s["path"]).name: s for s in shown.json["specs"]}
    assert (
        specs["old.yaml"]["error"]
        == f"{cdi}/old.yaml: cdiVersion '0.3.0' is too old: a device node's hostPath needs 0.5.0"
    )
    assert specs["old.yaml"]["devices"] == []
    assert specs["gids.yaml"]["error"] is None and specs["good.yaml"]["error"] is None
    cdi_lines = [line for line in table.stderr.splitlines() if "cdi:" in line]
    assert cdi_lines == [
        f"warning: cdi: {specs['old.yaml']['error']}",
        f"warning: cdi: {specs['only.yaml']['error']}",
    ]
    assert "conflict" not in table.stdout
