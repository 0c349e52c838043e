"""A default table cuts its long cells in one step (issue 30, R3b): a 2 MB device ID is laid out at once.

``_fit`` took one character off the widest column per pass: a 2 MB ID took 1.5 s. The widths it gives must
stay exactly those of the pass-by-pass rule, which ``_one_at_a_time`` below restates as the reference.
"""

from __future__ import annotations

import random
import time

import pytest

from devctl.render.grid import ELLIPSIS, MIN_CUT, WIDTH, TableStyle, _fit, grid


def _one_at_a_time(widths: list[int], floor: dict[int, int], cut: list[int], over: int) -> dict[int, int]:
    """The rule as it was written: one character from the widest shrinkable column (of equals the last)."""
    target = {i: widths[i] for i in cut}
    while over > 0:
        shrinkable = [i for i in cut if target[i] > floor[i]]
        if not shrinkable:
            break
        widest = max(reversed(shrinkable), key=target.__getitem__)
        target[widest] -= 1
        over -= 1
    return target


@pytest.mark.parametrize("megabytes", [2, 16])
def test_a_2mb_device_id_lays_out_in_one_line_that_fits(megabytes: int) -> None:
    # 16 MB: the pass-by-pass rule took about 2 s a 2 MB ID, so 16 MB shows it over the bound under any load.
    device_id = "GPU-" + "0123456789abcdef" * (megabytes * 1024 * 1024 // 16) + "-tail"
    rows = [
        ["nvidia.com/gpu", device_id, "Healthy", "0", "ml/train-0"],
        ["nvidia.com/gpu", "gpu-1", "Healthy", "1", ""],
    ]
    start = time.perf_counter()
    text = grid(["resource", "id", "health", "numa", "pod"], rows, TableStyle(), cut=(1, 4))
    elapsed = time.perf_counter() - start
    lines = text.splitlines()
    assert len(lines) == 3 and lines[0].split() == ["RESOURCE", "ID", "HEALTH", "NUMA", "POD"]
    assert all(len(line) <= WIDTH for line in lines)
    # The head and the tail of the ID stay, its middle is one ellipsis; the other cells are whole.
    cell = lines[1].split()[1]
    assert cell.startswith("GPU-0123") and cell.endswith("-tail") and cell.count(ELLIPSIS) == 1
    assert lines[1].split()[2:] == ["Healthy", "0", "ml/train-0"]
    assert elapsed < 5.0  # generous: milliseconds now


def test_the_cut_widths_are_those_of_the_one_character_rule() -> None:
    rng = random.Random(30)
    for _ in range(3000):
        n = rng.randint(1, 7)
        header = [rng.choice(["ID", "NAMESPACE", "POD", "X", "RESOURCE-NAME"]) for _ in range(n)]
        cells = [
            [header[i], *("x" * rng.choice([0, 1, 5, 8, 9, 12, 20, 40, 90, rng.randint(0, 300)]) for _ in range(2))]
            for i in range(n)
        ]
        cut = sorted(rng.sample(range(n), rng.randint(1, n)))
        headers = rng.random() < 0.8
        columns = [list(c) if headers else list(c[1:]) or [""] for c in cells]
        widths = [max(map(len, c)) for c in columns]
        over = sum(widths) + 3 * (n - 1) - WIDTH
        floor = {i: max(MIN_CUT, len(columns[i][0]) if headers else 0) for i in cut}
        expected = _one_at_a_time(widths, floor, cut, over)
        done = _fit(columns, cut, WIDTH, headers)
        assert done == {i for i in cut if expected[i] < widths[i]}
        got = {i: max(map(len, columns[i])) for i in cut}
        assert got == {i: min(expected[i], widths[i]) for i in cut}, (widths, cut, floor, over)
