"""devctl_source_up{source="plugins"}: down when the sockets could not be listed, not when one socket fails.

A registration socket's own failure is its devctl_plugin_up 0; only a plugins_registry/ that could not be
listed (no socket to hold the error) leaves the plugins source read in part. collect gives the two as
source errors of the same source, told apart by their subject (the socket), never by their words.
"""

from __future__ import annotations

from devctl.exporter.metrics import source_up
from devctl.model import ErrorKind, NodeSnapshot, PluginProbe, PluginStatus, SourceError
from devctl.node.paths import resolve_paths

PATHS = resolve_paths(root="/n", env={})
REG = f"{PATHS.plugins_registry}/gpu-reg.sock"


def _node(*errors: SourceError, plugins: tuple[PluginProbe, ...] = ()) -> NodeSnapshot:
    return NodeSnapshot(taken_at="2026-01-01T00:00:00.000Z", paths=PATHS, plugins=plugins, errors=errors)


def test_a_failing_registration_socket_leaves_the_plugins_source_up() -> None:
    probe = PluginProbe(REG, PluginStatus.STALE, error=f"{REG}: stale socket", error_kind=ErrorKind.STALE)
    failed = SourceError("registry", f"{REG}: stale socket", ErrorKind.STALE, REG)
    assert source_up(_node(failed, plugins=(probe,)))["plugins"] is True


def test_a_registry_that_could_not_be_listed_takes_it_down_whatever_its_words() -> None:
    # The same words as a socket's failure: only the missing subject says the directory failed.
    unlisted = SourceError("registry", f"{REG}: stale socket", ErrorKind.PERMISSION_DENIED)
    probe = PluginProbe(REG, PluginStatus.STALE, error=f"{REG}: stale socket", error_kind=ErrorKind.STALE)
    assert source_up(_node(unlisted, plugins=(probe,)))["plugins"] is False
