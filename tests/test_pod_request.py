"""A pod's requests as admission reads them: quantities, defaulting, QoS, init containers, manifests (issue 31)."""

from __future__ import annotations

import io
import json
import os
from fractions import Fraction

import pytest

from devctl.analyze.admission.request import RequestError, parse_quantity, pod_request, request_from_words
from devctl.model import ErrorKind
from devctl.node.podmanifest import MAX_MANIFEST_BYTES, ManifestError, read_pod_manifest

Gi = 2**30
Mi = 2**20


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("100m", Fraction(1, 10)),
        ("2", Fraction(2)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1Gi", Fraction(Gi)),
        ("512Mi", Fraction(512 * Mi)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),  # an exponent, not exa followed by 3
        ("1E", Fraction(10**18)),  # exa
        ("2e-3", Fraction(2, 1000)),
        ("1.5Gi", Fraction(3 * Gi, 2)),
        ("+4k", Fraction(4000)),
        (3, Fraction(3)),  # YAML's `cpu: 3`
        (0.25, Fraction(1, 4)),  # YAML's `cpu: 0.25`
        ("0", Fraction(0)),
    ],
)
def test_quantities_parse_exactly(text: object, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize("text", ["", "Gi", "1Gb", "1 Gi", "-1", "1e31", "1.2.3", "x", True, None, "1" * 65])
def test_bad_quantities_are_refused(text: object) -> None:
    with pytest.raises(RequestError):
        parse_quantity(text)


def _pod(*containers: dict[str, object], init: tuple[dict[str, object], ...] = (), **spec: object) -> dict[str, object]:
    body: dict[str, object] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": body}


def _c(name: str, requests: dict[str, object] | None = None, limits: dict[str, object] | None = None, **kw: object):
    resources: dict[str, object] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **kw}


def _rl(cpu: str, memory: str) -> dict[str, object]:
    """getResourceList of upstream qos_test.go: an empty string leaves the resource out."""
    out: dict[str, object] = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    return out


# Each case follows one of kubernetes/kubernetes pkg/apis/core/v1/helper/qos/qos_test.go TestComputePodQOS,
# named as upstream names its pod; the data is written here as manifests.
QOS_CASES = [
    ("guaranteed", [("100m", "100Mi", "100m", "100Mi")], "Guaranteed"),
    ("guaranteed-guaranteed", [("100m", "100Mi", "100m", "100Mi")] * 2, "Guaranteed"),
    ("best-effort-best-effort", [("", "", "", "")] * 2, "BestEffort"),
    ("best-effort", [("", "", "", "")], "BestEffort"),
    ("best-effort-burstable", [("", "", "", ""), ("1", "", "2", "")], "Burstable"),
    ("best-effort-guaranteed", [("", "", "", ""), ("10m", "100Mi", "10m", "100Mi")], "Burstable"),
    ("burstable-cpu-guaranteed-memory", [("", "100Mi", "", "100Mi")], "Burstable"),
    ("burstable-no-limits", [("100m", "100Mi", "", "")], "Burstable"),
    ("burstable-guaranteed", [("1", "100Mi", "2", "100Mi"), ("100m", "100Mi", "100m", "100Mi")], "Burstable"),
    (
        "burstable-unbounded-but-requests-match-limits",
        [("100m", "100Mi", "200m", "200Mi"), ("100m", "100Mi", "", "")],
        "Burstable",
    ),
    ("burstable-1", [("10m", "100Mi", "100m", "200Mi")], "Burstable"),
    ("burstable-2", [("0", "0", "100m", "200Mi")], "Burstable"),
]


@pytest.mark.parametrize(("name", "containers", "qos"), QOS_CASES, ids=[c[0] for c in QOS_CASES])
def test_qos_as_upstream_get_pod_qos(name: str, containers: list[tuple[str, str, str, str]], qos: str) -> None:
    pod = _pod(*(_c(f"c{i}", _rl(rc, rm), _rl(lc, lm)) for i, (rc, rm, lc, lm) in enumerate(containers)))
    assert pod_request(pod).qos == qos


