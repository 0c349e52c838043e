"""The manifests in deploy/: valid Kubernetes objects (checked offline), mounting every path the exporter reads.

The official ``kubernetes`` client's models are the schema: each object is
deserialized into its model class (``V1DaemonSet``...), and every key of the
YAML must be a field of the model it lands in (the deserializer itself drops
unknown keys silently, so a misspelt ``readOnly`` would otherwise pass).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
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


def _deepest_mount(mounts: list[Any], path: str) -> Any:
    """The mount a container sees at ``path``: the deepest one whose mount path is it or one of its parents."""
    covering = [m for m in mounts if path == m.mount_path or path.startswith(m.mount_path.rstrip("/") + "/")]
    assert covering, f"{path} is not mounted"
    return max(covering, key=lambda m: len(m.mount_path))


def test_every_path_the_exporter_reads_is_mounted_read_only() -> None:
    ds = _daemonset()
    pod = ds.spec.template.spec
    (container,) = pod.containers
    volumes = {v.name: v for v in pod.volumes}
    mounts = container.volume_mounts
    assert [m.mount_path for m in mounts if not m.read_only] == ["/host/var/lib/devctl"]  # the journal's, alone
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
        f"{paths.kubelet_dir}/cpu_manager_state",
        f"{paths.kubelet_dir}/memory_manager_state",
        f"{paths.kubelet_dir}/config.yaml",
        paths.sysfs,
        paths.pod_logs,
        f"{root}/etc/cdi",
        f"{root}/var/run/cdi",
    ]
    for path in read:
        m = _deepest_mount(mounts, path)
        # The host path behind it is the same path without the root.
        assert volumes[m.name].host_path is not None, f"{path} is hidden under {m.mount_path}"
        host = volumes[m.name].host_path.path + path[len(m.mount_path) :]
        assert host == path[len(root) :], (path, host)


def test_the_exporter_records_into_a_host_directory_of_its_own() -> None:
    """Issue 32: the DaemonSet records by default; /var/lib/devctl is its only writable host path."""
    pod = _daemonset().spec.template.spec
    (container,) = pod.containers
    volumes = {v.name: v for v in pod.volumes}
    journal = container.args[container.args.index("--journal") + 1]
    root = container.args[container.args.index("--root") + 1]
    assert journal == f"{root}/var/lib/devctl/journal"  # where `devctl events` looks by default
    m = _deepest_mount(container.volume_mounts, journal)
    assert not m.read_only and m.mount_path == f"{root}/var/lib/devctl"
    assert volumes[m.name].host_path.path == "/var/lib/devctl"
    assert volumes[m.name].host_path.type == "DirectoryOrCreate"
    writable = [volumes[x.name] for x in container.volume_mounts if not x.read_only]
    assert [v.name for v in writable] == [m.name]


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


# The list keys of a strategic merge patch (kubectl patch): containers and volumes by name, mounts by path.
_MERGE_KEYS = {"containers": "name", "volumes": "name", "volumeMounts": "mountPath"}


def _merged(base: Any, patch: Any, key: str | None = None) -> Any:
    """``patch`` applied to ``base`` as ``kubectl patch --type strategic`` does for the fields used here."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merged(base[k], v, k) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in _MERGE_KEYS:
        by = _MERGE_KEYS[key]
        out = [dict(item) for item in base]
        for item in patch:
            same = [i for i, old in enumerate(out) if old[by] == item[by]]
            if same:
                out[same[0]] = _merged(out[same[0]], item)
            else:
                out.append(item)
        return out
    return patch


