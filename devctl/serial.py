"""Model objects to plain JSON values and back, driven by the dataclasses' type hints.

One generic pair of functions instead of a to/from method on every class: a
snapshot written on a node (``devctl snapshot``) must read back exactly
(``--from FILE``), and a new field then needs no extra code.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def to_plain(value: Any) -> Any:
    """A model object (or tuple, dict, enum of them) as JSON-ready dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


def from_plain(cls: type[T], data: Any) -> T:
    """Rebuild a model object of type ``cls`` from what ``to_plain`` made of it."""
    return _build(cls, data)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], data) if len(inner) == 1 else data
    if origin is tuple:
        return tuple(_build(args[0], v) for v in data)
    if origin is list:
        return [_build(args[0], v) for v in data]
    if origin is dict:
        return {_build(args[0], k): _build(args[1], v) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _build(hints[k], v) for k, v in data.items() if k in known})
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(data)
    if tp is float and isinstance(data, int):
        return float(data)
    return data
