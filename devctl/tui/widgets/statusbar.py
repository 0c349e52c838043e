"""The top line: which node, how it is doing at a glance, and when the view was last rebuilt."""

from __future__ import annotations

from textual.widgets import Static

from devctl.tui.state import NodeView


def status_text(view: NodeView | None, source: str) -> str:
    if view is None:
        return f" devctl · {source} · reading the node…"
    parts = [f"{len(view.resources)} resources"]
    if view.snapshot.pods is not None:
        parts.append(f"{len(view.pods)} pods")
    if view.disconnected:
        parts.append(f"{len(view.disconnected)} disconnected")
    unhealthy = sum(r.unhealthy or 0 for r in view.resources)  # the resources whose count is known
    if unhealthy:
        parts.append(f"{unhealthy} unhealthy")
    misaligned = sum(1 for a in view.topology.alignment if a.aligned is False)
    if misaligned:
        parts.append(f"{misaligned} misaligned")
    if view.errors:
        parts.append(f"{len(view.errors)} errors")
    return f" devctl · {source} · {' · '.join(parts)} · {view.updated:%H:%M:%S}"


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $foreground; text-style: bold; }
    StatusBar.-trouble { background: $error-muted; }
    """

    def __init__(self, source: str) -> None:
        super().__init__(status_text(None, source), markup=False)
        self.source = source

    def show(self, view: NodeView) -> None:
        self.update(status_text(view, self.source))
        self.set_class(bool(view.disconnected or view.errors), "-trouble")
