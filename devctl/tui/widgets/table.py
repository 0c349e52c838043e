"""A table that draws only the rows on screen, so 10,000 devices cost what 30 do.

textual's DataTable measures and stores every cell when rows are added; with
10,000 devices that takes seconds and a ListAndWatch update arrives twenty times
a second. This table keeps plain tuples of strings and renders the visible lines
on demand (the Line API), and a new list of rows replaces the old one at once.
It then repaints only the lines on screen whose row changed: an update to a
device out of sight, or a cursor that moves by a row, costs a line or two, not a table.

It has no vertical scroll bar: textual draws its bar line by line, again at
every restyle (focus moves with every view switch), and on 10,000 rows its
thumb is one cell. The header says where the cursor is instead (``1,234/10,000``).
Scrolling is always on (a bar of no width), so rows that come or go never
make textual lay out the whole screen again, only repaint what changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from devctl.base.escape import escape

# Row tones: how a row looks, named for what it means. The text of a row must
# carry the meaning too, because NO_COLOR (and a monochrome SSH terminal) drops colour.
TONES = ("ok", "warn", "bad", "dim", "hot")


@dataclass(frozen=True)
class Column:
    """One column: a title, an upper bound on its width, and how it gives way when space is short.

    Text wider than its column is cut with an ellipsis. On a narrow terminal
    columns narrow down to ``min_width`` (the title's width at least): those with
    the highest ``give`` first, then from the right, where the least important
    columns are. ``middle`` cuts in the middle instead (``nvidia.c…/GPU-3``):
    for names whose end tells one row from the next.
    """

    title: str
    max_width: int = 40
    min_width: int = 0
    give: int = 0
    middle: bool = False


@dataclass(frozen=True)
class Row:
    """One row: a key that survives updates (the cursor follows it), its cells and a tone.

    The cells come from plugins, the kubelet and files: a Row holds them
    escaped (devctl.base.escape), made once per row, and the table draws them as
    plain segments, never as markup. The key stays as it is: it names the device
    or container to act on.
    """

    key: str
    cells: tuple[str, ...]
    tone: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(map(escape, self.cells)))


# What a table shows at one moment: the first row on screen, the cursor, the widths, the rows on screen, how many rows.
_Window = tuple[int, int, tuple[int, ...], tuple[Row, ...], int]


@dataclass(frozen=True)
class RowSet:
    """Rows with the natural width of each column over them: built off the event loop, shown at once."""

    rows: tuple[Row, ...]
    widths: tuple[int, ...]


def row_set(columns: Sequence[Column], rows: Sequence[Row]) -> RowSet:
    """Rows and their column widths (the longest cell or title, capped at the column's max_width)."""
    # Column by column, so that measuring 10,000 rows runs in C (zip, map, max), not in a Python loop per cell.
    cells = itertools.zip_longest(*[row.cells for row in rows], fillvalue="")
    widths = [max(len(c.title), max(map(len, column), default=0)) for c, column in zip(columns, cells, strict=False)]
    widths += [len(c.title) for c in columns[len(widths) :]]  # no rows
    return RowSet(tuple(rows), tuple(min(w, c.max_width) for w, c in zip(widths, columns, strict=True)))


def _fit(text: str, width: int, middle: bool = False) -> str:
    if len(text) <= width:
        return text.ljust(width)
    if middle and width >= 5:
        head = (width - 1) // 2
        return text[:head] + "…" + text[len(text) - (width - 1 - head) :]
    return text[: max(width - 1, 0)] + "…"


class RowTable(ScrollView, can_focus=True):
    """Rows of text with a cursor, a header that stays put and a filter on the text of each row."""

    DEFAULT_CSS = """
    RowTable { height: 1fr; overflow-y: scroll; scrollbar-size-vertical: 0; }
    RowTable > .rowtable--header { text-style: bold; color: $text-accent; }
    RowTable > .rowtable--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    RowTable > .rowtable--cursor-blurred {
        background: $block-cursor-blurred-background; color: $block-cursor-foreground;
    }
    RowTable > .rowtable--ok { color: $text-success; }
    RowTable > .rowtable--warn { color: $text-warning; }
    RowTable > .rowtable--bad { color: $text-error; text-style: bold; }
    RowTable > .rowtable--dim { color: $text-muted; }
    RowTable > .rowtable--hot { color: $text-accent; text-style: bold; }
    RowTable > .rowtable--empty { color: $text-muted; text-style: italic; }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "rowtable--header",
        "rowtable--cursor",
        "rowtable--cursor-blurred",
        "rowtable--empty",
        *(f"rowtable--{tone}" for tone in TONES),
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("k", "cursor(-1)", "Up", show=False),
        Binding("j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    class Highlighted(Message):
        """The cursor moved to another row (``key`` is None when the table is empty)."""

        def __init__(self, table: RowTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    class Selected(Message):
        """Enter or a double click on a row."""

        def __init__(self, table: RowTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    filter_text: reactive[str] = reactive("", init=False)

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        empty: str = "nothing to show",
        follow_tail: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = tuple(columns)
        self.empty = empty
        # A log keeps its newest line in view while the cursor sits on the last row.
        self.follow_tail = follow_tail
        self._set = RowSet((), tuple(len(c.title) for c in self.columns))
        self._visible: tuple[Row, ...] = ()
        self._natural: tuple[int, ...] = tuple(len(c.title) for c in self.columns)
        self._widths = self._natural
        self._cursor = 0
        self._cursor_key: str | None = None
        self._styles: dict[str, Style] = {}  # resolved once per style change, not once per line

    # --- data ------------------------------------------------------------------

    @property
    def rows(self) -> tuple[Row, ...]:
        """The rows that pass the filter, in order."""
        return self._visible

    @property
    def cursor_key(self) -> str | None:
        return self._cursor_key

    @property
    def cursor_row(self) -> Row | None:
        return self._visible[self._cursor] if self._visible else None

    def set_rows(self, rows: Sequence[Row] | RowSet) -> None:
        """Replace every row; the cursor stays on the row with the same key when it is still there.

        A RowSet made with ``row_set`` off the event loop costs nothing here,
        however many rows it holds (unless a filter is on).
        """
        at_tail = self._at_tail()
        self._set = rows if isinstance(rows, RowSet) else row_set(self.columns, rows)
        self._apply(tail=at_tail)

    def append_rows(self, rows: Sequence[Row], keep: int) -> None:
        """Add rows at the end and keep only the last ``keep``: a log, where only the new rows are measured."""
        if not rows:
            return
        at_tail = self._at_tail()
        added = row_set(self.columns, rows)
        widths = tuple(max(a, b) for a, b in zip(self._set.widths, added.widths, strict=True))
        self._set = RowSet((self._set.rows + added.rows)[-keep:], widths)
        self._apply(tail=at_tail)

    def _at_tail(self) -> bool:
        return self.follow_tail and (not self._visible or self._cursor >= len(self._visible) - 1)

    def watch_filter_text(self) -> None:
        self._apply(tail=False)

    def _apply(self, *, tail: bool) -> None:
        before = self._window()
        needle = self.filter_text.lower()
        if needle:
            self._visible = tuple(r for r in self._set.rows if self.passes(r, needle))
            self._natural = row_set(self.columns, self._visible).widths
        else:
            self._visible = self._set.rows
            self._natural = self._set.widths
        self._widths = self._fit_widths()
        size = Size(self._line_width(), len(self._visible) + 1)
        if size.width != self.virtual_size.width:  # a horizontal scroll bar may come or go: lay the screen out
            self.virtual_size = size
        elif size != self.virtual_size:
            # Only more or fewer rows (a log that grows): the vertical scroll bar is always there and has no
            # width, so nothing else moves and the screen needs no new layout, only the lines that changed.
            self.set_reactive(RowTable.virtual_size, size)
            if self.styles.height is not None and self.styles.height.is_auto:
                self.refresh(layout=True)  # a table as high as its rows (the findings) takes the room they need
            if self.scroll_y > self.max_scroll_y:  # fewer rows than the screen scrolled past
                self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)
        old_key = self._cursor_key
        if tail and self._visible:
            index = len(self._visible) - 1
        else:
            found = self._index_of(old_key)
            index = found if found is not None else min(self._cursor, max(len(self._visible) - 1, 0))
        self._move_to(index, announce=self._key_at(index) != old_key, before=before)

    def passes(self, row: Row, needle: str) -> bool:
        """Whether ``row`` shows under the filter ``needle`` (lower case): a cell holds it. A log may widen it."""
        return any(needle in c.lower() for c in row.cells)

    def _index_of(self, key: str | None) -> int | None:
        if key is None:
            return None
        # The cursor row usually stays where it was: look there first, then search.
        if self._cursor < len(self._visible) and self._visible[self._cursor].key == key:
            return self._cursor
        for i, row in enumerate(self._visible):
            if row.key == key:
                return i
        return None

    def _key_at(self, index: int) -> str | None:
        return self._visible[index].key if 0 <= index < len(self._visible) else None

    def _line_width(self) -> int:
        return sum(self._widths) + 2 * max(len(self._widths) - 1, 0) + 1

    def _fit_widths(self) -> tuple[int, ...]:
        """The natural widths, narrowed column by column until the line fits the screen (80 columns too)."""
        widths = list(self._natural)
        room = self.scrollable_content_region.width - 2 * max(len(widths) - 1, 0) - 1
        excess = sum(widths) - room
        order = sorted(range(len(widths)), key=lambda i: (-self.columns[i].give, -i))
        for i in order:
            if room <= 0 or excess <= 0:
                break
            floor = max(self.columns[i].min_width, len(self.columns[i].title))
            cut = min(excess, max(widths[i] - floor, 0))
            widths[i] -= cut
            excess -= cut
        return tuple(widths)

    # --- cursor ----------------------------------------------------------------

    def move_to_key(self, key: str) -> bool:
        """Put the cursor on the row with this key; False when no visible row has it."""
        index = self._index_of(key)
        if index is None:
            return False
        self._move_to(index, announce=True)
        return True

    def _move_to(self, index: int, *, announce: bool, before: _Window | None = None) -> None:
        """Put the cursor on row ``index`` and repaint what changed since ``before`` (else since now)."""
        before = before or self._window()
        if not self._visible:
            self._cursor, self._cursor_key = 0, None
        else:
            self._cursor = max(0, min(index, len(self._visible) - 1))
            self._cursor_key = self._visible[self._cursor].key
        self._scroll_to_cursor()
        self._repaint(before)
        if announce:
            self.post_message(self.Highlighted(self, self._cursor_key))

    def _window(self) -> _Window:
        top = round(self.scroll_offset.y)
        body = max(self.scrollable_content_region.height - 1, 0)
        return top, self._cursor, self._widths, self._visible[top : top + body], len(self._visible)

    def _repaint(self, before: _Window) -> None:
        """Repaint the lines whose row or cursor changed; every line only when the lines moved or changed width."""
        top, cursor, widths, shown, total = before
        now_top, now_cursor, now_widths, now_shown, now_total = self._window()
        if (top, widths, len(shown)) != (now_top, now_widths, len(now_shown)) or not shown:
            self.refresh()
            return
        lines = {i for i, (old, new) in enumerate(zip(shown, now_shown, strict=True)) if old != new}
        if cursor != now_cursor:
            lines.update((cursor - top, now_cursor - top))
        if cursor != now_cursor or total != now_total:
            lines.add(-1)  # the header, which says where the cursor is among how many
        width = self.size.width
        for i in sorted(lines):
            if -1 <= i < len(shown):
                self.refresh(Region(0, i + 1, width, 1))  # line 0 is the header

    def _scroll_to_cursor(self) -> None:
        body = max(self.scrollable_content_region.height - 1, 1)
        top = round(self.scroll_offset.y)
        # At once, not after the next frame: the frame that shows the cursor's new row shows it in view.
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True, immediate=True)
        elif self._cursor >= top + body:
            self.scroll_to(y=self._cursor - body + 1, animate=False, force=True, immediate=True)

    def action_cursor(self, delta: int) -> None:
        self._move_to(self._cursor + delta, announce=True)

    def action_page(self, direction: int) -> None:
        body = max(self.scrollable_content_region.height - 1, 1)
        self._move_to(self._cursor + direction * body, announce=True)

    def action_jump(self, index: int) -> None:
        self._move_to(index if index >= 0 else len(self._visible) - 1, announce=True)

    def action_select(self) -> None:
        if self._cursor_key is not None:
            self.post_message(self.Selected(self, self._cursor_key))

    def on_resize(self) -> None:
        self._widths = self._fit_widths()
        self.virtual_size = Size(self._line_width(), len(self._visible) + 1)
        self._scroll_to_cursor()

    def on_click(self, event: events.Click) -> None:
        index = round(self.scroll_offset.y) + event.y - 1
        if event.y >= 1 and 0 <= index < len(self._visible):
            self._move_to(index, announce=index != self._cursor)
            if event.chain >= 2:
                self.action_select()

    # --- drawing ---------------------------------------------------------------

    def _cells(self, cells: Sequence[str]) -> str:
        columns = self.columns
        parts = [_fit(cells[i] if i < len(cells) else "", w, columns[i].middle) for i, w in enumerate(self._widths)]
        return " " + "  ".join(parts)

    def watch_has_focus(self, has_focus: bool) -> None:
        """Focus changes the cursor's background and nothing else: repaint that line.

        textual restyles a widget and its component classes whenever its focus
        changes (a ``:focus``/``:blur`` rule may apply), which on every view
        switch cost more than drawing the table: the cursor's blurred look is a
        component class of its own instead, chosen where the line is drawn.
        """
        top = round(self.scroll_offset.y)
        if self._visible and 0 <= self._cursor - top < self.size.height - 1:
            self.refresh(Region(0, self._cursor - top + 1, self.size.width, 1))

    def notify_style_update(self) -> None:
        self._styles.clear()
        super().notify_style_update()

    def _style(self, *names: str) -> Style:
        key = " ".join(names)
        style = self._styles.get(key)
        if style is None:
            style = self.rich_style
            for name in names:
                style += self.get_component_rich_style(f"rowtable--{name}")
            self._styles[key] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x = round(self.scroll_offset.x)
        if y == 0:
            return self._strip(self._header(scroll_x, width), self._style("header"), 0, width)
        index = round(self.scroll_offset.y) + y - 1
        if not self._visible and y == 1:
            return self._strip(" " + self._empty_text(), self._style("empty"), 0, width)
        if index >= len(self._visible):
            return Strip.blank(width, self._style())
        row = self._visible[index]
        names = [row.tone] if row.tone else []
        if index == self._cursor:
            names.append("cursor" if self.has_focus else "cursor-blurred")
        return self._strip(self._cells(row.cells), self._style(*names), scroll_x, width)

    def _header(self, scroll_x: int, width: int) -> str:
        """The column titles, and at the right end, when the rows do not all fit, the cursor's place among them."""
        text = self._cells([c.title for c in self.columns])[scroll_x : scroll_x + width].ljust(width)
        if len(self._visible) <= max(self.scrollable_content_region.height - 1, 0):
            return text
        place = f" {self._cursor + 1:,}/{len(self._visible):,} "
        if text.endswith(" " * (len(place) + 1)):
            return text[: width - len(place)] + place
        return text

    def _empty_text(self) -> str:
        """What an empty table says: that the filter hides every row, not that the node has none (pods are there)."""
        if self.filter_text and self._set.rows:
            count = len(self._set.rows)
            return f"none of {count:,} row{'s' if count > 1 else ''} matches /{escape(self.filter_text)}"
        return self.empty

    @staticmethod
    def _strip(text: str, style: Style, scroll_x: int, width: int) -> Strip:
        shown = text[scroll_x : scroll_x + width]
        return Strip([Segment(shown.ljust(width), style)], width)
