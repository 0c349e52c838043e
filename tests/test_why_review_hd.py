"""What a final review of ``devctl why`` on the default simulated node found (full-HD): each test fails unfixed."""

from __future__ import annotations

import asyncio
import socket

from devctl.core.why import PODS_API, _pods_api
from devctl.model import ErrorKind, SourceError
from tests.helpers import devctl


def test_a_pods_api_socket_that_is_not_there_is_no_warning(sim_node):
    """The sim serves no Pods API (alpha, gate off): neither the table nor the JSON's errors speak of it."""
    table = devctl(sim_node.root, "why", "-n", "ml", "train-0")
    assert table.exit_code == 1, table.stderr
    assert "pods-api" not in table.stdout
    doc = devctl(sim_node.root, "why", "ml/train-0", "-o", "json").json
    assert all(e["source"] != PODS_API for e in doc["errors"])


def test_a_pods_api_socket_with_no_listener_is_an_error(short_root):
    """A socket file there that refuses connections (a kubelet gone) stays a typed error: stale."""
    sock_dir = short_root / "pods-api"
    sock_dir.mkdir()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock_dir / "pods-api.sock"))  # bound, never listening: connect is refused
    try:
        errors: list[SourceError] = []
        asyncio.run(_pods_api_at(str(short_root), errors))
    finally:
        s.close()
    assert [(e.source, e.kind) for e in errors] == [(PODS_API, ErrorKind.STALE)]
    assert str(sock_dir / "pods-api.sock") in errors[0].message


async def _pods_api_at(kubelet_dir: str, errors: list[SourceError]) -> None:
    from devctl.model import NodePaths

    await _pods_api(NodePaths("/", kubelet_dir, "", "", "", ""), 2.0, errors)
