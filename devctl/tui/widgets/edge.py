"""A table that hands the focus on at its edges, so arrows walk through tables stacked on one screen."""

from __future__ import annotations

from devctl.tui.widgets.table import RowTable


class EdgeTable(RowTable):
    """A table that hands the focus on at its edges: ↓ on its last row goes to ``below``, ↑ on its first to ``above``.

    The first screen stacks three tables; arrows walk through all of them.
    """

    def __init__(self, *args: object, above: str | None = None, below: str | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.above = above
        self.below = below

    def action_cursor(self, delta: int) -> None:
        rows = self.rows
        index = next((i for i, r in enumerate(rows) if r.key == self.cursor_key), 0)
        target = self.below if delta > 0 and index >= len(rows) - 1 else None
        target = self.above if delta < 0 and index == 0 else target
        if target is not None:
            found = self.screen.query(f"#{target}")
            if found and found.first().display:
                found.first().focus()
                return
        super().action_cursor(delta)