def test_the_kernel_log_patch_mounts_dev_kmsg_where_the_exporter_reads_it_and_nothing_writable() -> None:
    """deploy/kmsg-patch.yaml (opt-in): /dev/kmsg at <root>/dev/kmsg, the path the recorder reads by default,
    read-only; the container privileged (the only way to open a host device), a valid DaemonSet after it."""
    from devctl.core.history import default_kmsg

    (patch,) = _documents("kmsg-patch.yaml")
    ds = _validate(_merged(_documents("daemonset.yaml")[1], patch))
    pod = ds.spec.template.spec
    (container,) = pod.containers
    root = container.args[container.args.index("--root") + 1]
    kmsg = default_kmsg(resolve_paths(root=root, env={}))
    m = _deepest_mount(container.volume_mounts, kmsg)
    assert (m.mount_path, m.read_only) == (kmsg, True)
    host = {v.name: v for v in pod.volumes}[m.name].host_path
    assert (host.path, host.type) == ("/dev/kmsg", "CharDevice")
    sc = container.security_context
    assert sc.privileged is True and sc.allow_privilege_escalation is not False  # the API refuses the two together
    assert [x.mount_path for x in container.volume_mounts if not x.read_only] == [f"{root}/var/lib/devctl"]
    # Without the patch the DaemonSet stays unprivileged.
    assert not _daemonset().spec.template.spec.containers[0].security_context.privileged


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


# --- What an admin checks before applying: no node secret in the pod, admission, image, build (issue 29, 8-10) ---


class MountFails(Exception):
    """The container runtime could not make a mount: the pod would not start."""


def _container_view(host: Path, pod: Any, container: Any) -> set[str]:
    """Every path the container sees under its hostPath and emptyDir mounts, on a host whose root is ``host``.

    As the runtime does it: mounts are made shallowest first, a hostPath mount
    shows the host's tree under it (submounts included: Kubernetes binds
    recursively), and a deeper mount hides what the shallower one had at its
    mount point. A mount point inside a read-only mount must already exist
    there: the runtime cannot make it (MountFails).
    """
    volumes = {v.name: v for v in pod.volumes}
    mounts = sorted(container.volume_mounts, key=lambda m: m.mount_path.count("/"))
    made: list[Any] = []
    for m in mounts:
        parent = next((p for p in reversed(made) if m.mount_path.startswith(p.mount_path.rstrip("/") + "/")), None)
        if parent is not None and parent.read_only:
            source = volumes[parent.name].host_path
            inside = m.mount_path[len(parent.mount_path) :]
            if source is None or not (host / source.path.lstrip("/") / inside.lstrip("/")).is_dir():
                raise MountFails(f"mkdir {m.mount_path}: read-only file system")
        made.append(m)
    seen: set[str] = set()
    for m in mounts:
        source = volumes[m.name].host_path
        if source is None:
            continue  # emptyDir: nothing in it
        top = host / source.path.lstrip("/")
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                path = m.mount_path + "/" + str(Path(dirpath, name).relative_to(top))
                if _deepest_mount(mounts, path) is m:
                    seen.add(path)
    return seen


UID = "0a1b2c3d-1111-4222-8333-444455556666"


def _node(host: Path, *, pki: bool = True) -> None:
    """A node's disk as devctl and the kubelet leave it: what devctl reads beside the kubelet's secrets."""
    kubelet = host / "var/lib/kubelet"
    files = {
        "device-plugins/kubelet.sock": "",
        "device-plugins/nvidia-gpu.sock": "",
        "device-plugins/kubelet_internal_checkpoint": "{}",
        "pod-resources/kubelet.sock": "",
        "plugins_registry/gpu.example.com-reg.sock": "",
        "plugins/gpu.example.com/dra.sock": "",
        "dra_manager_state": "{}",
        "cpu_manager_state": "{}",
        "memory_manager_state": "{}",
        "config.yaml": "kind: KubeletConfiguration\n",
        f"pods/{UID}/volumes/kubernetes.io~secret/db-password/password": "hunter2",
        f"pods/{UID}/volumes/kubernetes.io~projected/kube-api-access-x/token": "eyJhbGciOi",
        f"pods/{UID}/etc-hosts": "",
    }
    if pki:
        files["pki/kubelet-client-current.pem"] = "-----BEGIN EC PRIVATE KEY-----"
        files["pki/kubelet.key"] = "-----BEGIN RSA PRIVATE KEY-----"
    for rel, text in files.items():
        (kubelet / rel).parent.mkdir(parents=True, exist_ok=True)
        (kubelet / rel).write_text(text)
    for rel in (f"var/log/pods/ml_train-0_{UID}", "sys/devices/system/node/node0", "etc/cdi", "var/run/cdi"):
        (host / rel).mkdir(parents=True)
    (host / "etc/cdi/nvidia.yaml").write_text("cdiVersion: 0.6.0\n")
    (host / "etc/shadow").write_text("root:*:19000::::::")


