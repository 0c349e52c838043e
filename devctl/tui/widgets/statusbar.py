"""The top line: which node, how it is doing at a glance, and when the view was last rebuilt."""

from __future__ import annotations

from devctl.base.escape import escape
from devctl.model import PluginStatus
from devctl.tui.state import NodeView
from devctl.tui.widgets.text import TextLine


def _counts(view: NodeView) -> list[tuple[str, str]]:
    """What the top line counts, each in a long and a short form (the short ones fit 80 columns)."""
    parts = [(f"{len(view.resources)} resources", f"{len(view.resources)} res")]
    if view.snapshot.pods is not None:
        parts.append((f"{len(view.pods)} pods", f"{len(view.pods)} pods"))
    # Resources whose plugin is not serving, by the word `devctl ls` uses for them (no-plugin, unreachable...).
    down: dict[str, int] = {}
    for r in view.resources:
        status = view.status_of(r)
        if status != PluginStatus.SERVING.value:
            down[status] = down.get(status, 0) + 1
    parts += [(f"{n} {status}", f"{n} {status}") for status, n in sorted(down.items())]
    unhealthy = sum(r.unhealthy or 0 for r in view.resources)  # the resources whose count is known
    if unhealthy:
        parts.append((f"{unhealthy} unhealthy", f"{unhealthy} bad"))
    misaligned = sum(1 for a in view.topology.alignment if a.aligned is False)
    if misaligned:
        parts.append((f"{misaligned} misaligned", f"{misaligned} misal"))
    if view.errors:
        parts.append((f"{len(view.errors)} errors", f"{len(view.errors)} err"))
    return parts


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def status_text(view: NodeView | None, source: str, live: bool = True, width: int | None = None) -> str:
    """The top line; on a snapshot file (``live`` false) it ends with when the snapshot was taken, not a clock.

    When the long form is wider than ``width``, the counts take their short
    forms (``4 res · 6 pods · 2 bad``) and the source's label gives way, so
    the counts and the clock stay on screen at 80 columns.
    """
    source = escape(source)  # a path or a file name the user gave
    if view is None:
        return f" devctl · {source} · reading the node…"
    counts = _counts(view)
    long = " · ".join(c for c, _ in counts)
    short = " · ".join(s for _, s in counts)
    if not live:  # when it was taken goes first: it says how old every number after it is
        taken = escape(view.snapshot.taken_at.replace("T", " ").split(".")[0].rstrip("Z")) + "Z"
        text = f" devctl · {source} taken at {taken} · {long}"
        if width is None or len(text) <= width:
            return text
        tail = f" taken at {taken} · {short}"
        return " " + _cut(source, max(width - len(tail) - 1, 8)) + tail
    clock = f"{view.updated:%H:%M:%S}"
    text = f" devctl · {source} · {long} · {clock}"
    if width is None or len(text) <= width:
        return text
    tail = f" · {short} · {clock}"
    return " " + _cut(source, max(width - len(tail) - 1, 8)) + tail


def keep_clock(head: str, width: int) -> str:
    """A top line wider than the terminal (a sick node's many counts): the label goes, then the last counts are
    cut; the clock stays."""
    body, sep, clock = head.rpartition(" · ")
    if len(head) <= width or not sep or len(clock) != 8 or clock.count(":") != 2:
        return head
    _label, dot, counts = body.partition(" · ")
    body = f" {counts}" if dot else body
    return _cut(body, max(width - len(sep) - len(clock), 1)) + sep + clock


def fit_waiting(text: str, width: int) -> str:
    """``waiting for a.sock, b.sock… 3 s`` cut in its names to ``width``, so the seconds stay on screen."""
    names, sep, tail = text.rpartition("… ")
    if len(text) <= width or not sep:
        return text
    return names[: max(width - len(sep) - len(tail), 0)] + sep + tail


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
        room = self.size.width - sum(len(m) + 3 for m in marks) if self.size.width else None
        head = status_text(view, self.source, self.live, room)
        if self.live and self.size.width:
            head = keep_clock(head, self.size.width)
        if self.waiting and room is not None and len(head) > room:  # the counts and clock kept: the names give way
            marks[0] = fit_waiting(self.waiting, len(self.waiting) - (len(head) - room))
        self.update(" · ".join([head, *marks]))
        down = view is not None and any(view.status_of(r) != PluginStatus.SERVING.value for r in view.resources)
        self.set_class(bool((view is not None and (down or view.errors)) or self.failed), "-trouble")

    def on_resize(self) -> None:
        self.show(self.view)

    def fail(self, text: str) -> None:
        """A background task stopped: say so until the app ends (its message is in the event log)."""
        self.failed += 1
        self.show(self.view)

    def wait_for(self, text: str) -> None:
        """What the first read still waits for (``""`` once it has all)."""
        self.waiting = text
        self.show(self.view)
