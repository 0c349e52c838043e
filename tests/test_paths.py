"""Path resolution: flag, then environment, then /host detection, then default (cli.md, global options)."""

from __future__ import annotations

from devctl.node.paths import detect_root, resolve_paths


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


def test_host_mount_detected_only_when_it_alone_has_a_kubelet(tmp_path):
    host = tmp_path / "host"
    assert detect_root(str(host)) == "/"
    (host / "var/lib/kubelet").mkdir(parents=True)
    # This machine has no /var/lib/kubelet (CI never touches the real one), so the mount wins.
    from pathlib import Path

    expected = "/" if Path("/var/lib/kubelet").is_dir() else str(host)
    assert detect_root(str(host)) == expected
    assert resolve_paths(env={}, host_mount=str(host)).root == expected
