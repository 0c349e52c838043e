"""Model objects to plain JSON values and back, driven by the dataclasses' type hints.

One generic pair of functions instead of a to/from method on every class: a
snapshot written on a node (``devctl snapshot``) must read back exactly
(``--from FILE``), and a new field then needs no extra code.

Reading back validates as it builds: a ``--from`` file may have been edited
or written by something else, and a string where a list of NUMA nodes goes
must be an error naming where it is (``plugins[2].devices[0].numa_nodes``),
not a traceback or a wrong table. Snapshots can hold millions of values, so
each type gets one builder function, made once, and the path of a bad value
is put together only while its error unwinds.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Sequence
from enum import Enum
from functools import cache
from typing import Any, TypeVar

from devctl.model import Device, DeviceList

T = TypeVar("T")
_Builder = Callable[[Any], Any]


class PlainError(ValueError):
    """A plain value that is not what the type hints say: ``path`` is where (JSON-style), ``reason`` what.

    ``str()`` is one line: ``plugins[2].devices[0].numa_nodes: expected a list of integers, got "x"``.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self._steps: list[str] = []  # innermost first, added while the error unwinds

    @property
    def path(self) -> str:
        return "".join(reversed(self._steps)).lstrip(".")

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self._steps else self.reason


def to_plain(value: Any) -> Any:
    """A model object (or tuple, dict, enum of them) as JSON-ready dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, DeviceList):
        return [
            {"id": i, "health": h, "numa_nodes": list(n)}
            for i, h, n in zip(value.ids, value.healths, value.numa, strict=True)
        ]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


def from_plain(cls: type[T], data: Any) -> T:
    """Rebuild a model object of type ``cls`` from what ``to_plain`` made of it; raises PlainError.

    Fields this version does not know are ignored (a snapshot from a newer
    devctl); a missing field takes its default, and is an error without one.
    """
    build: _Builder = _builder(cls)  # type: ignore[arg-type]  # a class is hashable; mypy's Hashable check misses it
    built: T = build(data)  # the builder made for ``cls`` returns a ``cls``
    return built


def _got(data: Any) -> str:
    if isinstance(data, dict):
        return "an object"
    if isinstance(data, list):
        return "a list"
    text = json.dumps(data)  # null, true, 1.5, "x": as the file spells it, control characters escaped
    return text if len(text) <= 40 else text[:37] + "..."


def _expected(what: str, data: Any) -> PlainError:
    return PlainError(f"expected {what}, got {_got(data)}")


_SCALARS: dict[Any, tuple[str, str]] = {
    str: ("a string", "strings"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("a boolean", "booleans"),
}


def _describe(tp: Any, plural: bool = False) -> str:
    if tp in _SCALARS:
        return _SCALARS[tp][plural]
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        return ("lists of " if plural else "a list of ") + _describe(typing.get_args(tp)[0], plural=True)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _describe(inner[0], plural) if len(inner) == 1 else "values"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return ("one of " if not plural else "values among ") + ", ".join(json.dumps(m.value) for m in tp)
    return "objects" if plural else "an object"


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _builder(tp: Any) -> _Builder:
    """The function that checks and builds a value of type ``tp``; made once per type."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"from_plain reads X | None, not {tp}")
        return _optional(_builder(inner[0]))
    if origin is Sequence and args == (Device,):
        return _devices(_sequence(Device, tuple))
    if origin in (tuple, list):
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            raise TypeError(f"from_plain reads tuple[X, ...], not {tp}")
        return _sequence(args[0], tuple if origin is tuple else list)
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"from_plain reads dicts with string keys, not {tp}")
        return _mapping(args[1])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum(tp)
    if tp in _SCALARS:
        return _scalar(tp)
    if tp is Any:
        return lambda data: data
    raise TypeError(f"from_plain cannot read {tp}")


def _optional(build: _Builder) -> _Builder:
    def optional(data: Any) -> Any:
        return None if data is None else build(data)

    return optional


def _scalar(tp: type) -> _Builder:
    what = _SCALARS[tp][0]
    if tp is float:

        def number(data: Any) -> float:
            cls = data.__class__
            if cls is float:
                return float(data)
            if cls is int:
                return float(data)
            raise _expected(what, data)

        return number

    def scalar(data: Any) -> Any:
        if data.__class__ is tp:  # exact class: True is no integer here, as in the model
            return data
        raise _expected(what, data)

    return scalar


def _sequence(item_type: Any, make: type) -> _Builder:
    what = _describe(list[item_type])
    build = _builder(item_type)
    exact = item_type if item_type in (str, int, bool) else None

    def sequence(data: Any) -> Any:
        if data.__class__ is not list:
            raise _expected(what, data)
        if exact is not None:  # lists of IDs and NUMA nodes, the bulk of a big snapshot: one check each
            for item in data:
                if item.__class__ is not exact:
                    break
            else:
                return make(data)
        try:
            return make([build(item) for item in data])
        except PlainError as err:
            err._steps.append(f"[{_failing(build, data)}]")
            raise

    return sequence


def _devices(build: _Builder) -> _Builder:
    """A plugin's device list (``PluginProbe.devices``) is read back as the DeviceList it was written from."""

    def devices(data: Any) -> DeviceList:
        return DeviceList.of(build(data))

    return devices


def _failing(build: _Builder, data: list[Any]) -> int:
    """The index of the first item ``build`` refuses: found again only once a list has failed."""
    for i, item in enumerate(data):
        try:
            build(item)
        except PlainError:
            return i
    raise AssertionError("the list failed once")


def _mapping(value_type: Any) -> _Builder:
    build = _builder(value_type)

    def mapping(data: Any) -> dict[str, Any]:
        if data.__class__ is not dict:
            raise _expected("an object", data)
        out = {}
        for key, value in data.items():
            try:
                out[key] = build(value)
            except PlainError as err:
                err._steps.append(f"[{json.dumps(key)}]")
                raise
        return out

    return mapping


def _dataclass(cls: type) -> _Builder:
    hints = _hints(cls)
    fields = [
        (
            f.name,
            _builder(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
        if f.init
    ]

    def dataclass(data: Any) -> Any:
        if data.__class__ is not dict:
            raise _expected("an object", data)
        values = {}
        for name, build, required in fields:
            if name in data:
                try:
                    values[name] = build(data[name])
                except PlainError as err:
                    err._steps.append(f".{name}")
                    raise
            elif required:
                missing = PlainError("missing")
                missing._steps.append(f".{name}")
                raise missing
        return cls(**values)

    return dataclass


def _enum(cls: type[Enum]) -> _Builder:
    members = {m.value: m for m in cls}
    what = _describe(cls)

    def enum(data: Any) -> Enum:
        try:
            return members[data]
        except (KeyError, TypeError):  # TypeError: a list or object is no key
            raise _expected(what, data) from None

    return enum
