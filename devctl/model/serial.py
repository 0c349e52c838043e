"""Model objects to plain JSON values and back, driven by the dataclasses' type hints: devctl's one serialiser.

One generic pair of functions instead of a to/from method on every class: a
snapshot written on a node (``devctl snapshot``) must read back exactly
(``--from FILE``), and a new field then needs no extra code. JSON and YAML
documents (``render/structured``), snapshot files (``collect``) and watch event
lines (``render/events``, read back by the TUI from its ``devctl watch``
child) all go through here; where a form differs from the field names, the
field says so as data (``json_field``: a key of its own, left out when
``None``), never a second walker.

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
from datetime import datetime, timezone
from enum import Enum
from functools import cache
from operator import attrgetter
from typing import Any, TypeVar

from devctl.base.errors import DevctlError
from devctl.model.plugins import Device, DeviceList

T = TypeVar("T")
_Builder = Callable[[Any], Any]

# The metadata keys of ``json_field``: the field's JSON key, and whether ``None`` leaves the key out.
_KEY = "devctl.model.serial.key"
_OMIT_NONE = "devctl.model.serial.omit_none"


def json_field(key: str | None = None, *, omit_none: bool = False) -> Any:
    """A field defaulting to ``None`` whose JSON form is not its name's: written under ``key``
    (``from`` for ``from_``, a Python keyword), left out when ``None`` with ``omit_none`` (a key
    that does not apply, as cli.md's ``device`` in a ``snapshot`` event). Read back the same way."""
    metadata: dict[str, Any] = {}
    if key is not None:
        metadata[_KEY] = key
    if omit_none:
        metadata[_OMIT_NONE] = True
    return dataclasses.field(default=None, metadata=metadata)


def iso_time(t: datetime) -> str:
    """A time as every devctl JSON writes it: UTC with milliseconds, ``2026-01-02T03:04:05.678Z`` (cli.md)."""
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class PlainError(DevctlError, ValueError):
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


class _Shape:
    """How the instances of one dataclass are written: made once per class, on its first instance."""

    __slots__ = ("fields", "names", "own_dict", "read", "simple")

    def __init__(self, cls: type):
        fields = dataclasses.fields(cls)
        self.names = tuple(f.name for f in fields)
        # (attribute, JSON key, left out when None)
        self.fields = tuple((f.name, f.metadata.get(_KEY, f.name), bool(f.metadata.get(_OMIT_NONE))) for f in fields)
        # Written as its fields' names, every one: the common case, and the fast one.
        self.simple = all(key == name and not omit for name, key, omit in self.fields)
        # The values of the fields as a tuple (attrgetter gives a bare value for one name).
        self.read: Callable[[Any], tuple[Any, ...]] = (
            attrgetter(*self.names) if len(self.names) > 1 else (lambda v: tuple(getattr(v, n) for n in self.names))
        )
        # Whether an instance's ``__dict__`` is its fields in order (checked on the first one ``fields_of`` sees).
        self.own_dict: bool | None = None


_SHAPES: dict[type, _Shape] = {}
_PLAIN_SCALARS = frozenset((str, int, float, bool, type(None)))


def _shape(kind: type) -> _Shape | None:
    """The shape of a dataclass ``kind``; None for any other type."""
    shape = _SHAPES.get(kind)
    if shape is None and dataclasses.is_dataclass(kind):
        shape = _SHAPES[kind] = _Shape(kind)
    return shape


def to_plain(value: Any) -> Any:
    """A model object (or tuple, dict, enum, time of them) as JSON-ready dicts, lists and scalars.

    The field names of each class are looked up once: a node with a thousand
    containers turns into JSON without reflection on every object.
    """
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return value
    if kind is tuple or kind is list:
        return [to_plain(v) for v in value]
    if kind is dict:
        return {str(k): to_plain(v) for k, v in value.items()}
    shape = _SHAPES.get(kind)
    if shape is None:
        if isinstance(value, Enum):
            return value.value
        if kind is DeviceList:
            return [
                {"id": i, "health": h, "numa_nodes": list(n)}
                for i, h, n in zip(value.ids, value.healths, value.numa, strict=True)
            ]
        if isinstance(value, datetime):
            return iso_time(value)
        if isinstance(value, (list, tuple)):
            return [to_plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): to_plain(v) for k, v in value.items()}
        shape = _shape(kind)
        if shape is None:
            return value
    if shape.simple:
        return {name: to_plain(getattr(value, name)) for name in shape.names}
    out = {}
    for name, key, omit in shape.fields:
        item = getattr(value, name)
        if item is None and omit:
            continue
        out[key] = to_plain(item)
    return out


