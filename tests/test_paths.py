"""Path resolution: flag, then environment, then /host detection, then default (cli.md, global options)."""

from __future__ import annotations

from pathlib import Path

from namespaces import in_mount_namespace

from devctl.node.paths import resolve_paths


def test_defaults_follow_root():
    p = resolve_paths(root="/r", env={})
    assert p.kubelet_dir == "/r/var/lib/kubelet"
    assert p.plugins_dir == "/r/var/lib/kubelet/device-plugins"
    assert p.pod_resources == "/r/var/lib/kubelet/pod-resources/kubelet.sock"
    assert p.sysfs == "/r/sys"
    assert p.pod_logs == "/r/var/log/pods"
    assert p.kubelet_socket == "/r/var/lib/kubelet/device-plugins/kubelet.sock"
    assert p.checkpoint == "/r/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
    assert p.plugins_registry == "/r/var/lib/kubelet/plugins_registry"


def test_plugins_dir_does_not_follow_kubelet_dir():
    # The kubelet hard-codes the device-plugins directory; pod-resources follows --root-dir.
    p = resolve_paths(root="/r", kubelet_dir="/var/lib/k3s/agent/kubelet", env={})
    assert p.plugins_dir == "/r/var/lib/kubelet/device-plugins"
    assert p.pod_resources == "/var/lib/k3s/agent/kubelet/pod-resources/kubelet.sock"
    assert p.plugins_registry == "/var/lib/k3s/agent/kubelet/plugins_registry"


def test_environment_is_used_and_flags_win():
    env = {
        "DEVCTL_ROOT": "/e",
        "DEVCTL_PLUGINS_DIR": "/e/plugins",
        "DEVCTL_POD_RESOURCES": "/e/pr.sock",
        "DEVCTL_SYSFS": "/e/sys2",
        "DEVCTL_POD_LOGS": "/e/logs",
        "DEVCTL_KUBELET_DIR": "/e/kubelet",
    }
    p = resolve_paths(env=env)
    assert (p.root, p.plugins_dir, p.pod_resources, p.sysfs, p.pod_logs, p.kubelet_dir) == (
        "/e",
        "/e/plugins",
        "/e/pr.sock",
        "/e/sys2",
        "/e/logs",
        "/e/kubelet",
    )
    flagged = resolve_paths(root="/f", plugins_dir="/f/p", env=env)
    assert flagged.root == "/f"
    assert flagged.plugins_dir == "/f/p"
    assert flagged.sysfs == "/e/sys2"  # the environment still fills what the flags leave out


DETECT = """
import json, os, sys
from devctl.node.paths import detect_root, resolve_paths

host = sys.argv[1]
answers = {"no kubelet anywhere": detect_root(host)}
os.makedirs(os.path.join(host, "var/lib/kubelet"))
answers["only the mount has one"] = [detect_root(host), resolve_paths(env={}, host_mount=host).root]
os.makedirs("/var/lib/kubelet")
answers["both have one"] = [detect_root(host), resolve_paths(env={}, host_mount=host).root]
print(json.dumps(answers))
"""


def test_host_mount_detected_only_when_it_alone_has_a_kubelet(short_root: Path) -> None:
    # In a private mount namespace with an empty /var/lib: neither this machine's kubelet (if it has one) nor
    # its absence decides the answer, and the test's own /var/lib/kubelet reaches nothing real.
    host = short_root / "host"
    answers = in_mount_namespace(DETECT, {"/var/lib": None}, str(host))
    assert answers == {
        "no kubelet anywhere": "/",
        "only the mount has one": [str(host), str(host)],  # a debug pod: the node is under /host
        "both have one": ["/", "/"],  # a node of its own: its own kubelet wins
    }


def test_pod_resources_takes_the_endpoint_forms_crictl_takes() -> None:
    for given in (
        "unix:///run/k/kubelet.sock",
        "unix:/run/k/kubelet.sock",
        "UNIX:///run/k/kubelet.sock",
        "/run/k/kubelet.sock",
    ):
        assert resolve_paths(root="/r", pod_resources=given, env={}).pod_resources == "/run/k/kubelet.sock", given
    assert resolve_paths(root="/r", env={"DEVCTL_POD_RESOURCES": "unix:///e.sock"}).pod_resources == "/e.sock"


def test_the_path_options_are_the_node_paths_declared_once() -> None:
    """The one table of path options (flags, variables, help) names exactly the fields of NodePaths."""
    from dataclasses import fields

    from devctl.base.path_options import PATH_OPTIONS
    from devctl.model import NodePaths

    assert [o.name for o in PATH_OPTIONS] == [f.name for f in fields(NodePaths)]
    flags = {o.name: (o.flag, o.envvar) for o in PATH_OPTIONS}
    assert flags["kubelet_dir"] == ("--kubelet-dir", "DEVCTL_KUBELET_DIR")
    assert flags["cdi_dirs"] == ("--cdi-dirs", "DEVCTL_CDI_DIRS")


def test_every_path_variable_is_read_and_a_given_path_wins() -> None:
    from devctl.base.path_options import PATH_OPTIONS

    for option in PATH_OPTIONS:
        from_env = getattr(resolve_paths(env={option.envvar: "/from/env"}), option.name)
        given = getattr(resolve_paths({option.name: "/given"}, env={option.envvar: "/from/env"}), option.name)
        assert from_env in ("/from/env", ("/from/env",)), option
        assert given in ("/given", ("/given",)), option


def test_an_unknown_path_name_is_refused() -> None:
    import pytest

    with pytest.raises(TypeError, match="no node path named kubelet"):
        resolve_paths(kubelet="/k", env={})
