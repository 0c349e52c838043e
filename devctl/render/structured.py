"""JSON and YAML output: the contract's shapes, with the source errors under ``errors``.

The views are dataclasses whose plain form is the contract's JSON, exactly as
``devctl.model.serial`` makes it (``to_plain``, or ``fields_of`` under json's C
encoder); nothing here walks or reshapes them, so JSON, YAML and ``--from``
snapshots cannot drift apart.

Both keep every string as it is when parsed back, and neither writes a
character that drives a terminal: JSON escapes control characters itself and
DEL, C1 controls and bidi overrides are written as ``\\uXXXX`` here
(``devctl.base.escape.escape_quoted``); YAML double-quotes such strings and escapes them too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from devctl.base.escape import escape_quoted
from devctl.model import SourceError
from devctl.model.serial import fields_of, to_plain


def plain(value: Any) -> Any:
    """A view in plain form: ``serial.to_plain``, the one serialiser (the name kept for the faces)."""
    return to_plain(value)


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


def _is_rows(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and (isinstance(value[0], dict) or dataclasses.is_dataclass(value[0]))
    )


def _encoder() -> Callable[[Any], str]:
    """``JSONEncoder(ensure_ascii=False, default=serial.fields_of).encode``, its C encoder made once, not once per row.

    ``JSONEncoder.encode`` builds a new C encoder on every call: per row of
    50,000 that was a third of the time.
    """
    from json import encoder as std

    # Not in typeshed's json.encoder: None where the C accelerator is missing.
    c_make_encoder: Callable[..., Callable[[Any, int], list[str]]] | None = getattr(std, "c_make_encoder", None)
    if c_make_encoder is None:
        return json.JSONEncoder(ensure_ascii=False, default=fields_of).encode
    # The arguments JSONEncoder.iterencode passes for these settings (markers: check_circular).
    make = c_make_encoder({}, fields_of, std.encode_basestring, None, ": ", ", ", False, False, True)
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
    top = fields_of(body) if dataclasses.is_dataclass(body) else dict(body)
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