def test_qos_best_effort_hugepages() -> None:
    """qos_test.go TestComputePodQOS "best-effort-hugepages": hugepages alone do not make a class."""
    res = {"cpu": "0", "memory": "0", "hugepages-2Mi": "1Gi"}
    assert pod_request(_pod(_c("c", dict(res), dict(res)))).qos == "BestEffort"


def test_qos_counts_init_containers() -> None:
    """qos_test.go TestComputePodQOS "init-container": a Burstable init container makes the pod Burstable."""
    pod = _pod(_c("app"), init=(_c("init", _rl("10m", "100Mi"), _rl("100m", "200Mi")),))
    assert pod_request(pod).qos == "Burstable"


@pytest.mark.parametrize(
    ("name", "container", "pod_level", "qos"),
    [
        ("guaranteed-with-pod-level-resources", ("", "", "", ""), ("10m", "100Mi", "10m", "100Mi"), "Guaranteed"),
        (
            "guaranteed-with-pod-and-container-level-resources",
            ("3m", "10Mi", "5m", "20Mi"),
            ("10m", "100Mi", "10m", "100Mi"),
            "Guaranteed",
        ),
        ("burstable-with-pod-level-resources", ("", "", "", ""), ("10m", "10Mi", "20m", "50Mi"), "Burstable"),
        (
            "burstable-with-pod-and-container-level-requests",
            ("5m", "10Mi", "", ""),
            ("10m", "10Mi", "", ""),
            "Burstable",
        ),
    ],
)
def test_qos_with_pod_level_resources(
    name: str, container: tuple[str, ...], pod_level: tuple[str, ...], qos: str
) -> None:
    """qos_test.go TestComputePodQOS, the cases with podLevelResourcesEnabled: the pod's resources decide."""
    rc, rm, lc, lm = container
    prc, prm, plc, plm = pod_level
    pod = _pod(_c("c", _rl(rc, rm), _rl(lc, lm)), resources={"requests": _rl(prc, prm), "limits": _rl(plc, plm)})
    assert pod_request(pod).qos == qos


