"""No devctl module imports another's private name (``from devctl.x import _y``): what a module shares with
others it names as public, so a reader knows what may be called from outside it (issue 30's finding:
"private names used across modules")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "devctl"


def _private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("devctl"):
            found += [
                f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"
            ]
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    found = {
        str(path.relative_to(PACKAGE)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if "api" not in path.relative_to(PACKAGE).parts[:1] and (names := _private_imports(path))
    }
    assert found == {}


def test_the_check_sees_one(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("from devctl.analyze.hardware import _hidden as shown\n")
    assert _private_imports(sample) == ["devctl.analyze.hardware._hidden"]
