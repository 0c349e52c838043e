"""The line of views under the status line: which view is on screen; a click on another shows it.

textual's TabbedContent draws a widget per tab, an underline that moves, and
a content switcher around panes in panes. On every view switch it restyled two
tabs, moved the underline, and laid out and drew four levels of containers:
about a third of a view switch's CPU with 10,000 devices on screen. One line
of text says the same (and leaves the views a line more); the screen switches
its views with a plain ContentSwitcher.
"""

from __future__ import annotations

from textual import events
from textual.message import Message

from devctl.tui.widgets.text import TextLine

GAP = 1  # spaces between two titles


def spans(titles: dict[str, str]) -> list[tuple[int, int, str]]:
    """Where each view's title is on the line: (first column, column after the last, view)."""
    out, x = [], 0
    for view, title in titles.items():
        width = len(title) + 2  # a space either side
        out.append((x, x + width, view))
        x += width + GAP
    return out


def bar_markup(titles: dict[str, str], active: str) -> str:
    """The line as textual markup (the titles are ours, never data): the active view stands out."""
    parts = [
        f"[b $block-cursor-foreground on $block-cursor-background] {title} [/]" if view == active else f" {title} "
        for view, title in titles.items()
    ]
    return (" " * GAP).join(parts)


class ViewBar(TextLine):
    """The views by number and name, the one on screen highlighted."""

    DEFAULT_CSS = "ViewBar { height: 1; background: $panel; color: $text-muted; }"

    class Chosen(Message):
        """A click on a view's title."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, titles: dict[str, str], active: str) -> None:
        super().__init__(bar_markup(titles, active))
        self.titles = titles
        self.active = active

    def show(self, active: str) -> None:
        if active != self.active:
            self.active = active
            self.update(bar_markup(self.titles, active))

    def on_click(self, event: events.Click) -> None:
        for start, end, view in spans(self.titles):
            if start <= event.x < end:
                self.post_message(self.Chosen(view))
                return
