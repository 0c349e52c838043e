"""The command line of a helper interpreter: a second Python process that reads for devctl on another core.

devctl is one process with one interpreter lock. Where a read is large and
pure Python — the ``<proc>`` scan's fd links (devctl.fast.fdscan), many CDI
specs' YAML (devctl.node.cdi_scan) — a helper process does part of it on the
machine's other core, and the caller reads anything the helper could not.
A helper imports the standard library and its own module only (devctl.model
alone costs 60 to 90 ms to import), so it starts in 15 to 45 ms.

``-I -S``: neither the environment (PYTHONPATH, PYTHONSTARTUP) nor any
site-packages change what runs, as root on a node; devctl's own directory
goes *last* on the helper's path, so nothing beside devctl there (it may be
site-packages itself) shadows a standard-library module.
"""

from __future__ import annotations

import os
import sys

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def helper_command(program: str, *args: str) -> list[str]:
    """argv running ``program`` (Python source; ``sys.argv[2:]`` are ``args``) in a helper interpreter.

    Empty when there is no interpreter to start (an embedding without ``sys.executable``).
    """
    if not sys.executable:
        return []
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        f"import sys; sys.path.append(sys.argv[1]); {program}",
        PACKAGE_ROOT,
        *args,
    ]
