"""The manifests in deploy/: valid Kubernetes objects (checked offline), mounting every path the exporter reads.

The official ``kubernetes`` client's models are the schema: each object is
deserialized into its model class (``V1DaemonSet``...), and every key of the
YAML must be a field of the model it lands in (the deserializer itself drops
unknown keys silently, so a misspelt ``readOnly`` would otherwise pass).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes")
from kubernetes.client import ApiClient, models  # noqa: E402

from devctl.node.paths import resolve_paths  # noqa: E402

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
METRICS = {
    "devctl_device_health",
    "devctl_device_allocated",
    "devctl_resource_capacity",
    "devctl_resource_allocatable",
    "devctl_resource_allocated",
    "devctl_plugin_up",
    "devctl_plugin_rpc_duration_seconds",
    "devctl_claim_state",
    "devctl_doctor_findings",
    "devctl_source_up",
    "devctl_last_refresh_timestamp_seconds",
}
# The Prometheus Operator's PodMonitor fields deploy/podmonitor.yaml may use (monitoring.coreos.com/v1).
PODMONITOR_SPEC = {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel", "podTargetLabels"}
PODMONITOR_ENDPOINT = {"port", "path", "interval", "scrapeTimeout", "relabelings", "metricRelabelings", "scheme"}
RELABELING = {"sourceLabels", "targetLabel", "action", "regex", "replacement", "separator", "modulus"}


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _model_name(doc: dict[str, Any]) -> str:
    """The client's model class: ``apps/v1`` DaemonSet is ``V1DaemonSet``, ``v1`` Namespace ``V1Namespace``."""
    return f"{doc['apiVersion'].split('/')[-1].capitalize()}{doc['kind']}"


_PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def _unknown_fields(data: Any, type_name: str, where: str) -> list[str]:
    """Every key of ``data`` that the model ``type_name`` has no field for, and every value of the wrong type."""
    if type_name == "object":
        return []
    if type_name in _PRIMITIVES:
        ok = isinstance(data, _PRIMITIVES[type_name]) and not (type_name == "int" and isinstance(data, bool))
        return [] if ok else [f"{where}: {data!r} is not {type_name}"]
    if m := re.fullmatch(r"(?:list|List)\[(.+)\]", type_name):
        if not isinstance(data, list):
            return [f"{where}: not a list"]
        return [e for i, item in enumerate(data) for e in _unknown_fields(item, m.group(1), f"{where}[{i}]")]
    if m := re.fullmatch(r"(?:dict\(str, (.+)\)|Dict\[str, (.+)\])", type_name):
        if not isinstance(data, dict):
            return [f"{where}: not a mapping"]
        value_type = m.group(1) or m.group(2)
        return [e for k, v in data.items() for e in _unknown_fields(v, value_type, f"{where}.{k}")]
    klass = getattr(models, type_name)
    if not isinstance(data, dict):
        return [f"{where}: not an object ({type_name})"]
    by_key = {key: attr for attr, key in klass.attribute_map.items()}
    errors = []
    for key, value in data.items():
        if key not in by_key:
            errors.append(f"{where}.{key}: not a field of {type_name}")
        else:
            errors.extend(_unknown_fields(value, klass.openapi_types[by_key[key]], f"{where}.{key}"))
    return errors


def _validate(doc: dict[str, Any]) -> Any:
    name = _model_name(doc)
    assert hasattr(models, name), f"no model {name} for {doc['apiVersion']} {doc['kind']}"
    assert _unknown_fields(doc, name, doc["kind"]) == []
    return ApiClient().deserialize(json.dumps(doc), name, "application/json")


def test_every_kubernetes_manifest_is_a_valid_object() -> None:
    kinds = []
    for name in ("daemonset.yaml",):
        for doc in _documents(name):
            obj = _validate(doc)
            kinds.append(type(obj).__name__)
    assert kinds == ["V1Namespace", "V1DaemonSet"]


def test_the_schema_check_catches_a_misspelt_field() -> None:
    doc = _documents("daemonset.yaml")[1]
    doc["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readonly"] = True
    assert any("readonly" in e for e in _unknown_fields(doc, "V1DaemonSet", "DaemonSet"))


