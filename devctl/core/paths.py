"""Where the node keeps things, for the faces: the paths the global options name, and the one line for a root
that is no node. Both are decided once, in devctl.node.paths; the faces reach them here, never in node/."""

from __future__ import annotations

import os

from devctl.model import NodePaths
from devctl.node.paths import not_a_node, resolve_paths

__all__ = ["looks_like_a_node", "not_a_node", "resolve_paths"]


def looks_like_a_node(paths: NodePaths) -> bool:
    """Whether the kubelet's device-plugins dir is there: without it, a wrong ``--root`` is the likely cause."""
    return os.path.isdir(paths.plugins_dir)
