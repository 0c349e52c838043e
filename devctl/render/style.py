"""Colour for people at a terminal, and never for pipes, files or anyone who set NO_COLOR.

Colour carries no information of its own: every coloured word is also spelled
out, so a table reads the same without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

from devctl.base.escape import escape

# An empty table cell, as kubectl prints it.
NONE = "<none>"

_CODES = {"red": "31", "green": "32", "yellow": "33", "dim": "2", "bold": "1"}

# Words of the views and the colour that makes them stand out.
_WORDS = {
    "serving": "green",
    "Healthy": "green",
    "free": "green",
    "ok": "green",
    "yes": "green",
    "allocated": "",
    "no-plugin": "yellow",
    "stale": "red",
    "timeout": "red",
    "unreachable": "red",
    "permission-denied": "red",
    "Unhealthy": "red",
    "unhealthy": "red",
    "unhealthy-allocated": "red",
    "MISMATCH": "red",
    "no": "red",
    "Unknown": "yellow",
    "Missing": "red",
}


def use_color(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour only on a terminal, and not when NO_COLOR is set to anything (https://no-color.org)."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Styled(str):
    """Text made ready for a terminal here: escaped, then coloured. A table prints it as it is.

    Every other cell is escaped by the table; this type is how the colour
    codes of ``paint`` get through while the same bytes in data do not.
    """


def paint(text: str, color: str, enabled: bool) -> Styled:
    """``text``, escaped, in ``color`` (a name of _CODES) when enabled."""
    text = escape(text)
    code = _CODES.get(color)
    if not enabled or not code or not text:
        return Styled(text)
    return Styled(f"\033[{code}m{text}\033[0m")


def word(text: str, enabled: bool) -> Styled:
    """A status or state word in its usual colour."""
    return paint(text, _WORDS.get(text, ""), enabled)
