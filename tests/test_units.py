"""CPU lists and byte quantities as the kernel and Kubernetes write them."""

from __future__ import annotations

import pytest

from devctl.base.units import format_bytes, format_cpulist, parse_cpulist, parse_quantity


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("", ()),
        ("\n", ()),
        ("0", (0,)),
        ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)),
        ("8,0-3,2", (0, 1, 2, 3, 8)),  # unsorted, overlapping: sorted and unique
        ("5-5", (5,)),
        (" 0-1 , 4 ", (0, 1, 4)),
    ],
)
def test_parse_cpulist(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a", "0-", "-3", "3-1", "0,,1", "0,", "1.5", "0-3:2", "0 1"])
def test_parse_cpulist_refuses_garbage_with_the_input_in_the_message(text: str) -> None:
    with pytest.raises(ValueError, match="invalid CPU list") as err:
        parse_cpulist(text)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        ((), ""),
        ((7,), "7"),
        ((0, 1, 2, 3, 8, 10, 11), "0-3,8,10-11"),
        ([11, 3, 2, 1, 0, 0, 10, 8], "0-3,8,10-11"),
        ((0, 2, 4), "0,2,4"),
        (range(64), "0-63"),
    ],
)
def test_format_cpulist(cpus, text: str) -> None:
    assert format_cpulist(cpus) == text


@pytest.mark.parametrize("text", ["0-63", "0,2,4-7,9", "1", "0-1,3-4,100-127"])
def test_cpulist_round_trip(text: str) -> None:
    assert format_cpulist(parse_cpulist(text)) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64Gi", 64 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1G", 10**9),
        ("1024", 1024),
        (1024, 1024),
        ("2Ki", 2048),
        ("1.5Gi", 3 * 2**29),
        ("1Ti", 2**40),
        ("500k", 500_000),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2E", 2 * 10**18),  # E alone is exa, not an exponent
        (".5Ki", 512),
        ("0", 0),
        (" 1Gi\n", 2**30),
        ("0.1", 1),  # a fraction of a byte rounds up, like Quantity.Value()
        ("1500m", 2),
    ],
)
def test_parse_quantity(text: str | int, value: int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1GB", "1K", "1gi", "ten", "1.2.3", "-1Gi", -5, True, "1Gi5"])
def test_parse_quantity_refuses_garbage(text) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (1023, "1023"),
        (1024, "1Ki"),
        (64 * 2**30, "64Gi"),
        (3 * 2**29, "1.5Gi"),
        (512 * 2**20, "512Mi"),
        (3 * 2**29 + 1, "1.5Gi"),  # not exact: rounded for display
        (2**20 - 1, "1Mi"),  # rounds up into the next unit, never "1024Ki"
        (5 * 2**60, "5Ei"),
        (-(2**30), "-1Gi"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize("n", [0, 1000, 2048, 3 * 2**29, 64 * 2**30, 2**40 + 2**39, 7 * 2**50])
def test_exact_sizes_round_trip_through_format_and_parse(n: int) -> None:
    assert parse_quantity(format_bytes(n)) == n


def test_numa_unknown_is_one_word_in_the_tui_as_in_the_cli_tables():
    from devctl.base.units import format_numa
    from devctl.render.style import NONE

    assert format_numa((0, 1)) == "0,1"
    assert format_numa(()) == format_numa((-1,)) == NONE == "<none>"  # never -1 or "-" (issue 10, item 9)