def test_the_pod_sees_what_devctl_reads_and_no_node_secret(tmp_path: Path) -> None:
    _node(tmp_path)
    pod = _daemonset().spec.template.spec
    (container,) = pod.containers
    seen = _container_view(tmp_path, pod, container)
    kubelet = "/host/var/lib/kubelet"
    for path in (
        f"{kubelet}/device-plugins/kubelet.sock",
        f"{kubelet}/device-plugins/nvidia-gpu.sock",
        f"{kubelet}/device-plugins/kubelet_internal_checkpoint",
        f"{kubelet}/pod-resources/kubelet.sock",
        f"{kubelet}/plugins_registry/gpu.example.com-reg.sock",
        f"{kubelet}/plugins/gpu.example.com/dra.sock",
        f"{kubelet}/dra_manager_state",
        f"{kubelet}/cpu_manager_state",
        f"{kubelet}/memory_manager_state",
        f"{kubelet}/config.yaml",
        f"/host/var/log/pods/ml_train-0_{UID}",
        "/host/sys/devices/system/node/node0",
        "/host/etc/cdi/nvidia.yaml",
    ):
        assert path in seen, f"devctl reads {path}, the pod does not see it"
    leaked = sorted(p for p in seen if "/pki/" in p or "/pods/" in p.replace("/var/log/pods/", "") or "shadow" in p)
    assert leaked == []


def test_on_a_node_without_pki_the_pod_does_not_start_rather_than_show_it(tmp_path: Path) -> None:
    """docs/exporter.md says so: the empty dir over pki/ needs pki/ to exist (the runtime cannot make it read-only)."""
    _node(tmp_path, pki=False)
    pod = _daemonset().spec.template.spec
    with pytest.raises(MountFails, match="pki"):
        _container_view(tmp_path, pod, pod.containers[0])


def test_the_namespace_admits_the_pods_it_runs() -> None:
    namespace, ds = _documents("daemonset.yaml")
    labels = namespace["metadata"]["labels"]
    pod = ds["spec"]["template"]["spec"]
    # Pod Security's baseline level forbids hostPath volumes, restricted also uid 0: only privileged admits this pod.
    assert any("hostPath" in v for v in pod["volumes"])
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels.get("pod-security.kubernetes.io/warn", "privileged") == "privileged"
    assert ds["metadata"]["namespace"] == namespace["metadata"]["name"]


def test_an_exporter_preempts_no_workload() -> None:
    pod = _daemonset().spec.template.spec
    assert pod.priority_class_name is None or not pod.priority_class_name.startswith("system-")


def test_the_image_is_the_one_make_image_push_builds_and_pushes() -> None:
    """The manifest names a registry to replace, and `make image-push` (docs/exporter.md) pushes that very name."""
    (container,) = _daemonset().spec.template.spec.containers
    image = container.image
    registry, _, rest = image.partition("/")
    assert "." in registry and rest.startswith("devctl:"), image  # a registry host, not docker.io by default
    version = re.search(r'^version = "(.+)"', (DEPLOY.parent / "pyproject.toml").read_text(), re.M)
    assert version and image.endswith(f":{version.group(1)}")
    out = _make("-n", "image-push", "CONTAINER_ENGINE=podman").stdout.splitlines()
    assert out == [f"podman build -f deploy/Containerfile -t {image} .", f"podman push {image}"]


def _containerfile() -> str:
    return (DEPLOY / "Containerfile").read_text()


