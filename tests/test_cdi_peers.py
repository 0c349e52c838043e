"""devctl's reading of CDI specs beside the runtime's library's own verdicts, spec by spec and scenario by scenario.

The verdicts were recorded by running tags.cncf.io/container-device-interface
pkg/cdi v1.1.0 (the library containerd and CRI-O use) over published specs and
specs derived from them, each breaking one rule (../shared/testdata/peers,
beside the repo: read where they are, never copied into it). For every spec:
valid or not, and the device names it defines; for every scenario (several
files in /etc/cdi and /var/run/cdi): which asked names resolve, from which
file, and which do not. Both ways devctl reads specs are held to them: in
process, and through the helper process used from 100 YAML specs on.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from devctl.analyze.cdi import RESOLVED, Resolver
from devctl.node.cdi import read_cdi

PEERS = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "peers"
REFERENCE = PEERS / "cdi-reference.json"

pytestmark = pytest.mark.skipif(
    not REFERENCE.is_file(), reason=f"the recorded reference verdicts are not here: {REFERENCE} (shared test data)"
)


def _reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {"specs": [], "scenarios": []}
    return data


def _source(spec: dict[str, Any]) -> str:
    src = spec.get("source", {})
    return f"{spec['set']}/{spec['file']} ({src.get('repo')}: {src.get('path')}; {src.get('how')})"


@pytest.mark.parametrize("helper", [False, True], ids=["in-process", "helper"])
def test_every_recorded_spec_gets_the_runtimes_verdict_and_device_names(tmp_path: Path, helper: bool) -> None:
    ref = _reference()
    cdi = tmp_path / "etc" / "cdi"
    cdi.mkdir(parents=True)
    for spec in ref["specs"]:
        shutil.copyfile(PEERS / spec["set"] / spec["file"], cdi / spec["file"])
    state, errors = read_cdi((str(cdi),), str(tmp_path), str(tmp_path / "sys"), helper_from=1 if helper else 10**9)
    assert errors == []
    read = {os.path.basename(s.path): s for s in state.specs}
    assert len(ref["specs"]) > 40 and len(read) == len(ref["specs"])
    wrong = []
    for spec in ref["specs"]:
        got = read[spec["file"]]
        valid = got.error is None
        names = sorted(f"{got.kind}={d.name}" for d in got.devices) if valid else []
        want = (spec["ref"]["valid"], sorted(spec["ref"]["devices"]))
        if (valid, names) != want:
            wrong.append(
                f"{_source(spec)}: devctl {(valid, names, got.error)}, the runtime {want} {spec['ref']['errors']}"
            )
    assert wrong == [], "\n".join(wrong)


def _scenario_ids() -> list[str]:
    return [s["id"] for s in _reference()["scenarios"]]


@pytest.mark.parametrize("scenario", _scenario_ids())
def test_every_recorded_scenario_resolves_as_the_runtime_does(tmp_path: Path, scenario: str) -> None:
    sc = next(s for s in _reference()["scenarios"] if s["id"] == scenario)
    for rel, text in sc["write"].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for rel, src in sc["copy"].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PEERS / src, tmp_path / rel)
    dirs = (str(tmp_path / "etc" / "cdi"), str(tmp_path / "var" / "run" / "cdi"))
    state, _ = read_cdi(dirs, str(tmp_path), str(tmp_path / "sys"))
    resolver = Resolver(state.specs)
    got_resolved, got_unresolved = {}, []
    for name in sc["ref"]["asked"]:
        r = resolver.resolve(name)
        if r.status == RESOLVED:
            got_resolved[name] = os.path.relpath(r.spec or "", tmp_path)
        else:
            got_unresolved.append(name)
    want = (sc["ref"]["resolved"], sorted(sc["ref"]["unresolved"]))
    assert (got_resolved, sorted(got_unresolved)) == want, f"{sc['id']}: {sc['title']} ({sc['source']})"