def fields_of(value: Any) -> Any:
    """``to_plain`` one level deep, for a JSON encoder's ``default``: a dataclass as a dict of its fields.

    json's C encoder then walks the fields' tuples, strings and numbers itself
    and calls back only for the next dataclass (or enum, time): the same JSON as
    ``to_plain`` makes, without building the plain copy first. An object whose
    ``__dict__`` holds its fields alone is given as that dict, not copied
    (150,000 objects for 50,000 pods): a dataclass's ``__init__`` sets them in
    field order, and the first instance is checked to have no other attribute.
    """
    kind = type(value)
    shape = _SHAPES.get(kind)
    if shape is None:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, datetime):
            return iso_time(value)
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):  # a DeviceList
            return list(value)
        shape = _shape(kind)
        if shape is None:
            raise TypeError(f"{kind.__name__} is not JSON")
    if not shape.simple:
        out = {}
        for name, key, omit in shape.fields:
            item = getattr(value, name)
            if item is None and omit:
                continue
            out[key] = item
        return out
    if shape.own_dict is None:
        own = getattr(value, "__dict__", None)
        shape.own_dict = own is not None and tuple(own) == shape.names
    if shape.own_dict:
        own = value.__dict__
        if len(own) == len(shape.names):  # nothing set beside the fields (object.__setattr__ could)
            return own
    return dict(zip(shape.names, shape.read(value), strict=True))


def json_line(value: Any) -> str:
    """A model object as one line of JSON (no newline), every non-ASCII character escaped: a watch event line."""
    return json.dumps(to_plain(value))


def from_json_line(cls: type[T], line: str | bytes) -> T:
    """``json_line``'s text read back as a ``cls``; raises PlainError (a ValueError, as bad JSON or UTF-8 is)."""
    if isinstance(line, bytes):  # a pipe's line: decoded here, json.loads would first guess its encoding
        line = line.decode()
    return from_plain(cls, json.loads(line))


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
        if inner[0] in (str, int, bool):  # most optional fields: one check, no call
            return _optional_scalar(inner[0])
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
    if tp is datetime:
        return _time
    if tp is Any:
        return lambda data: data
    raise TypeError(f"from_plain cannot read {tp}")


def _optional(build: _Builder) -> _Builder:
    def optional(data: Any) -> Any:
        return None if data is None else build(data)

    return optional


def _optional_scalar(tp: type) -> _Builder:
    what = _SCALARS[tp][0]

    def optional_scalar(data: Any) -> Any:
        if data is None or data.__class__ is tp:
            return data
        raise _expected(what, data)

    return optional_scalar


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


def _time(data: Any) -> datetime:
    """A time as ``iso_time`` writes it (any ISO 8601 time with its offset); one without an offset is refused."""
    if data.__class__ is str:
        try:
            when = datetime.fromisoformat(data[:-1] + "+00:00" if data.endswith("Z") else data)
        except ValueError:
            pass
        else:
            if when.tzinfo is not None:
                return when
    raise _expected('a time such as "2026-01-02T03:04:05.678Z"', data)


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
            f.metadata.get(_KEY, f.name),  # json_field's key, read back under it
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
        for name, key, build, required in fields:
            if key in data:
                try:
                    values[name] = build(data[key])
                except PlainError as err:
                    err._steps.append(f".{key}")
                    raise
            elif required:
                missing = PlainError("missing")
                missing._steps.append(f".{key}")
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
