"""bench/compare.py: two runs' figures in, a table out, exit 1 on a regression beyond 20 % (logic, not timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

COMPARE = Path(__file__).resolve().parent.parent / "bench" / "compare.py"


def figure(value: float, unit: str = "ratio", target: float | None = None, better: str = "lower") -> dict:
    return {"value": value, "unit": unit, "target": target, "better": better}


def write(path: Path, doc: dict) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(COMPARE), *args], capture_output=True, text=True, timeout=60)


def merged(read: dict, tui: dict) -> dict:
    benches = {"read": {"figures": read}, "tui": {"figures": tui}}
    return {"taken": "2026-12-01T08:00:00Z", "load": [0.1], "benches": benches}


def test_a_ratio_worse_by_more_than_a_fifth_fails(tmp_path):
    tui_old, tui_new = {"switch_p95": figure(80, "ms")}, {"switch_p95": figure(81, "ms")}
    old = write(tmp_path / "old.json", merged({"ls_json_ratio": figure(1.0, target=1.2)}, tui_old))
    new = write(tmp_path / "new.json", merged({"ls_json_ratio": figure(1.25, target=1.2)}, tui_new))
    out = compare(old, new)
    assert out.returncode == 1
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert rows["read.ls_json_ratio"][-1] == "REGRESSED" and "+25%" in rows["read.ls_json_ratio"]
    assert rows["tui.switch_p95"][-1] == "ok"


def test_changes_within_a_fifth_and_improvements_pass(tmp_path):
    old = write(tmp_path / "old.json", merged({"a": figure(1.0), "b": figure(100, "ms")}, {"c": figure(50, "ms")}))
    new = write(tmp_path / "new.json", merged({"a": figure(1.19), "b": figure(40, "ms")}, {"c": figure(59.9, "ms")}))
    out = compare(old, new)
    assert out.returncode == 0, out.stdout
    assert "REGRESSED" not in out.stdout


def test_a_figure_where_higher_is_better_regresses_downwards(tmp_path):
    old = write(tmp_path / "old.json", {"bench": "x", "figures": {"rate": figure(100, "%", better="higher")}})
    new = write(tmp_path / "new.json", {"bench": "x", "figures": {"rate": figure(75, "%", better="higher")}})
    assert compare(old, new).returncode == 1
    assert compare(new, old).returncode == 0


def test_one_bench_file_compares_with_a_merged_one_and_units_can_be_chosen(tmp_path):
    old = write(tmp_path / "old.json", merged({"r": figure(1.0), "ms": figure(100, "ms")}, {}))
    new = write(tmp_path / "new.json", {"bench": "read", "figures": {"r": figure(1.1), "ms": figure(300, "ms")}})
    assert compare(old, new).returncode == 1  # the absolute time tripled
    only_ratios = compare("--unit", "ratio", old, new)
    assert only_ratios.returncode == 0 and "read.ms" not in only_ratios.stdout


def test_new_and_gone_figures_are_listed_without_failing(tmp_path):
    old = write(tmp_path / "old.json", {"bench": "read", "figures": {"old_one": figure(1.0)}})
    new = write(tmp_path / "new.json", {"bench": "read", "figures": {"new_one": figure(9.0)}})
    out = compare(old, new)
    assert out.returncode == 0
    verdicts = {line.split()[0]: line.split()[-1] for line in out.stdout.splitlines()[1:]}
    assert verdicts == {"read.new_one": "new", "read.old_one": "gone"}


def test_merge_then_compare_and_unreadable_files(tmp_path):
    read = write(tmp_path / "read.json", {"bench": "read", "load": [0.5], "figures": {"r": figure(1.0)}})
    tui = write(tmp_path / "tui.json", {"bench": "tui", "figures": {"p95": figure(40, "ms")}})
    out = tmp_path / "results" / "run.json"
    assert compare("--merge", str(out), read, tui).returncode == 0
    doc = json.loads(out.read_text())
    assert doc["benches"]["read"] == {"load": [0.5], "figures": {"r": figure(1.0)}}
    assert compare(str(out), str(out)).returncode == 0
    broken = write(tmp_path / "broken.json", {"figures": []})
    bad = compare(str(out), broken)
    assert bad.returncode == 2 and "broken.json" in bad.stderr
