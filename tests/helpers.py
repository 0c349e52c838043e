"""Running devctl as a person does, for the CLI tests: in-process, as a process, or as a user without rights.

Every way hands back the same ``Result``: the exit status, stdout, stderr and
stdout parsed as JSON (httpie's test helpers do the same). It is a tuple too,
so ``code, out, err = ...`` reads naturally. Every run has a bounded wait: a
command that hangs fails its test instead of the suite.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

# The longest any one in-process command or background server start may take; the CLI's own deadlines are far shorter.
BOUND = 30.0
DEVCTL = [sys.executable, "-m", "devctl"]

# Every module a command may import lazily, imported by a child before it drops to nobody: the checkout may be
# where nobody cannot read it (a `mktemp -d` clone, a home directory of mode 0700), and a module first needed on
# the path without rights must not turn "permission denied" into an import error. Not the TUI, exporter, fleet
# or simulator (their libraries; no test runs them as nobody), nor __main__ (it runs the app).
IMPORT_ALL = """
import importlib, pkgutil
for _pkg in ("devctl", "devctl.cli", "devctl.node", "devctl.analyze", "devctl.render", "devctl.core.watch"):
    for _m in pkgutil.iter_modules(importlib.import_module(_pkg).__path__, _pkg + "."):
        if not _m.ispkg and _m.name != "devctl.__main__":
            importlib.import_module(_m.name)
import devctl.api
for _m in pkgutil.walk_packages(devctl.api.__path__, "devctl.api."):
    importlib.import_module(_m.name)
"""

# The interpreter may live where nobody cannot read it (a pyenv under /root), so the
# child imports every module and runs the command once as root with its output thrown
# away (every lazy import done), then drops to nobody and runs it for real.
AS_NOBODY = (
    IMPORT_ALL
    + """
import contextlib, io, os, sys
from devctl.cli.app import main
sys.argv = ["devctl", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    with contextlib.suppress(SystemExit):
        main()
os.setuid(65534)
main()
"""
)


class Result(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def invoke(*argv: str) -> Result:
    """``devctl ARGV...`` in-process (typer's CliRunner, in a worker thread); fail, not hang, after BOUND."""
    from typer.testing import CliRunner

    from devctl.cli.app import app

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = pool.submit(CliRunner().invoke, app, list(argv), env={"NO_COLOR": None}).result(BOUND)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def devctl(root: Path | str, *args: str, timeout: float = 2.0) -> Result:
    """``devctl --root ROOT --timeout T ARGS...`` in-process, against the node under ``root``."""
    return invoke("--root", str(root), "--timeout", str(timeout), *args)


def devctl_env(root: Path | str | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment for a devctl process: no DEVCTL_* setting of our own leaks in, no colour.

    ``root`` becomes DEVCTL_ROOT, as ``devctl sim`` tells a shell where its node is.
    """
    out = {k: v for k, v in os.environ.items() if not k.startswith("DEVCTL_")}
    out["NO_COLOR"] = "1"
    if root is not None:
        out["DEVCTL_ROOT"] = str(root)
    return {**out, **(env or {})}


def _argv(args: tuple[str, ...], as_nobody: bool) -> list[str]:
    return [sys.executable, "-c", AS_NOBODY, *args] if as_nobody else [*DEVCTL, *args]


def run_devctl(
    *args: str,
    root: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    as_nobody: bool = False,
) -> Result:
    """``devctl ARGS...`` as a real process (with ``as_nobody``, as user 65534; the caller checks it is root).

    ``timeout`` stays under the suite's per-test limit, so a hung process fails with its own error.
    """
    p = subprocess.run(
        _argv(args, as_nobody), capture_output=True, text=True, timeout=timeout, env=devctl_env(root, env)
    )
    return Result(p.returncode, p.stdout, p.stderr)


async def run_devctl_async(
    *args: str, root: Path | str | None = None, env: Mapping[str, str] | None = None, timeout: float = 20.0
) -> Result:
    """``run_devctl`` from a test whose event loop must keep serving (fake kubelets, plugins) meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        *_argv(args, False),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=devctl_env(root, env),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


NOBODY = 65534


def call_as_nobody(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a forked child that has dropped to uid 65534; its JSON-able result, or its exception as text.

    Root reads any file whatever its mode (and CI runs as root), so a permission
    test must drop privileges. A fork, not a new interpreter: the child keeps the
    imported modules and needs no access to wherever the interpreter is installed.
    """

    def outcome() -> dict[str, Any]:
        try:
            return {"value": fn()}
        except Exception as err:
            return {"error": f"{type(err).__name__}: {err}"}

    if os.geteuid() != 0:
        return outcome()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write_end, json.dumps(outcome()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(out)


def add_dra_claims(path: Path, claims: list[dict]) -> None:
    """Add ClaimInfoState entries to a dra_manager_state with the checksum the kubelet would write."""
    doc = json.loads(path.read_text())
    data = json.loads(doc["Data"])
    data["ClaimInfoStateList"] = (data["ClaimInfoStateList"] or []) + claims
    text = json.dumps(data, separators=(",", ":"))
    path.write_text(json.dumps({"Data": text, "Checksum": zlib.crc32(text.encode())}))
