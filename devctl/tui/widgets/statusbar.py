"""The top line: which node, how it is doing at a glance, and when the view was last rebuilt."""

from __future__ import annotations

from devctl.escape import escape
from devctl.tui.state import NodeView
from devctl.tui.widgets.text import TextLine


def status_text(view: NodeView | None, source: str, live: bool = True) -> str:
    """The top line; on a snapshot file (``live`` false) it ends with when the snapshot was taken, not a clock."""
    source = escape(source)  # a path or a file name the user gave
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
    if not live:  # when it was taken goes first: it says how old every number after it is
        taken = escape(view.snapshot.taken_at.replace("T", " ").split(".")[0].rstrip("Z")) + "Z"
        return f" devctl · {source} taken at {taken} · {' · '.join(parts)}"
    return f" devctl · {source} · {' · '.join(parts)} · {view.updated:%H:%M:%S}"


class StatusBar(TextLine):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $foreground; text-style: bold; }
    StatusBar.-trouble { background: $error-muted; }
    """

    def __init__(self, source: str, live: bool = True) -> None:
        super().__init__(status_text(None, source, live), markup=False)
        self.source = source
        self.live = live
        self.view: NodeView | None = None
        self.failed = 0  # background tasks that stopped with an error: the view may no longer update
        self.waiting = ""  # what the first read still waits for, while it does

    def show(self, view: NodeView | None) -> None:
        self.view = view
        marks = [self.waiting] if self.waiting else []
        if self.failed:
            marks.append(f"{self.failed} task(s) failed, see events")
        self.update(" · ".join([status_text(view, self.source, self.live), *marks]))
        self.set_class(bool((view is not None and (view.disconnected or view.errors)) or self.failed), "-trouble")

    def fail(self, text: str) -> None:
        """A background task stopped: say so until the app ends (its message is in the event log)."""
        self.failed += 1
        self.show(self.view)

    def wait_for(self, text: str) -> None:
        """What the first read still waits for (``""`` once it has all)."""
        self.waiting = text
        self.show(self.view)
