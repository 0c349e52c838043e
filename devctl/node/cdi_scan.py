"""Many CDI spec files scanned by a helper process, so that their YAML does not hold devctl's one core.

A node with 1,000 DRA claims has 1,000 spec files, and scanning their YAML
(``devctl.fast.yamlsubset``) is pure Python: about half of ``devctl claims``'
extra time on such a node (docs/dra.md), run on a thread that holds the GIL
while the RPCs' answers wait to be read. A second interpreter does the
reading and the scan on another core instead, and hands back each file's
loaded document (``marshal``: plain dicts, lists, strings and numbers); the
caller still checks each document and makes the model's specs from it
(devctl.node.cdi), so a spec reads the same either way (tests/test_cdi_scan.py).

The helper is only an accelerator. It reads a file with devctl.node.files'
reader (regular files only, never blocking, capped) and scans only what the
subset reads; anything else it leaves to the caller (``None``): a file it
could not read, or one PyYAML would have to load, is then read in process
and any error is the caller's own one line. If the helper cannot start, fails
or overstays its deadline, the caller reads every file itself.

The helper imports the standard library and this package's ``yamlsubset``
only (not devctl.model, whose dataclasses cost ~70 ms to make): ``python -I
-S`` with devctl's own directory last on its path, so neither the
environment nor site-packages change what runs as root.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # typing's own, without importing typing: ~12 ms of the helper's start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TypeAlias

    Scanned: TypeAlias = tuple[Any] | None  # (the document,) or None: the caller reads that file itself

# Below this many YAML files the helper's start (~45 ms on another core) costs more than their scan in process.
MIN_FILES = 100
DEADLINE = 5.0  # seconds for the helper as a whole; then it is killed and the caller reads the files itself
_RUN = "from devctl.node.cdi_scan import main; main(int(sys.argv[2]))"  # a helper's program (devctl.fast.helper)


def scan_in_child(
    paths: Sequence[str], limit: int, *, python: str | None = None, deadline: float = DEADLINE
) -> list[Scanned] | None:
    """Each file's document as a helper process scanned it, in order; None when the helper gave no answer.

    ``python``: the interpreter to run (this one by default; tests name
    another to see the caller cope with a helper that fails or hangs).
    """
    import subprocess  # here, not at the top: the helper itself never starts one

    from devctl.fast.helper import helper_command

    argv = helper_command(_RUN, str(limit))
    if not argv:
        return None  # an embedding without an interpreter to start
    if python is not None:
        argv[0] = python
    try:
        done = subprocess.run(
            argv,
            input="\0".join(paths).encode("utf-8", "surrogateescape"),
            capture_output=True,
            timeout=deadline,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no such interpreter, no process left to fork, the deadline
        return None
    if done.returncode != 0:
        return None
    try:
        scanned = marshal.loads(done.stdout)
    except (EOFError, ValueError, TypeError):
        return None
    if type(scanned) is not list or len(scanned) != len(paths):
        return None
    return [s if type(s) is tuple and len(s) == 1 else None for s in scanned]


def main(limit: int) -> None:
    """The helper: NUL-separated paths on stdin, a marshalled list of :data:`Scanned` on stdout."""
    from devctl.fast import yamlsubset

    paths = sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0")
    out: list[Scanned] = []
    dirs: dict[str, str] = {}  # a spec dir -> that dir resolved: a spec's file must be in it, as the caller's rule
    for path in paths:
        text = None
        if path:
            where = os.path.dirname(path)
            inside = dirs.get(where)
            if inside is None:
                inside = dirs[where] = os.path.realpath(where)
            text = _read(path, limit, inside)
        doc: Scanned = None
        if text is not None:
            try:
                doc = (yamlsubset.scan(text),)
            except Exception:  # outside the subset, or a scalar only PyYAML types: the caller loads it
                doc = None
        out.append(doc)
    try:
        data = marshal.dumps(out)
    except ValueError:  # a value marshal cannot carry: those documents are left to the caller
        data = marshal.dumps([_carried(d) for d in out])
    sys.stdout.buffer.write(data)


def _carried(doc: Scanned) -> Scanned:
    try:
        marshal.dumps(doc)
    except ValueError:
        return None
    return doc


def _read(path: str, limit: int, inside: str) -> str | None:
    """The file's UTF-8 text through devctl's one safe reader, or None for anything else (the caller says why)."""
    from devctl.node.files import FileRefused, read_regular

    try:
        return read_regular(path, limit, inside=inside).decode("utf-8")
    except (FileRefused, UnicodeDecodeError):
        return None
