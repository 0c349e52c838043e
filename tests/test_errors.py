"""One root for devctl's failures: every exception class devctl defines derives from ``DevctlError`` and carries
a kind, and no two share a name (a reader catching ``SpecError`` must know which one it catches)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import devctl
from devctl.base.errors import DevctlError, ErrorKind


def _devctl_exceptions() -> list[type[BaseException]]:
    found: dict[type[BaseException], None] = {}
    for info in pkgutil.walk_packages(devctl.__path__, "devctl."):
        if info.name.startswith(("devctl.api", "devctl.__main__")):
            continue  # generated code, and the entry point that runs the CLI
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("devctl."):
                found[obj] = None
    return list(found)


def test_every_devctl_exception_has_the_one_root_and_a_kind() -> None:
    exceptions = _devctl_exceptions()
    assert len(exceptions) > 30
    strays = [f"{e.__module__}.{e.__qualname__}" for e in exceptions if not issubclass(e, DevctlError)]
    assert strays == []
    assert all(isinstance(e.kind, ErrorKind) for e in exceptions if issubclass(e, DevctlError))


def test_no_two_exceptions_share_a_name() -> None:
    names: dict[str, str] = {}
    clashes = []
    for e in _devctl_exceptions():
        where = f"{e.__module__}.{e.__qualname__}"
        if e.__name__ in names and names[e.__name__] != where:
            clashes.append((names[e.__name__], where))
        names.setdefault(e.__name__, where)
    assert clashes == []
