"""``devctl doctor``'s findings: severity, code and subject, each message and hint wrapped under its row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from devctl.base.escape import escape
from devctl.model import (
    Finding,
)
from devctl.render.style import paint

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    pass

from devctl.render.grid import TableStyle, grid

# The colour of each severity on a terminal; the word itself is always printed.
_SEVERITY_COLORS = {"error": "red", "warning": "yellow", "info": "dim"}


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` in lines of at most ``width`` (40 at least), never breaking a word, flag or path."""
    import textwrap

    return textwrap.wrap(
        text,
        max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def findings_table(findings: Sequence[Finding], style: TableStyle, width: int = 80) -> str:
    """One row per finding, SEVERITY CODE SUBJECT, with its message and hint as indented lines under it.

    What to do is the point of doctor, so the hint is always shown; message
    and hint are sentences, so they are wrapped to ``width`` under the row
    rather than stretched across a column. ``wide`` puts both in columns, one
    line per finding, for grep.
    """
    headers = ["severity", "code", "subject"] + (["message", "hint"] if style.wide else [])
    rows = []
    for f in findings:
        row = [paint(f.severity, _SEVERITY_COLORS.get(f.severity, ""), style.color), f.code, f.subject]
        rows.append([*row, f.message, f.hint] if style.wide else row)
    text = grid(headers, rows, style)
    if style.wide or not text:
        return text
    lines = text.splitlines()
    body = lines[1:] if style.headers else lines  # cells are escaped: one line per row
    out = lines[:1] if style.headers else []
    indent = "    "
    for line, f in zip(body, findings, strict=True):
        out.append(line)
        out += _wrap(escape(f.message), width, indent, indent)
        if f.hint:
            hint = _wrap(escape(f.hint), width, indent + "hint: ", indent + "      ")
            hint[0] = hint[0].replace("hint:", paint("hint", "dim", style.color) + ":", 1)
            out += hint
    return "\n".join(out) + "\n"
