"""The table writer: kubectl's columns three spaces apart, cells escaped, long cells cut to fit 80 columns.

Every view's table (devctl.render.table, table_pods, table_node, table_findings) is laid out by ``grid``; the
small cell spellings they share (a NUMA list, a plugin's options, a list abbreviated) are here beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from devctl.base.escape import escape
from devctl.model import (
    PluginOptions,
)
from devctl.render.style import NONE, Styled

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    pass

# kubectl's columns: left-aligned, three spaces between them, nothing else
# (k8s.io/cli-runtime/pkg/printers/tabwriter.go: padding 3).
GAP = "   "


# The colour codes of devctl.render.style.paint: they take no room on the screen. (Data cannot hold an ESC:
# escape() has spelled it out.)
_SGR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class TableStyle:
    wide: bool = False
    headers: bool = True
    color: bool = False


# The width every default table fits: an SSH user's terminal. ``-o wide`` is never cut.
WIDTH = 80


# What marks a cut value: one character on the screen.
ELLIPSIS = "\u2026"


# A cut column keeps at least this many characters (and its header): enough of an ID to match it.
MIN_CUT = 8


def cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by ``…``: the head and the tail (the larger part,
    where IDs and generated pod names differ) stay, so a person can still match it against ``-o wide``."""
    if len(text) <= width:
        return text
    if width < 2:
        return ELLIPSIS[:width]
    keep = width - 1
    head = keep // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


def cut_path(text: str, width: int) -> str:
    """A path in ``width`` characters with its file name whole (``/var/…/kubelet_internal_checkpoint``)."""
    if len(text) <= width:
        return text
    head, sep, name = text.rpartition("/")
    room = width - len(name) - len(sep) - 1
    if not sep or room < 1:
        return cut_middle(text, width)
    return head[:room] + ELLIPSIS + sep + name


def _fit(columns: list[list[str]], cut: Sequence[int], width: int, headers: bool) -> set[int]:
    """Cut the cells of the columns ``cut`` (``cut_middle``), widest column first, until the table is at most
    ``width`` characters wide or each is down to its header or MIN_CUT; the columns cut, in place.

    Only the columns named are cut: a health word, a state, a count or a CPU list never is.
    """
    widths = [max(len(_SGR.sub("", c)) if "\x1b" in c else len(c) for c in column) for column in columns]
    over = sum(widths) + len(GAP) * (len(widths) - 1) - width
    if over <= 0:
        return set()
    floor = {i: max(MIN_CUT, len(columns[i][0]) if headers else 0) for i in cut}
    target = _shrunk({i: widths[i] for i in cut}, floor, over)
    done = set()
    for i in cut:
        if target[i] < widths[i]:
            w = target[i]
            columns[i] = [c if len(c) <= w else cut_middle(c, w) for c in columns[i]]
            done.add(i)
    return done


def _shrunk(target: dict[int, int], floor: dict[int, int], over: int) -> dict[int, int]:
    """The widths after ``over`` characters are taken one at a time from the widest column above its floor (of
    equals the last: a pod's name outlasts its namespace), computed a level at a time: a 2 MB ID is one step,
    not two million."""
    target = dict(target)
    while over > 0:
        shrinkable = [i for i in target if target[i] > floor[i]]
        if not shrinkable:
            break
        top = max(target[i] for i in shrinkable)
        level = [i for i in shrinkable if target[i] == top]
        # Down to the next column's width, or to the highest floor among these, whichever comes first.
        below = max([target[i] for i in shrinkable if target[i] < top] + [floor[i] for i in level])
        if over >= len(level) * (top - below):
            for i in level:
                target[i] = below
            over -= len(level) * (top - below)
            continue
        rounds, extra = divmod(over, len(level))
        for n, i in enumerate(sorted(level, reverse=True)):  # each round takes from the last column first
            target[i] = top - rounds - (1 if n < extra else 0)
        over = 0
    return target


def _cell(value: object) -> str:
    if type(value) is str:  # most cells: one check
        return escape(value) if value else NONE
    if type(value) is Styled:
        return value or NONE
    if value is None or value == "" or value == () or value == []:
        return NONE
    if isinstance(value, Styled):
        return value
    return escape(str(value))


