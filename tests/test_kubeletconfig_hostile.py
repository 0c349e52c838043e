"""The kubelet's config read from a hostile root (red team, FX2): an alias bomb in a field, a ``--config`` or a
symlink that leads out of ``--root``, values that must not be echoed. Each test fails on the old code."""

from __future__ import annotations

import json
from pathlib import Path

from devctl.model import NodePaths
from devctl.node.kubeletconfig import read_kubelet_policy
from devctl.node.paths import resolve_paths
from tests.hostile_bomb import anchors, run_bounded

HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _root(tmp_path: Path, argv: list[str] | None = None) -> NodePaths:
    """A root with var/lib/kubelet and, given ``argv``, a fake <root>/proc/4242 kubelet with that command line."""
    root = tmp_path / "root"
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "proc").mkdir()
    if argv is not None:
        (root / "proc/4242").mkdir()
        (root / "proc/4242/comm").write_text("kubelet\n")
        (root / "proc/4242/cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return resolve_paths(root=str(root), env={})


def test_an_alias_bomb_in_the_config_is_named_by_its_type_in_bounded_memory(tmp_path: Path) -> None:
    paths = _root(tmp_path)
    config = Path(paths.kubelet_dir) / "config.yaml"
    bomb = "topologyManagerPolicy: *i\ncpuManagerPolicyOptions: {full-pcpus-only: *i}\nreservedSystemCPUs: *i\n"
    config.write_text(HEAD + "x:\n" + anchors("  ") + bomb + "reservedMemory: [{numaNode: *i, limits: {}}]\n")
    code = f"""
from devctl.node.kubeletconfig import read_kubelet_policy
from devctl.node.kubeletconfig import read_kubelet_policy
from devctl.node.paths import resolve_paths
policy, errors = read_kubelet_policy(resolve_paths(root={paths.root!r}, env={{}}))
result = [policy.topology, policy.cpu_options, list(policy.reserved_cpus), [e.message for e in errors]]
"""
    answer = run_bounded(code)
    topology, cpu_options, reserved, messages = answer["result"]  # type: ignore[misc]
    assert (topology, cpu_options, reserved) == ("none", {}, [])  # the kubelet's defaults: nothing made up
    assert "topologyManagerPolicy: a list where a string belongs" in messages
    assert "cpuManagerPolicyOptions: a list where a string belongs" in messages
    assert "reservedSystemCPUs: a list where a string belongs" in messages
    assert "reservedMemory: entry 1 cannot be read" in messages
    assert isinstance(answer["max_rss_kib"], int) and answer["max_rss_kib"] < 300 * 1024


SECRET = "apiVersion: AKIAsecretTOKEN123\nkind: Secret\nsecretKeyZ9: hunter2\n"


def _host_secret(tmp_path: Path) -> Path:
    """A file of the host, outside the root: nothing of it may be read or shown."""
    secret = tmp_path / "etc" / "hostsecret.yaml"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    return secret


def _shows_nothing_of(errors: object) -> None:
    text = json.dumps([e.message for e in errors])  # type: ignore[attr-defined]
    for word in ("AKIAsecretTOKEN123", "Secret", "secretKeyZ9", "hunter2"):
        assert word not in text


def test_a_relative_config_climbing_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    _host_secret(tmp_path)
    paths = _root(tmp_path, ["kubelet", "--config=../../../../../../../../etc/hostsecret.yaml"])
    policy, errors = read_kubelet_policy(paths)
    assert policy.source == "defaults"
    assert [e.message for e in errors] == [
        "the kubelet's --config '../../../../../../../../etc/hostsecret.yaml' leads outside the root "
        f"{paths.root}: not read"
    ]
    _shows_nothing_of(errors)


def test_an_absolute_symlink_is_followed_inside_the_root(tmp_path: Path) -> None:
    secret = _host_secret(tmp_path)
    paths = _root(tmp_path, ["kubelet", "--config", "/etc/kubernetes/kubelet.yaml"])
    link = Path(paths.root) / "etc/kubernetes/kubelet.yaml"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret)  # an absolute host path: the root's own <root>/<that path>, which is not there
    policy, errors = read_kubelet_policy(paths)
    assert policy.source == "defaults"
    assert [e.kind.value for e in errors] == ["missing"]
    _shows_nothing_of(errors)
    inside = Path(paths.root) / secret.relative_to("/")
    inside.parent.mkdir(parents=True)
    inside.write_text(HEAD + "cpuManagerPolicy: static\n")
    policy, errors = read_kubelet_policy(paths)
    assert (policy.cpu, errors) == ("static", ())  # the link read as the node would: inside the root


def test_kubeadms_config_symlinked_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    secret = _host_secret(tmp_path)
    paths = _root(tmp_path)
    hops = "../" * (len(Path(paths.kubelet_dir).parts) - 1)
    (Path(paths.kubelet_dir) / "config.yaml").symlink_to(hops + str(secret).lstrip("/"))
    policy, errors = read_kubelet_policy(paths)
    assert policy.source == "defaults"
    assert len(errors) == 1 and "leads outside the root" in errors[0].message
    _shows_nothing_of(errors)


def test_a_config_of_another_api_names_no_value_of_it(tmp_path: Path) -> None:
    paths = _root(tmp_path)
    (Path(paths.kubelet_dir) / "config.yaml").write_text(SECRET)
    policy, errors = read_kubelet_policy(paths)
    assert policy.source == "defaults"
    (error,) = errors
    assert "apiVersion a string kind a string: devctl reads kubelet.config.k8s.io/v1beta1" in error.message
    _shows_nothing_of(errors)
