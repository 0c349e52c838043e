"""The bottom line: the keys that act in the view on screen.

textual's Footer rebuilds a widget per key whenever focus moves, which cost
more than the rest of a view switch together on a slow host; one line of text
does the same job for a keyboard-first tool.
"""

from __future__ import annotations

from devctl.tui.widgets.text import TextLine

COMMON_HEAD = (("Tab", "view"), ("/", "filter"), ("r", "refresh"))
COMMON_TAIL = (("?", "help"), ("q", "quit"))
PER_VIEW = {
    "resources": (("Enter", "devices"),),
    "devices": (("Enter", "holder"), ("[ ]", "resource")),
    "pods": (("Enter", "detail"),),
    "numa": (),
    "events": (("Enter", "full text"),),
    "claims": (("Enter", "devices, CDI"),),
}
CONTROLS = (("h", "health"), ("a", "add"), ("x", "remove"))


def keys_text(view: str, controllable: bool, live: bool = True) -> str:
    """The keys of ``view``; with an in-process plugin the devices view trades Enter and r for h, a, x (80 columns).

    A snapshot file (``live`` false) has nothing to read again: no ``r``.
    """
    if controllable:
        keys = [*COMMON_HEAD[:2], *CONTROLS, *PER_VIEW[view][1:]]
    else:
        keys = [*(COMMON_HEAD if live else COMMON_HEAD[:2]), *PER_VIEW.get(view, ())]
    return " " + "  ".join(f"{key} {what}" for key, what in (*keys, *COMMON_TAIL))


class KeyBar(TextLine):
    DEFAULT_CSS = "KeyBar { height: 1; background: $panel; color: $text-muted; }"

    def __init__(self, live: bool = True) -> None:
        super().__init__(keys_text("resources", False, live), markup=False)
        self.live = live

    def show(self, view: str, controllable: bool) -> None:
        self.update(keys_text(view, controllable, self.live))