def test_requests_default_to_limits_and_round_as_the_kubelet() -> None:
    """Only limits given: requested at the limits (API defaulting), so the pod is Guaranteed; CPU in millicores
    rounded up (1.0001m -> 2), memory in bytes."""
    pod = _pod(_c("main", None, {"cpu": "1.5", "memory": "1.5Gi", "nvidia.com/gpu": 2}), _c("tiny", {"cpu": "1.0001m"}))
    request = pod_request(pod)
    main, tiny = request.containers
    assert main.requests == {"cpu": 1500, "memory": 3 * Gi // 2, "nvidia.com/gpu": 2}
    assert main.limits == main.requests
    assert tiny.requests == {"cpu": 2}
    assert request.qos == "Burstable"  # tiny has no limits
    assert (request.namespace, request.name) == ("ml", "p")
    assert pod_request(_pod(_c("main", None, {"cpu": "2", "memory": "1Gi"}))).qos == "Guaranteed"


def test_init_containers_come_first_and_sidecars_are_restartable() -> None:
    pod = _pod(
        _c("app", {"cpu": "1"}),
        init=(_c("setup", {"cpu": "2"}), _c("proxy", {"cpu": "100m"}, restartPolicy="Always")),
    )
    names = [(c.name, c.init, c.restartable) for c in pod_request(pod).containers]
    assert names == [("setup", True, False), ("proxy", True, True), ("app", False, False)]


@pytest.mark.parametrize(
    ("pod", "words"),
    [
        (_pod(_c("c", {"nvidia.com/gpu": "0.5"})), "nvidia.com/gpu"),
        (_pod(_c("c", {"cpu": "lots"})), "cpu"),
        ({"kind": "Pod", "spec": {"containers": []}}, "no containers"),
        ({"kind": "Pod"}, "no spec"),
    ],
)
def test_a_pod_the_api_would_refuse_is_a_typed_error(pod: dict[str, object], words: str) -> None:
    with pytest.raises(RequestError, match=words):
        pod_request(pod)


def test_request_from_words() -> None:
    request = request_from_words(["nvidia.com/gpu=2", "cpu=8", "memory=32Gi"])
    (main,) = request.containers
    assert main.name == "main"
    assert main.requests == main.limits == {"nvidia.com/gpu": 2, "cpu": 8000, "memory": 32 * Gi}
    assert request.qos == "Guaranteed"
    # Devices alone: the kubelet's class is BestEffort (no CPU or memory), so no exclusive CPUs follow.
    assert request_from_words(["nvidia.com/gpu=1"]).qos == "BestEffort"


@pytest.mark.parametrize("word", ["gpu", "=2", "cpu=", "cpu=eight", "nvidia.com/gpu=1.5", "bad name=1", "cpu=-1"])
def test_a_bad_word_is_a_usage_error_naming_it(word: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_from_words(["memory=1Gi", word])
    assert caught.value.subject == word
    assert repr(word) in str(caught.value)


def test_a_resource_asked_twice_is_refused() -> None:
    with pytest.raises(RequestError, match="twice"):
        request_from_words(["cpu=1", "cpu=2"])


# --- the manifest file --------------------------------------------------------------------------------------


def test_manifest_yaml_and_json(tmp_path) -> None:
    pod = _pod(_c("main", None, {"cpu": "2", "memory": "1Gi"}))
    (tmp_path / "pod.json").write_text(json.dumps(pod, indent="\t"))  # tabs: JSON, not YAML
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: main\n    resources:\n      limits: {cpu: 2, memory: 1Gi}\n"
    )
    for name in ("pod.json", "pod.yaml"):
        assert pod_request(read_pod_manifest(str(tmp_path / name))).qos == "Guaranteed"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("apiVersion: apps/v1\nkind: Deployment\n", "not a Pod: kind 'Deployment'"),
        ("containers:\n- name: a\n", "not a Pod: no kind"),
        ("apiVersion: v1\nkind: List\nitems: []\n", "kind 'List'"),
        ("apiVersion: v2\nkind: Pod\n", "apiVersion 'v2'"),
        ("kind: Pod\napiVersion: v1\n---\nkind: Pod\napiVersion: v1\n", "several YAML documents"),
        ("- a\n- b\n", "not a Pod manifest"),
        ("{{{", "not YAML or JSON"),
    ],
)
def test_a_manifest_that_is_not_a_pod_is_one_line(tmp_path, text: str, words: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError) as caught:
        read_pod_manifest(str(path))
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_100_mb_manifest_is_refused_without_being_read(tmp_path) -> None:
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.truncate(100 * 1024 * 1024)  # sparse: no 100 MB written
    with pytest.raises(ManifestError) as caught:
        read_pod_manifest(str(path))
    assert caught.value.kind == ErrorKind.TOO_LARGE
    assert "too large" in str(caught.value)
    assert os.path.getsize(path) == 100 * 1024 * 1024


class _EndlessStdin(io.RawIOBase):
    """A stdin that never ends, counting what was taken from it."""

    taken = 0

    def read(self, size: int = -1) -> bytes:
        size = 1 << 20 if size < 0 else size
        self.taken += size
        return b"#" * size


def test_stdin_is_read_to_the_bound_and_no_further() -> None:
    stdin = _EndlessStdin()
    with pytest.raises(ManifestError) as caught:
        read_pod_manifest("-", stdin)  # type: ignore[arg-type]
    assert caught.value.kind == ErrorKind.TOO_LARGE
    assert stdin.taken == MAX_MANIFEST_BYTES + 1


def test_stdin_manifest() -> None:
    text = b"apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a}]\n"
    assert pod_request(read_pod_manifest("-", io.BytesIO(text))).qos == "BestEffort"
