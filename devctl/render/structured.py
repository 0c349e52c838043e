"""JSON and YAML output: the contract's shapes, with the source errors under ``errors``.

The views are dataclasses whose plain form is the contract's JSON, exactly as
``devctl.serial.to_plain`` makes it; nothing here reshapes them, so JSON, YAML
and ``--from`` snapshots cannot drift apart.

Both keep every string as it is when parsed back, and neither writes a
character that drives a terminal: JSON escapes control characters itself and
DEL, C1 controls and bidi overrides are written as ``\\uXXXX`` here
(``devctl.escape.escape_quoted``); YAML double-quotes such strings and escapes them too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import Enum
from operator import attrgetter
from typing import Any

from devctl.escape import escape_quoted
from devctl.model import SourceError

_SCALARS = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}  # _fields's reader of each class's fields
_DICT_FIELDS: set[type] = set()  # dataclasses whose instances' __dict__ is their fields in order (_fields)


def plain(value: Any) -> Any:
    """``serial.to_plain`` with the field names of each class looked up once.

    The same result, about three times faster: a node with a thousand containers
    turns into JSON without the reflection on every object showing in `devctl pods`.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple or kind is list:
        return [plain(v) for v in value]
    if kind is dict:
        return {str(k): plain(v) for k, v in value.items()}
    names = _FIELDS.get(kind)
    if names is None:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):  # a DeviceList
            return [plain(v) for v in value]
        if not dataclasses.is_dataclass(kind):
            return value
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return {name: plain(getattr(value, name)) for name in names}


def document(body: Any, errors: Iterable[SourceError] | None = None) -> dict[str, Any]:
    """A view (a dataclass, or a dict of them) in plain form, with ``errors`` appended when given."""
    doc = dict(plain(body))
    if errors is not None:
        doc["errors"] = plain(tuple(errors))
    return doc


def to_json(doc: dict[str, Any]) -> str:
    """A plain document as JSON: one top-level key per line, and one row per line in its lists of rows.

    A list of plain values (``topo``'s ``shared_pool``, a CPU list) stays on its key's line.

    Rows on their own lines read and grep well and keep json's C encoder in use
    (``indent`` falls back to the pure-Python one, several times slower on a
    large node); ``jq .`` prints it fully indented.
    """
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    parts = []
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = ",\n    ".join(dumps(v) for v in value)
            parts.append(f"  {dumps(key)}: [\n    {rows}\n  ]")
        else:
            parts.append(f"  {dumps(key)}: {dumps(value)}")
    return escape_quoted("{\n" + ",\n".join(parts) + "\n}\n")


def _fields(value: Any) -> Any:
    """What json's C encoder cannot encode itself, one level deep: a dataclass as a dict of its fields.

    The encoder then walks the fields' tuples, strings and numbers in C, and
    calls back only for the next dataclass: the same JSON as ``plain`` makes,
    without building the plain copy first. An object whose ``__dict__`` holds
    its fields alone is given as that dict, not copied (150,000 objects for
    50,000 pods): a dataclass's ``__init__`` sets them in field order, and
    ``_DICT_FIELDS`` holds the classes checked to have no other attribute.
    """
    kind = type(value)
    getter = _GETTERS.get(kind)
    if getter is None:  # a class seen for the first time here (``plain`` may have seen it: it keeps no getter)
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):  # a DeviceList
            return list(value)
        if not dataclasses.is_dataclass(kind):
            raise TypeError(f"{kind.__name__} is not JSON")
        names = _FIELDS.setdefault(kind, tuple(f.name for f in dataclasses.fields(kind)))
        getter = _GETTERS[kind] = _reader(names)
        own = getattr(value, "__dict__", None)
        if own is not None and tuple(own) == names:
            _DICT_FIELDS.add(kind)
    names = _FIELDS[kind]
    if kind in _DICT_FIELDS:
        own = value.__dict__
        if len(own) == len(names):  # nothing set beside the fields (object.__setattr__ could)
            return own
    return dict(zip(names, getter(value), strict=True))


def _reader(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` of an object as a tuple (attrgetter gives a bare value for one name)."""
    if len(names) > 1:
        return attrgetter(*names)
    return lambda value: tuple(getattr(value, name) for name in names)


def _is_rows(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and (isinstance(value[0], dict) or dataclasses.is_dataclass(value[0]))
    )


def _encoder() -> Callable[[Any], str]:
    """``JSONEncoder(ensure_ascii=False, default=_fields).encode``, its C encoder made once, not once per row.

    ``JSONEncoder.encode`` builds a new C encoder on every call: per row of
    50,000 that was a third of the time.
    """
    from json import encoder as std

    if std.c_make_encoder is None:
        return json.JSONEncoder(ensure_ascii=False, default=_fields).encode
    # The arguments JSONEncoder.iterencode passes for these settings (markers: check_circular).
    make = std.c_make_encoder({}, _fields, std.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(make(value, 0))


# Rows encoded, escaped and written together: a few hundred KiB at a time.
_ROWS_PER_PIECE = 2048


def json_pieces(body: Any, errors: Iterable[SourceError] | None = None) -> Iterator[str]:
    """``to_json(document(body, errors))`` in pieces, written by json's C encoder straight from the view's dataclasses.

    50,000 pods are a million plain values: building them first took seconds.
    Given in pieces of a few thousand rows, so that the text of 50,000 pods
    (11 MB) is never held whole, nor copied whole to join, escape and encode
    it: a JSON document's peak memory is its rows' objects and one piece.
    """
    encode = _encoder()
    top = _fields(body) if dataclasses.is_dataclass(body) else dict(body)
    if errors is not None:
        top = {**top, "errors": tuple(errors)}
    opening = "{\n"
    for i, (key, value) in enumerate(top.items()):
        name = encode(str(key))
        before = opening if i == 0 else ",\n"
        if not _is_rows(value):
            yield escape_quoted(f"{before}  {name}: {encode(value)}")
            continue
        for start in range(0, len(value), _ROWS_PER_PIECE):
            rows = ",\n    ".join(map(encode, value[start : start + _ROWS_PER_PIECE]))
            yield escape_quoted(f"{before}  {name}: [\n    {rows}" if start == 0 else f",\n    {rows}")
        yield "\n  ]"
    yield "\n}\n" if top else "{\n\n}\n"


def json_document(body: Any, errors: Iterable[SourceError] | None = None) -> str:
    """``json_pieces`` as one string."""
    return "".join(json_pieces(body, errors))


def to_yaml(doc: dict[str, Any]) -> str:
    """A plain document as block YAML, keys in the JSON's order.

    PyYAML escapes C0 controls and DEL, but with ``allow_unicode`` writes C1
    controls, bidi overrides and U+2028/2029 raw, even unquoted, and a newline
    as a line break of a quoted string. A string holding any character that is
    not printable is double-quoted instead: a newline is ``\\n`` on the
    string's one line, and every other such character in the text is inside
    double quotes, where ``escape_quoted`` writes it as ``\\uXXXX``.
    """
    import yaml  # only `-o yaml` pays for PyYAML's import

    class Dumper(yaml.SafeDumper):
        def represent_str(self, data: str) -> yaml.ScalarNode:
            if not data.isprintable():
                return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')
            return super().represent_str(data)

    Dumper.add_representer(str, Dumper.represent_str)
    text = yaml.dump(doc, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return escape_quoted(text)
