"""Where the node keeps things, for the faces: the paths the global options name, and the one line for a root
that is no node. Both are decided once, in devctl.node.paths; the faces reach them here, never in node/."""

from __future__ import annotations

from devctl.node.paths import not_a_node, resolve_paths

__all__ = ["not_a_node", "resolve_paths"]
