"""A child process in a private mount namespace, for behaviour that keys on fixed host paths.

devctl treats a few paths of the host specially: the real ``/sys`` gets udev's
device names, and whether ``/var/lib/kubelet`` exists decides if a debug pod's
``/host`` is the node's root. A test of that must not read the machine it runs
on (a CI runner, or a developer's own node). In a private mount namespace the
child sees the test's own directories, or an empty tmpfs, at those paths, and
nothing it mounts reaches the host.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest


@functools.cache
def _cannot_unshare() -> str | None:
    """Why mount namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "private mount namespaces need root"
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True, timeout=10)
    if probe.returncode != 0:
        return f"cannot make a mount namespace here: {probe.stderr.strip()}"
    return None


def in_mount_namespace(
    code: str,
    mounts: Mapping[str, Path | None],
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Any:
    """Run Python ``code`` (with ``args`` in sys.argv[1:]) where each path of ``mounts`` shows the given directory.

    A target mapped to None gets an empty tmpfs. ``code`` prints its answer as
    one JSON line, last; that answer is returned. Where no namespace can be
    made (not root, no unshare) the test is skipped with the reason.
    """
    if (reason := _cannot_unshare()) is not None:
        pytest.skip(reason)
    steps = [
        f"mount -t tmpfs tmpfs {shlex.quote(target)}"
        if source is None
        else f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"
        for target, source in mounts.items()
    ]
    script = " && ".join([*steps, 'exec "$0" "$@"'])
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])
