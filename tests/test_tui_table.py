"""The row table every view uses: cursor, selection, filter, a log that follows its tail, narrow terminals."""

from __future__ import annotations

from test_tui_support import screen_text
from textual.app import App, ComposeResult

from devctl.tui.widgets.table import Column, Row, RowTable

COLUMNS = (Column("ID", 20, min_width=4), Column("STATE", 12), Column("HOLDER", 50, min_width=8))


def rows(n: int) -> list[Row]:
    return [Row(f"d{i}", (f"dev-{i}", "free" if i % 3 else "allocated", f"ns/pod-{i}/main"), "") for i in range(n)]


class TableApp(App[None]):
    def __init__(self, table: RowTable) -> None:
        super().__init__()
        self.table = table
        self.selected: list[str] = []
        self.highlighted: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield self.table

    def on_mount(self) -> None:
        self.table.focus()

    def on_row_table_selected(self, message: RowTable.Selected) -> None:
        self.selected.append(message.key)

    def on_row_table_highlighted(self, message: RowTable.Highlighted) -> None:
        self.highlighted.append(message.key)


async def test_keys_move_the_cursor_and_enter_selects() -> None:
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(100))
        await pilot.press("down", "down")
        assert app.table.cursor_key == "d2"
        await pilot.press("pagedown")  # 12 lines: a header and 11 rows a page
        assert app.table.cursor_key == "d13"
        await pilot.press("end")
        assert app.table.cursor_key == "d99"
        assert "dev-99" in screen_text(app)  # scrolled into view
        await pilot.press("home", "enter")
        assert app.selected == ["d0"] and app.highlighted[-1] == "d0"


async def test_the_cursor_follows_its_row_when_rows_change() -> None:
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(10))
        await pilot.press("down", "down", "down")
        assert app.table.cursor_key == "d3"
        app.table.set_rows(list(reversed(rows(10))))
        assert app.table.cursor_key == "d3" and app.table.cursor_row.cells[0] == "dev-3"
        # When its row goes, the cursor stays at the same place.
        app.table.set_rows(rows(10))
        app.table.set_rows([r for r in rows(10) if r.key != "d3"])
        assert app.table.cursor_key == "d4"


async def test_a_click_selects_a_row_and_a_double_click_opens_it() -> None:
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(10))
        await pilot.click(RowTable, offset=(3, 3))  # line 0 is the header
        assert app.table.cursor_key == "d2"
        await pilot.click(RowTable, offset=(3, 5), times=2)
        assert app.selected == ["d4"]


async def test_filter_matches_any_cell_ignoring_case() -> None:
    app = TableApp(RowTable(COLUMNS, empty="no devices"))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(30))
        app.table.filter_text = "ALLOCATED"
        assert [r.key for r in app.table.rows] == [f"d{i}" for i in range(0, 30, 3)]
        app.table.filter_text = "pod-2"
        assert [r.key for r in app.table.rows] == [
            "d2",
            "d20",
            "d21",
            "d22",
            "d23",
            "d24",
            "d25",
            "d26",
            "d27",
            "d28",
            "d29",
        ]
        app.table.filter_text = "nothing matches this"
        await pilot.pause()
        assert app.table.rows == () and app.table.cursor_key is None
        # the table says the filter hides its rows, not that there are none (a person would think the node lost them)
        assert "none of 30 rows matches /nothing matches this" in screen_text(app)
        assert "no devices" not in screen_text(app)
        app.table.set_rows([])
        await pilot.pause()
        assert "no devices" in screen_text(app)


async def test_a_log_follows_new_lines_only_while_at_its_end() -> None:
    app = TableApp(RowTable(COLUMNS, follow_tail=True))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(5))
        assert app.table.cursor_key == "d4"
        app.table.set_rows(rows(50))
        await pilot.pause()
        assert app.table.cursor_key == "d49" and "dev-49" in screen_text(app)
        await pilot.press("up")
        app.table.set_rows(rows(60))  # reading an older line: it stays put
        assert app.table.cursor_key == "d48"


async def test_columns_narrow_to_fit_80_columns() -> None:
    wide = [Row("r", ("x" * 30, "allocated", "namespace/" + "p" * 60 + "/container"), "")]
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(wide)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert all(len(line) == 80 for line in lines)
        assert lines[0].split() == ["ID", "STATE", "HOLDER"]
        assert lines[1].startswith(" xxxx") and "allocated" in lines[1] and lines[1].rstrip().endswith("…")


async def test_ten_thousand_rows() -> None:
    # Only the visible lines are drawn (bench/bench_tui.py measures how fast).
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 30)) as pilot:
        app.table.set_rows(rows(10_000))
        await pilot.press("end")
        assert app.table.cursor_key == "d9999" and "dev-9999" in screen_text(app)
        await pilot.press("pageup")
        assert app.table.cursor_key == "d9970"


async def test_the_header_says_where_the_cursor_is_when_the_rows_do_not_fit() -> None:
    # No scroll bar (it cost a quarter of a view switch): the header says the cursor's place instead.
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(5))
        await pilot.pause()
        assert "/5" not in screen_text(app).splitlines()[0]  # everything fits: nothing to say
        app.table.set_rows(rows(10_000))
        await pilot.press("down", "down")
        assert screen_text(app).splitlines()[0].rstrip().endswith("3/10,000")
        await pilot.press("end")
        assert screen_text(app).splitlines()[0].rstrip().endswith("10,000/10,000")
        app.table.set_rows([*rows(10_000), Row("x", ("x", "free", "-"))])  # one more, out of sight, as narrow
        await pilot.pause()
        assert screen_text(app).splitlines()[0].rstrip().endswith("10,000/10,001")


async def test_a_changed_row_shows_and_the_others_stay() -> None:
    # Only the lines whose row changed are repainted: what is on screen must still be exactly the rows.
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        before = rows(100)
        app.table.set_rows(before)
        await pilot.press("down")
        changed = list(before)
        changed[3] = Row("d3", ("dev-3", "unhealthy", "ns/pod-3/main"), "bad")
        changed[50] = Row("d50", ("dev-50", "unhealthy", "-"), "bad")  # out of sight
        app.table.set_rows(changed)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[4].split() == ["dev-3", "unhealthy", "ns/pod-3/main"]
        assert lines[2].split() == ["dev-1", "free", "ns/pod-1/main"] and app.table.cursor_key == "d1"
        assert lines[5].split() == ["dev-4", "free", "ns/pod-4/main"]


async def test_fewer_rows_scroll_back_into_view() -> None:
    app = TableApp(RowTable(COLUMNS))
    async with app.run_test(size=(80, 12)) as pilot:
        app.table.set_rows(rows(100))
        await pilot.press("end")
        app.table.set_rows(rows(100)[90:])  # the cursor's row stays; only 10 rows are left
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert lines[1].split()[0] == "dev-90" and lines[10].split()[0] == "dev-99"
