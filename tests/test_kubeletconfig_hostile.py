"""The kubelet's config read from a hostile root (red team, FX2): an alias bomb in a field, a ``--config`` or a
symlink that leads out of ``--root``, values that must not be echoed. Each test fails on the old code."""

from __future__ import annotations

from pathlib import Path

from devctl.model import NodePaths
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
