"""The keys, on one screen: the TUI is meant to be used over SSH without a mouse."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
Views          1 resources  2 devices  3 pods  4 NUMA map  5 events
               Tab / Shift+Tab: next / previous view; Esc: back to the last one
               :  a view by name (:pods, :devices nvidia.com/gpu), Enter to go
Move           ↑ ↓ or j k, PgUp PgDn Home End, or click a row
Open           Enter: a resource's devices; a device's or container's detail
Devices        [ ]: previous / next resource
Filter         /: type to filter the rows of this view; Enter keeps it, Esc clears it
Refresh        r: poll pod-resources now (at most once a second)
Help, quit     ?: this help    q or Ctrl-C: quit    Esc: close a dialog

With an in-process plugin (devctl tui --plugin FILE, and always in devctl demo),
in the devices view:
               h: flip the selected device's health (Healthy <-> Unhealthy)
               a: add a device beside the selected one
               x: remove the selected device
The change goes out on every ListAndWatch stream at once; watch the kubelet's
side follow in the counts (ALLOC), the devices and the event log.

Colour is only a hint: every state is also spelled out. NO_COLOR is honoured.
"""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 100%; max-width: 90; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(HELP, markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
