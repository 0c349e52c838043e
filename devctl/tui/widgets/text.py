"""Putting new text in a Static without laying the whole screen out again.

``Static.update`` lays out the screen by default, because new text may need
more lines. Every rebuild of the view puts text in the status line and a
title: on a node with 10,000 devices a layout of the whole screen costs more
than the rows that changed. Here the layout happens only when the text may
take a different number of lines; unchanged text costs nothing.
"""

from __future__ import annotations

from textual.visual import VisualType
from textual.widgets import Static


def _one_line(text: object, width: int) -> bool:
    return isinstance(text, str) and "\n" not in text and len(text) <= width


def show_text(widget: Static, text: str, *, fixed: bool = False) -> None:
    """Show ``text`` in ``widget``; ``fixed`` when its CSS sets its height, so text never changes its size."""
    old = widget.content
    if old == text:
        return
    width = widget.size.width
    widget.update(text, layout=not (fixed or (width and _one_line(old, width) and _one_line(text, width))))


class TextLine(Static):
    """A line of text one row high (the status and key lines): new text repaints it and nothing else."""

    DEFAULT_CSS = "TextLine { height: 1; }"

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        if content != self.content:
            super().update(content, layout=layout)
