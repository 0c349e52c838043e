"""The number formats of a node: the kernel's CPU lists, Kubernetes byte quantities, device counts.

Scenario files, sysfs and the kubelet's state files write CPUs as ``0-3,8`` and
memory as ``64Gi``; people read them back the same way. Parsing and printing
both live here so every layer agrees on them. A device count that devctl could
not learn prints as ``?`` and a lower bound as ``≥N``, in tables and the TUI alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fractions import Fraction

# --- CPU lists (the kernel's bitmap list format, lib/bitmap-str.c) ------------------


def parse_cpulist(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` -> ``(0, 1, 2, 3, 8, 10, 11)``: sorted, unique; ``""`` -> ``()``.

    Surrounding whitespace (sysfs files end in a newline) is ignored.
    """
    body = text.strip()
    if not body:
        return ()
    cpus: set[int] = set()
    for part in body.split(","):
        item = part.strip()
        lo_text, dash, hi_text = item.partition("-")
        if not lo_text.isdigit() or (dash and not hi_text.isdigit()):
            raise ValueError(f"invalid CPU list {text.strip()!r}: {item!r} is not a CPU number or range like 0-3")
        lo = int(lo_text)
        hi = int(hi_text) if dash else lo
        if hi < lo:
            raise ValueError(f"invalid CPU list {text.strip()!r}: range {item!r} runs backwards")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The compact kernel form of a set of CPUs: ``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``."""
    parts: list[str] = []
    start = prev = None
    for cpu in sorted(set(cpus)):
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(_span(start, prev))
        start = prev = cpu
    if start is not None:
        parts.append(_span(start, prev))
    return ",".join(parts)


def _span(lo: int, hi: int | None) -> str:
    return str(lo) if hi == lo else f"{lo}-{hi}"


# --- Quantities (k8s.io/apimachinery/pkg/api/resource/quantity.go) -----------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
# The quantity grammar of quantity.go: a signed decimal number, then a binary suffix,
# a decimal SI suffix (lower-case "k" only; "m" is milli) or a decimal exponent.
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?")


def parse_quantity(text: str | int) -> int:
    """A Kubernetes quantity of bytes as an integer: ``"1.5Gi"`` -> ``1610612736``.

    Follows the apimachinery grammar, so whatever a pod spec accepts is read the
    same way; a fraction of a byte rounds up, as ``Quantity.Value()`` does.
    Negative sizes are refused: nothing on a node has one.
    """
    # Here, not at the top: fractions imports decimal, which every table's formatting below would pay for.
    from fractions import Fraction

    if isinstance(text, bool):
        raise ValueError(f"invalid quantity {text!r}: expected a number of bytes like 1024, 512Mi or 1.5Gi")
    if isinstance(text, int):
        value = Fraction(text)
    else:
        match = _QUANTITY.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ValueError(
                f"invalid quantity {text!r}: expected a number with an optional suffix "
                "Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E (like 1024, 512Mi or 1.5Gi)"
            )
        number, suffix = match.group(1), match.group(2) or ""
        value = Fraction(number) * _multiplier(suffix)
    if value < 0:
        raise ValueError(f"invalid quantity {text!r}: a size cannot be negative")
    return -(-value.numerator // value.denominator)  # ceil, like Quantity.Value()


def _multiplier(suffix: str) -> Fraction:
    from fractions import Fraction

    if suffix in _BINARY:
        return Fraction(_BINARY[suffix])
    if suffix in _DECIMAL:
        return Fraction(_DECIMAL[suffix])
    if suffix == "m":
        return Fraction(1, 1000)
    return Fraction(10) ** int(suffix[1:])  # e3, E-2, ...


_UNITS = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def format_bytes(n: int) -> str:
    """A byte count for people, in kubectl's binary units: ``64Gi``, ``1.5Gi``, ``512Mi``, ``0``.

    Exact multiples print whole; others are rounded to one decimal, so this is
    for display only: JSON output carries the integer.
    """
    if n < 0:
        return "-" + format_bytes(-n)
    if n < 1024:
        return str(n)
    exp = 1
    while exp < len(_UNITS) and n >= 1024 ** (exp + 1):
        exp += 1
    unit = 1024**exp
    if n % unit == 0:
        return f"{n // unit}{_UNITS[exp - 1]}"
    shown = round(n / unit, 1)
    if shown >= 1024 and exp < len(_UNITS):  # 1023.97Mi would print as 1024.0Mi
        return format_bytes(1024 ** (exp + 1))
    text = f"{shown:.1f}".removesuffix(".0")
    return f"{text}{_UNITS[exp - 1]}"


# --- device counts ---------------------------------------------------------------------------

UNKNOWN_COUNT = "?"


def format_count(n: int | None, at_least: int | None = None) -> str:
    """``4``; ``≥2`` when only a lower bound is known; ``?`` when nothing is (never ``0``)."""
    if n is not None:
        return str(n)
    return f"≥{at_least}" if at_least else UNKNOWN_COUNT


# --- NUMA nodes ------------------------------------------------------------------------------

# A device or claim whose NUMA node nobody knows, as kubectl writes an empty column: one word in the
# CLI's tables and the TUI alike (``null`` in JSON), never -1 or "-".
NO_NUMA = "<none>"


def format_numa(nodes: Iterable[int]) -> str:
    """``0,1``; ``<none>`` when no node is known (the kubelet's -1 included)."""
    return ",".join(str(n) for n in nodes if n >= 0) or NO_NUMA