def _daemonset() -> Any:
    return _validate(_documents("daemonset.yaml")[1])


def test_every_path_the_exporter_reads_is_mounted_read_only() -> None:
    ds = _daemonset()
    pod = ds.spec.template.spec
    (container,) = pod.containers
    volumes = {v.name: v for v in pod.volumes}
    mounts = container.volume_mounts
    assert all(m.read_only for m in mounts)
    assert all(volumes[m.name].host_path is not None for m in mounts)
    root = container.args[container.args.index("--root") + 1]
    paths = resolve_paths(root=root, env={})
    read = [
        paths.plugins_dir,
        paths.kubelet_socket,
        paths.checkpoint,
        paths.pod_resources,
        paths.plugins_registry,
        f"{paths.kubelet_dir}/plugins",
        f"{paths.kubelet_dir}/dra_manager_state",
        f"{paths.kubelet_dir}/pods",
        paths.sysfs,
        paths.pod_logs,
        f"{root}/etc/cdi",
        f"{root}/var/run/cdi",
    ]
    for path in read:
        mount = [m for m in mounts if path == m.mount_path or path.startswith(m.mount_path.rstrip("/") + "/")]
        assert mount, f"{path} is not mounted"
        # The host path behind it is the same path without the root.
        (m,) = mount
        host = volumes[m.name].host_path.path + path[len(m.mount_path) :]
        assert host == path[len(root) :], (path, host)


def test_the_container_has_no_capability_and_a_readiness_probe_on_healthz() -> None:
    ds = _daemonset()
    (container,) = ds.spec.template.spec.containers
    sc = container.security_context
    assert sc.capabilities.drop == ["ALL"] and not sc.capabilities.add
    assert sc.read_only_root_filesystem and sc.allow_privilege_escalation is False
    assert not ds.spec.template.spec.host_network and not ds.spec.template.spec.host_pid
    assert container.readiness_probe.http_get.path == "/healthz"
    port = container.args[container.args.index("--listen") + 1]
    assert port == f":{container.ports[0].container_port}"
    assert container.resources.limits["memory"] and container.resources.requests["cpu"]


def test_the_podmonitor_selects_the_daemonset_and_labels_the_node() -> None:
    (monitor,) = _documents("podmonitor.yaml")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "PodMonitor"
    assert _unknown_fields(monitor["metadata"], "V1ObjectMeta", "metadata") == []
    spec = monitor["spec"]
    assert set(spec) <= PODMONITOR_SPEC
    assert _unknown_fields(spec["selector"], "V1LabelSelector", "spec.selector") == []
    pod_labels = _daemonset().spec.template.metadata.labels
    assert spec["selector"]["matchLabels"].items() <= pod_labels.items()
    for endpoint in spec["podMetricsEndpoints"]:
        assert set(endpoint) <= PODMONITOR_ENDPOINT
        assert all(set(r) <= RELABELING for r in endpoint["relabelings"])
        assert any(r["targetLabel"] == "node" for r in endpoint["relabelings"])


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is not installed")
def test_the_scrape_config_passes_promtool(tmp_path: Path) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus-scrape.yaml").read_text())
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump({"global": {"scrape_interval": "15s"}, **config}))
    p = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True, timeout=30)
    if "kubernetes_sd_configs not found" in p.stdout + p.stderr:
        pytest.skip("this promtool is built without Kubernetes service discovery (Debian's package)")
    assert p.returncode == 0, p.stdout + p.stderr


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


def test_the_dashboard_queries_only_the_contracts_metrics() -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 8
    for expr in exprs:
        assert set(re.findall(r"devctl_[a-z_]+?(?=_bucket\b|\b)", expr)) <= METRICS, expr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is not installed")
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"devctl:panel{i}", "expr": expr} for i, expr in enumerate(_dashboard_exprs())
    ]}]}  # fmt: skip
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    p = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_containerfile_installs_the_wheel_and_runs_devctl() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert "pip wheel" in text and re.search(r"pip install .*\.whl", text)
    assert 'ENTRYPOINT ["devctl"]' in text
