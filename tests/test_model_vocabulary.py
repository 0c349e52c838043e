"""The model split by subject, ``Severity`` and ``Source`` as words, and doctor deciding on a typed fact (issue 30).

What a user sees must not change: each word prints, formats and serialises as the string it was; findings keep
their most-severe-first order; and doctor's hint for a refusal that came although devctl was root follows the
``SourceError``'s typed ``even_as_root``, never the words of its message.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import devctl.model as model
from devctl.analyze.doctor import diagnose, fails_on
from devctl.model import (
    PROCS,
    SEVERITIES,
    ErrorKind,
    Finding,
    NodePaths,
    NodeSnapshot,
    Severity,
    SocketStatus,
    Source,
    SourceError,
)
from devctl.model.serial import from_plain, to_plain
from devctl.node.procs import EVEN_AS_ROOT
from devctl.render.structured import json_document

SUBJECTS = ("sources", "findings", "plugins", "pods", "checkpoints", "cdi", "host", "kubelet", "snapshot")


def _public_names(module: str) -> set[str]:
    tree = ast.parse((Path(model.__file__).parent / f"{module}.py").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


def test_every_public_name_of_every_subject_is_one_import_from_devctl_model() -> None:
    for subject in SUBJECTS:
        module = __import__(f"devctl.model.{subject}", fromlist=["_"])
        for name in _public_names(subject):
            assert name in model.__all__, (subject, name)
            assert getattr(model, name) is getattr(module, name), (subject, name)
    assert len(set(model.__all__)) == len(model.__all__)


def test_severity_is_its_word_in_text_json_and_back() -> None:
    finding = Finding(Severity.WARNING, "stale-socket", "/s", "m", "h")
    assert f"{finding.severity} {finding.severity:>8}|" == "warning  warning|"
    assert str(Severity.ERROR) == "error" and Severity.INFO == "info"
    assert json.loads(json_document({"findings": (finding,)})) == {
        "findings": [{"severity": "warning", "code": "stale-socket", "subject": "/s", "message": "m", "hint": "h"}]
    }
    back = from_plain(Finding, to_plain(finding))
    assert back == finding and back.severity is Severity.WARNING


def test_findings_are_listed_most_severe_first_and_fail_on_follows_that_scale() -> None:
    assert [str(s) for s in SEVERITIES] == ["error", "warning", "info"]
    warning, info = Finding(Severity.WARNING, "x", "s", "m"), Finding(Severity.INFO, "y", "s", "m")
    assert fails_on([warning], Severity.WARNING) and not fails_on([warning], Severity.ERROR)
    assert not fails_on([info], Severity.WARNING) and fails_on([info], Severity.INFO)


def test_source_names_keep_the_words_of_the_contract() -> None:
    assert {s.value for s in Source} >= {
        "pod-resources",
        "plugins",
        "checkpoint",
        "topology",
        "identities",
        "dra-checkpoint",
        "cdi",
        "dra-drivers",
        "pod-list",
        "procs",
        "runtime",
        "kubelet-state",
        "plugins-dir",
    }
    assert model.POD_RESOURCES is Source.POD_RESOURCES and model.PLUGINS_DIR_SOURCE == "plugins-dir"
    assert "pod-resources" in model.ALL_SOURCES and "kubelet-state" in model.EXTRA_SOURCES
    assert SocketStatus.of_failure(ErrorKind.STALE) is SocketStatus.STALE


def test_a_source_error_serialises_as_before_and_even_as_root_only_when_said() -> None:
    plain = to_plain(SourceError(Source.POD_RESOURCES, "no socket", ErrorKind.MISSING))
    assert plain == {"source": "pod-resources", "message": "no socket", "kind": "missing", "subject": None}
    said = SourceError(PROCS, "m", ErrorKind.PERMISSION_DENIED, even_as_root=True)
    assert to_plain(said)["even_as_root"] is True
    assert from_plain(SourceError, to_plain(said)) == said
    assert from_plain(SourceError, plain).even_as_root is None


def _procs_finding(error: SourceError) -> Finding:
    paths = NodePaths("/r", "/r/k", "/r/k/device-plugins", "/r/k/pod-resources/kubelet.sock", "/r/sys", "/r/logs")
    snapshot = NodeSnapshot(taken_at="2026-01-01T00:00:00Z", paths=paths, errors=(error,))
    [finding] = [f for f in diagnose(snapshot) if f.subject == "procs"]
    return finding


def test_doctor_decides_even_as_root_on_the_typed_field_not_the_words() -> None:
    # The words alone (a snapshot file written before the field, or a message that happens to say so): the usual hint.
    worded = _procs_finding(SourceError(PROCS, f"/proc: 3 of 9 {EVEN_AS_ROOT}", ErrorKind.PERMISSION_DENIED))
    assert (worded.severity, worded.code) == ("error", "permission-denied")
    assert "run devctl as root" in worded.hint
    # The field alone, whatever the words: root already, so the hint asks for capabilities, not for root.
    typed = _procs_finding(SourceError(PROCS, "/proc: 3 of 9 closed", ErrorKind.PERMISSION_DENIED, even_as_root=True))
    assert (typed.severity, typed.code, typed.message) == ("error", "permission-denied", "/proc: 3 of 9 closed")
    assert "as root" not in typed.hint and "--profile=sysadmin" in typed.hint
