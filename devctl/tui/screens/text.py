"""A modal that shows one thing in full (an event, a finding with its hint, a claim), wrapped to the screen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class TextScreen(ModalScreen[None]):
    """Full text where a table row cuts it: Enter on a row opens it, Esc closes it."""

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll {
        width: 100%; max-width: 100; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    TextScreen #text-keys { color: $text-muted; margin-top: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("enter", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, text: Text, *, title: str = "") -> None:
        """``text`` is escaped by whoever made it (devctl.base.escape); it is never read as markup."""
        super().__init__()
        self.text = text
        self.title_text = title

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="text", markup=False)
            yield Static("Esc close · ↑ ↓ scroll", id="text-keys", markup=False)

    def on_mount(self) -> None:
        scroll = self.query_one(VerticalScroll)
        scroll.border_title = Text(self.title_text)  # plain text: a title may quote what a person typed (`:fit`)
        scroll.focus()

    def show(self, text: Text) -> None:
        self.text = text
        self.query_one("#text", Static).update(text)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
