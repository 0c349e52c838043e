"""Which known name a person most likely meant: "did you mean" for every command that takes a name.

A resource is typed as its last part (``gpu``), in another case
(``NVIDIA.com/gpu``) or misspelt (``nvidia.com/gpux``); a pod by its name
without its namespace. One matcher for resources, drivers, devices, pods,
claims and RPC names keeps the hint the same across commands. Standard library
only: the CLI, the watch and the plugin's control socket all use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1].lower()


def likely(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely means, or None; never ``name`` itself.

    In order: the same name in another case; the one name whose last path part
    is the given name's (``gpu`` or ``x/gpu`` → ``nvidia.com/gpu``); the
    closest spelling (difflib, in lower case).
    """
    names = sorted({k for k in known if k and k != name})
    for k in names:
        if k.lower() == name.lower():
            return k
    by_last = [k for k in names if _last(k) == _last(name)]
    if len(by_last) == 1:
        return by_last[0]
    lowered = {k.lower(): k for k in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1)
    if close:
        return lowered[close[0]]
    close = difflib.get_close_matches(_last(name), [_last(k) for k in names], n=1)
    matches = [k for k in names if close and _last(k) == close[0]]
    return matches[0] if len(matches) == 1 else None


def not_found(kind: str, name: str, known: Iterable[str]) -> str:
    """``<kind> <name> not found``, with ``(did you mean X?)`` when a known name is likely."""
    guess = likely(name, known)
    return f"{kind} {name} not found" + (f" (did you mean {guess}?)" if guess else "")


def go_field(obj: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A struct field of a JSON object, matched like encoding/json: exactly, else ignoring case."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    for key, value in obj.items():
        if key.casefold() == folded:
            return value
    return default
