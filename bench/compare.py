"""Compare two runs of the benches and fail on a regression: `bench/compare.py OLD.json NEW.json`.

Each file is what `make bench` writes (every bench's figures in one document,
{"benches": {NAME: {"figures": ...}}}) or one bench's own `--json` output
({"bench": NAME, "figures": ...}). A figure is {"value", "unit", "target",
"better"}; it regressed when its value moved the wrong way by more than
--tolerance (default 20 %) of the old value. Prints one row per figure and
exits 1 when any figure regressed, 0 otherwise, 2 on a file it cannot read.

Absolute times depend on the machine and its load; ratios and percentiles
measured within one run travel better. `--unit ratio` (repeatable) compares
only figures of those units.

    python bench/compare.py bench/results/OLD.json bench/results/NEW.json
    python bench/compare.py --unit ratio OLD.json NEW.json

`--merge OUT FILE...` writes the one document `make bench` keeps from each
bench's `--json` file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

TOLERANCE = 0.20


class BadFile(Exception):
    pass


def load(path: str) -> dict[str, dict[str, dict[str, Any]]]:
    """{bench: {figure: {...}}} from a merged results file or one bench's --json file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BadFile(f"{path}: {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("benches"), dict):
        benches = {name: body.get("figures") for name, body in doc["benches"].items() if isinstance(body, dict)}
    elif isinstance(doc, dict) and isinstance(doc.get("bench"), str):
        benches = {doc["bench"]: doc.get("figures")}
    else:
        raise BadFile(f"{path}: neither a bench's figures nor a merged results file")
    for name, figures in benches.items():
        if not isinstance(figures, dict):
            raise BadFile(f"{path}: bench {name} has no figures")
        for key, fig in figures.items():
            if not isinstance(fig, dict) or not isinstance(fig.get("value"), (int, float)):
                raise BadFile(f"{path}: {name}.{key} has no numeric value")
    return benches  # type: ignore[return-value]


def change(old: float, new: float, better: str) -> float:
    """How much worse ``new`` is than ``old``, as a fraction of ``old`` (negative: better), by ``better``."""
    worse = new - old if better == "lower" else old - new
    if old == 0:
        return 0.0 if worse <= 0 else float("inf")
    return worse / abs(old)


def compare(
    old: dict[str, dict[str, dict[str, Any]]],
    new: dict[str, dict[str, dict[str, Any]]],
    tolerance: float = TOLERANCE,
    units: set[str] | None = None,
) -> tuple[list[list[str]], bool]:
    """The table's rows and whether any figure (of ``units``, when given) regressed beyond ``tolerance``."""
    rows: list[list[str]] = []
    regressed = False
    for bench in sorted(old.keys() | new.keys()):
        for key in sorted(old.get(bench, {}).keys() | new.get(bench, {}).keys()):
            before, after = old.get(bench, {}).get(key), new.get(bench, {}).get(key)
            fig = after or before
            assert fig is not None
            if units is not None and fig.get("unit") not in units:
                continue
            unit = fig.get("unit", "")
            target = "" if fig.get("target") is None else f"{fig['target']:g}"
            name = f"{bench}.{key}"
            if before is None or after is None:
                value = f"{(after or before)['value']:g}"
                rows.append(
                    [
                        name,
                        "" if before is None else value,
                        "" if after is None else value,
                        unit,
                        target,
                        "",
                        "new" if before is None else "gone",
                    ]
                )
                continue
            worse = change(before["value"], after["value"], after.get("better", "lower"))
            bad = worse > tolerance
            regressed |= bad
            old_value, new_value = before["value"], after["value"]
            shown = f"{(new_value - old_value) / abs(old_value):+.0%}" if old_value else ""
            rows.append(
                [name, f"{before['value']:g}", f"{after['value']:g}", unit, target, shown, "REGRESSED" if bad else "ok"]
            )
    return rows, regressed


def table(rows: list[list[str]]) -> str:
    header = ["figure", "old", "new", "unit", "target", "change", "verdict"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows])
    return "".join(line + "\n" for line in lines)


def merge(out: str, files: list[str]) -> None:
    """One results document from each bench's --json file, with when and under what load it was taken."""
    benches: dict[str, Any] = {}
    for path in files:
        doc = json.loads(Path(path).read_text())
        benches[doc["bench"]] = {k: v for k, v in doc.items() if k != "bench"}
    merged = {
        "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load": [round(x, 2) for x in os.getloadavg()],
        "benches": benches,
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(merged, indent=1) + "\n")
    print(f"bench figures written to {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="a fraction: 0.2 is 20 %%")
    parser.add_argument("--unit", action="append", help="compare only figures of this unit (repeatable)")
    parser.add_argument("--merge", metavar="OUT", help="write one results file OUT from the FILEs instead")
    args = parser.parse_args(argv)
    if args.merge:
        merge(args.merge, args.files)
        return 0
    if len(args.files) != 2:
        parser.error("two files: OLD NEW")
    try:
        old, new = load(args.files[0]), load(args.files[1])
    except BadFile as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    rows, regressed = compare(old, new, args.tolerance, set(args.unit) if args.unit else None)
    sys.stdout.write(table(rows))
    if regressed:
        print(f"\nregressed: a figure moved the wrong way by more than {args.tolerance:.0%}", file=sys.stderr)
    return 1 if regressed else 0


if __name__ == "__main__":
    sys.exit(main())
