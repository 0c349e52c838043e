"""The kubelet's state files read as the kubelet reads them, against the real kubelet's own verdicts.

../shared/testdata/peers/state-reference.json holds 30+ published state files, each with its source
and what the real v1.32 kubelet's loaders said of it; "master_expect" marks the verdict of kubelets
newer than 1.32 where a sample is a newer layout (authority "informative"). devctl must agree, and
doctor must never advise removing a file a kubelet accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import devctl

from devctl.node.checkpoint import read_checkpoint
from devctl.node.dra_checkpoint import read_dra_checkpoint
from devctl.node.kubeletstate import read_cpu_state, read_memory_state

PEERS = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "peers"
REFERENCE = PEERS / "state-reference.json"
FILES = {
    "cpu": "var/lib/kubelet/cpu_manager_state",
    "memory": "var/lib/kubelet/memory_manager_state",
    "device": "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
    "dra": "var/lib/kubelet/dra_manager_state",
}


def _samples() -> list[Any]:
    if not REFERENCE.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared reference not found at {REFERENCE}"))]
    samples = json.loads(REFERENCE.read_text())["samples"]
    return [pytest.param(s, id=s["id"]) for s in samples]


def _expected(sample: dict[str, Any]) -> tuple[str, str]:
    """The verdict devctl must give, and whose it is."""
    if sample["authority"] == "informative" and sample.get("master_expect"):
        return sample["master_expect"], "kubelets newer than 1.32 (master), a newer layout"
    return ("accept" if sample["ref"]["accepted"] else "reject"), "the real kubelet v1.32"


def _verdict(kind: str, path: Path) -> tuple[bool | None, str]:
    if kind == "cpu":
        cpu = read_cpu_state(str(path))
        return cpu.checksum_ok, cpu.checksum_rule or ""
    if kind == "memory":
        memory = read_memory_state(str(path))
        return memory.checksum_ok, memory.checksum_rule or ""
    if kind == "device":
        return read_checkpoint(str(path)).checksum_ok, ""
    return read_dra_checkpoint(str(path)).checksum_ok, ""


@pytest.mark.parametrize("sample", _samples())
def test_devctl_accepts_what_the_kubelet_accepts(sample, tmp_path):
    path = tmp_path / "state"
    path.write_text(sample["text"])
    expected, whose = _expected(sample)
    ok, rule = _verdict(sample["kind"], path)
    where = f"{sample['id']} ({sample['src']}): {whose} says {expected}; devctl ok={ok} ({rule})"
    if expected == "accept":
        assert ok is not False, where
        if ok is None:  # unknown, never a mismatch: the rule says why
            assert "not verified" in rule or "checksum 0" in rule, where
    else:
        assert ok is False, where
    if sample["kind"] in ("cpu", "memory"):
        assert rule, where  # every verdict says which layout and whose rules


def _accepted_somewhere(sample: dict[str, Any]) -> bool:
    return sample["kind"] in ("cpu", "memory") and (
        sample["ref"]["accepted"] or str(sample.get("master_expect") or "").startswith("accept")
    )


@pytest.mark.parametrize("sample", [s for s in _samples() if s.values[0] is None or _accepted_somewhere(s.values[0])])
def test_doctor_never_advises_removing_a_file_a_kubelet_accepts(sample, tmp_path):
    state = tmp_path / FILES[sample["kind"]]
    state.parent.mkdir(parents=True)
    state.write_text(sample["text"])
    r = devctl(tmp_path, "doctor", "-o", "json")
    findings = r.json["findings"]
    about = [f for f in findings if state.name in f"{f['subject']} {f['message']} {f['hint']}"]
    for f in about:
        text = f"{f['message']} {f['hint']}".lower()
        assert "remove" not in text and "delete" not in text, f"{sample['id']} ({sample['src']}): {f}"
    checksum = [f for f in findings if f["code"] in ("cpu-state-checksum", "memory-state-checksum")]
    assert [f["severity"] for f in checksum] in ([], ["warning"]), sample["id"]  # never "the kubelet will not start"


def _refused_everywhere(sample: dict[str, Any]) -> bool:
    return sample["kind"] in ("cpu", "memory") and _expected(sample)[0] == "reject" and not _accepted_somewhere(sample)


@pytest.mark.parametrize("sample", [s for s in _samples() if s.values[0] is None or _refused_everywhere(s.values[0])])
def test_doctor_says_the_kubelet_will_not_start_on_a_file_every_kubelet_refuses(sample, tmp_path):
    # A CPU or a memory manager state file alike: one error finding of its own, not a warning about a source.
    state = tmp_path / FILES[sample["kind"]]
    state.parent.mkdir(parents=True)
    state.write_text(sample["text"])
    findings = devctl(tmp_path, "doctor", "-o", "json").json["findings"]
    code = f"{sample['kind']}-state-checksum"
    (finding,) = [f for f in findings if f["code"] == code]
    # An error, unless devctl knows a kubelet that still reads it (v1 entries, which kubelet <=1.32 migrates
    # while their containers run): then a warning that names it, since devctl cannot tell which kubelet runs.
    expected = "warning" if " reads it" in finding["message"] else "error"
    assert finding["severity"] == expected, f"{sample['id']} ({sample['src']}): {finding}"