def test_the_base_image_is_pinned_by_digest_and_needs_no_shell_to_run() -> None:
    froms = re.findall(r"^FROM (\S+)", _containerfile(), re.M)
    assert len(froms) == 2
    for base in froms:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), base
    # Exec form: `kubectl exec ... -- devctl ARGS` and the pod's args run devctl itself, never through /bin/sh.
    assert re.search(r'^ENTRYPOINT \["devctl"\]$', _containerfile(), re.M)
    assert re.search(r"^CMD \[", _containerfile(), re.M)


def _copied() -> list[str]:
    """What the build stage copies from the context: COPY's sources (not --from= ones)."""
    sources = []
    for line in re.findall(r"^COPY (?!--from)(.+)$", _containerfile(), re.M):
        sources += line.split()[:-1]
    return sources


def test_the_build_context_leaves_out_the_venv_and_git() -> None:
    patterns = [
        line.strip()
        for line in (DEPLOY.parent / ".containerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(name: str) -> bool:  # `**/X` is X at any depth; fnmatch's * crosses `/`
        return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(name, p.replace("**/", "*/")) for p in patterns)

    for name in (".git", ".venv", "devctl.egg-info", "devctl/__pycache__", "devctl/cli/__pycache__", "bench/results"):
        assert ignored(name), f"{name} goes into the build"
    assert _copied() == ["pyproject.toml", "README.md", "devctl"]
    for source in _copied():
        assert not ignored(source), f"{source} is needed and ignored"


def test_the_wheel_builds_from_what_the_containerfile_copies(tmp_path: Path) -> None:
    """Only pyproject.toml, README.md and devctl/ go in: the wheel the image installs builds from them alone."""
    for source in _copied():
        src = DEPLOY.parent / source
        if src.is_dir():
            shutil.copytree(src, tmp_path / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(src, tmp_path / source)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "wheels"), str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (wheel,) = (tmp_path / "wheels").glob("devctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "devctl/cli/start.py" in names and any(n.startswith("devctl/lab/sim/scenarios/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "devctl = devctl.cli.start:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


# --- The quick start: `make demo` installs once, `make test` installs no system package unasked ---


# Variables of the Makefile (and of a make this test may run under) that would change what it does.
MAKE_VARIABLES = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CI", "INSTALL_PROMETHEUS", "VENV", "REGISTRY", "IMAGE"}


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """make in the checkout, with ``env`` as its whole environment (else ours without the Makefile's variables)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES and k != "CONTAINER_ENGINE"}
    return subprocess.run(
        [make, "--no-print-directory", "-C", str(DEPLOY.parent), *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_a_second_make_demo_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").touch()
    first = _make("-n", "demo", f"VENV={venv}")
    assert "pip install" in first.stdout
    (venv / ".installed").touch()  # what the first run's install leaves
    again = _make("-n", "demo", f"VENV={venv}")
    assert again.stdout.splitlines() == [f"{venv}/bin/devctl demo"]


def _fake_apt(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, log = tmp_path / "bin", tmp_path / "apt-get.log"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (bin_dir / "apt-get").chmod(0o755)
    return bin_dir, log


def test_make_test_installs_no_system_package_unasked(tmp_path: Path) -> None:
    bin_dir, log = _fake_apt(tmp_path)  # apt-get there, prometheus not: today's laptop
    p = _make("prometheus", env={"PATH": str(bin_dir), "HOME": str(tmp_path)})
    assert p.returncode == 0
    assert not log.exists(), log.read_text()
    assert "the fleet integration test will skip" in p.stderr and "INSTALL_PROMETHEUS=1" in p.stderr


@pytest.mark.parametrize("asked", [{"CI": "true"}, {"INSTALL_PROMETHEUS": "1"}])
def test_under_ci_or_when_asked_make_test_installs_prometheus_saying_so(tmp_path: Path, asked: dict[str, str]) -> None:
    bin_dir, log = _fake_apt(tmp_path)
    p = _make("prometheus", env={"PATH": str(bin_dir), "HOME": str(tmp_path), **asked})
    assert p.returncode == 0
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq prometheus"]
    assert "make: installing prometheus with apt-get" in p.stderr