def _cells(column: Sequence[object]) -> list[str]:
    """Each value's cell (``_cell``, stripped): a column of plain strings is checked in one pass.

    A column of strings that holds nothing ``escape`` would change (one
    ``isprintable`` over the column's text, in C) needs no escape call per cell.
    """
    if set(map(type, column)) == {str}:
        text = "".join(column)  # type: ignore[arg-type]  # all str, checked above
        if text.isprintable() and "\\" not in text:
            return [v.strip() if v else NONE for v in column]  # type: ignore[attr-defined]
    return [_cell(v).strip() for v in column]


def grid(headers: Sequence[str], rows: Iterable[Sequence[object]], style: TableStyle, cut: Sequence[int] = ()) -> str:
    """Rows under upper-case headers, three spaces apart as kubectl prints them; '' when there are none.

    Written here, not by tabulate: a 50,000-pod table took seconds in tabulate's general machinery. The
    text is what tabulate prints for the same rows (tests/test_render.py compares them): cells stripped
    of surrounding whitespace, each column as wide as its widest cell, colour codes taking no room. A
    non-ASCII cell goes to tabulate (_tabulated), whose width for it (wcwidth's, when installed) is the
    one the tables have always had. Cells are made a column at a time (``_cells``).

    ``cut``: the columns whose values may be cut in their middle (``_fit``) so that a table that is not
    ``wide`` fits WIDTH characters; ``-o wide`` keeps every value whole.
    """
    rows = list(rows)
    if not rows:
        return ""
    if len({len(row) for row in rows}) != 1 or (style.headers and len(headers) != len(rows[0])):
        # tabulate fills a short row with empty cells
        body = [[_cell(v).strip() for v in row] for row in rows]
        if style.headers:
            body.insert(0, [h.upper() for h in headers])
        return _tabulated(body)
    columns = [_cells(column) for column in zip(*rows, strict=True)]
    if style.headers:
        for header, column in zip(headers, columns, strict=True):
            column.insert(0, header.upper())
    fitted = _fit(columns, cut, WIDTH, style.headers) if cut and not style.wide else set()
    widths = []
    coloured = False
    for i, column in enumerate(columns):
        text = "".join(column)
        if not text.isascii() and not (i in fitted and text.replace(ELLIPSIS, "").isascii()):
            return _tabulated([list(row) for row in zip(*columns, strict=True)])
        if "\x1b" in text:
            coloured = True
            widths.append(max(len(_SGR.sub("", c)) for c in column))
        else:
            widths.append(max(map(len, column)))
    table = zip(*columns, strict=True)
    if coloured:  # each cell padded by its visible width
        last = len(widths) - 1
        lines = (
            GAP.join(c if i == last else c + " " * (widths[i] - len(_SGR.sub("", c))) for i, c in enumerate(row))
            for row in table
        )
    else:  # one format per table, one C call per row
        line = GAP.join([f"{{:<{w}}}" for w in widths[:-1]] + ["{}"]).format
        lines = (line(*row) for row in table)
    return "\n".join([line.rstrip() for line in lines]) + "\n"


def _tabulated(body: list[list[str]]) -> str:
    """``body`` laid out by tabulate with kubectl's gaps: for cells whose width only tabulate knows."""
    from tabulate import DataRow, TableFormat, tabulate

    kubectl = TableFormat(None, None, None, None, DataRow("", GAP, ""), DataRow("", GAP, ""), 0, None)
    text = tabulate(body, tablefmt=kubectl, disable_numparse=True, stralign="left")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def numa_cell(nodes: Iterable[int]) -> str:
    """NUMA nodes as ``0,1``; '' (``<none>`` in the table) when none is known, never -1 or ``-``."""
    return ",".join(str(n) for n in nodes if n >= 0)


def short_name(resource: str) -> str:
    """``nvidia.com/gpu`` -> ``gpu``, as the TUI's narrow columns write it; a DRA driver stays whole."""
    return resource.rsplit("/", 1)[-1]


def some(items: Sequence[str], shown: int = 2) -> str:
    """The first ``shown`` items and how many more, as kubectl abbreviates a list: ``GPU-0,GPU-1 +2``."""
    more = len(items) - shown
    return ",".join(items[:shown]) + (f" +{more}" if more > 0 else "")


def flag_cell(on: bool | None) -> str:
    return "" if on is None else ("yes" if on else "no")


def options_cells(o: PluginOptions | None) -> tuple[str, str]:
    if o is None:
        return "", ""
    return flag_cell(o.pre_start_required), flag_cell(o.get_preferred_allocation_available)
