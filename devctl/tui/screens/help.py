"""The keys, on one screen: the TUI is meant to be used over SSH without a mouse."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
Views     1 resources, doctor's findings, last events  2 devices  3 pods
          4 NUMA map  5 events  6 DRA claims
          Tab / Shift+Tab: next / previous view  Esc: back to the last one
          :  a view by name (:claims, :devices nvidia.com/gpu), Enter to go
Move      ↑ ↓ or j k, PgUp PgDn Home End, or click a row; on the first
          screen ↓ ↑ go on from the resources to the findings and events
Open      Enter: a resource's devices; a device's or container's detail;
          a finding's hint; an event or a claim in full
Devices   [ ]: previous / next resource (DRA drivers too)
Filter    /: filter the rows of this view; Enter keeps it, Esc clears it
Refresh   r: poll pod-resources now (at most once a second)
Help      ?: this help   q or Ctrl-C: quit   Esc: close a dialog
Plugin    with devctl tui --plugin FILE, and in devctl demo, on the devices
          of its resource or DRA driver: h flip health  a add  x remove;
          the change reaches every stream (ListAndWatch, DRA health)
Events    snapshot added removed health topology disconnected reconnected
          (as devctl watch); allocated released pod-added pod-gone error
          recovered (found by a poll); notice: a watch status line; log
States    as devctl ls: serving, no-plugin, unreachable, stale, timeout...
Colour is only a hint: every state is spelled out. NO_COLOR is honoured.
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
