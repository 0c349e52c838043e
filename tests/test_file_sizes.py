"""No devctl module over 500 lines (the generated API aside): a room that grows past it is split by subject
(issue 30), so that a module stays something one reads whole."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "devctl"
LIMIT = 500


def test_no_module_is_over_500_lines() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "api" not in path.relative_to(PACKAGE).parts[:1]
    }
    assert len(sizes) > 100
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
