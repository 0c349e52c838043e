"""Block YAML as tools write it, loaded fast; anything else goes to libyaml.

A node with 1,000 DRA claims has 1,000 transient CDI spec files (one per
claim, written by its driver with go-yaml or PyYAML), and every ``devctl``
read that shows DRA NUMA or CDI reads them all. PyYAML builds its objects in
Python even with libyaml's parser, about 1 ms a small file on a quiet machine:
most of a command's time (bench/bench_dra.py). What those tools emit is a
small subset — block mappings and sequences, one plain scalar per line — that
a line scanner loads in a few tens of microseconds. Any line outside that
subset (quotes, flow ``[]``/``{}``, anchors, tags, block scalars, comments,
tabs, several documents) gives the whole text to ``yaml.load`` with the safe
loader, so the result is always what the safe loader returns.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# The safe loader's implicit resolvers (bool, int, float, null, timestamp, merge, value), by first character:
# a plain scalar none of them matches is a string as written.
_IMPLICIT = yaml.resolver.Resolver.yaml_implicit_resolvers
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)\Z")  # YAML 1.1 reads 010 as octal: not here
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_SPECIAL = set("'\"[]{}&*!|>%@`#\t")
# Text of printable ASCII lines and none of _SPECIAL: each line's own checks below are then known to pass.
_PLAIN_TEXT = re.compile(r"[ $()+,\-./0-9:;<=?A-Z\\^_a-z~\n]*\Z")
_keys: dict[str, bool] = {}  # mapping keys seen: whether each is a plain string key (specs repeat a dozen)
_scalars: dict[str, Any] = {}  # plain scalars a resolver matches, as the safe loader reads them


class _Unsupported(Exception):
    """A line outside the subset: the text goes to the safe loader."""


def load(text: str) -> Any:
    """``text`` loaded as YAML's safe loader would; raises yaml.YAMLError as it does."""
    try:
        return _Lines(text).document()
    except _Unsupported:
        return yaml.load(text, Loader=_SAFE_LOADER)  # the safe loader, libyaml's when present


def _scalar(value: str) -> Any:
    if value and (value[0] == "," or (value[0] in "-?:" and (len(value) == 1 or value[1] == " "))):
        raise _Unsupported  # an indicator, not the start of a plain scalar
    resolvers = _IMPLICIT.get(value[0] if value else "", ())
    if not any(regexp.match(value) for _, regexp in resolvers):
        return value
    if _DECIMAL.match(value):
        return int(value)
    try:
        return _scalars[value]
    except KeyError:
        pass
    loaded = yaml.load(value, Loader=_SAFE_LOADER)
    if isinstance(loaded, (dict, list)):
        raise _Unsupported
    _scalars[value] = loaded
    return loaded


class _Lines:
    """The text as (indent, content) lines, read by a recursive descent over indentation."""

    def __init__(self, text: str):
        lines = []
        plain = _PLAIN_TEXT.match(text) is not None  # one scan of the whole text instead of two per line
        for raw in text.split("\n"):
            line = raw.rstrip(" \r")
            if not line:
                continue
            content = line.lstrip(" ")
            if (
                not plain
                and (
                    not content.isprintable()  # control characters, YAML's other line breaks, a BOM
                    or _SPECIAL.intersection(content)
                )
            ) or (content[0] in "-.?" and (content.startswith(("---", "...", "? ")) or content == "?")):
                raise _Unsupported
            lines.append((len(line) - len(content), content))
        self.lines = lines
        self.i = 0

    def document(self) -> Any:
        if not self.lines:
            return None
        indent, content = self.lines[0]
        if indent:
            raise _Unsupported
        value = self._sequence(0) if content == "-" or content.startswith("- ") else self._mapping(0)
        if self.i != len(self.lines):
            raise _Unsupported
        return value

    def _node(self, parent: int, in_mapping: bool) -> Any:
        """The block under a key (or a ``-``) at indent ``parent``: a mapping or sequence, or null when none."""
        if self.i >= len(self.lines):
            return None
        indent, content = self.lines[self.i]
        is_item = content == "-" or content.startswith("- ")
        # A mapping's value may be a sequence at the key's own indent (PyYAML's indentless sequences).
        if is_item and (indent > parent or (in_mapping and indent == parent)):
            return self._sequence(indent)
        if indent > parent and not is_item:
            return self._mapping(indent)
        return None

    def _mapping(self, indent: int, first: tuple[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if first is not None:
            self._entry(out, indent, *first)
        while self.i < len(self.lines):
            at, content = self.lines[self.i]
            if at < indent:
                break
            if at > indent or content == "-" or content.startswith("- "):
                if at == indent:
                    break  # an indentless sequence ends this mapping's last value; the caller's turn
                raise _Unsupported
            self.i += 1
            key, sep, rest = content.partition(":")
            if not sep or (rest and rest[0] != " "):
                raise _Unsupported
            self._entry(out, indent, key, rest.strip(" "))
        return out

    def _entry(self, out: dict[str, Any], indent: int, key: str, rest: str) -> None:
        ok = _keys.get(key)
        if ok is None:
            ok = _KEY.match(key) is not None and isinstance(_scalar(key), str)
            if len(_keys) < 4096:
                _keys[key] = ok
        if not ok or key in out or ": " in rest or rest.endswith(":"):
            raise _Unsupported
        out[key] = _scalar(rest) if rest else self._node(indent, in_mapping=True)

    def _sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while self.i < len(self.lines):
            at, content = self.lines[self.i]
            if at != indent or not (content == "-" or content.startswith("- ")):
                if at > indent:
                    raise _Unsupported
                break
            self.i += 1
            item = content[2:].strip(" ")
            if not item:
                out.append(self._node(indent, in_mapping=False))
            elif item == "-" or item.startswith("- "):
                raise _Unsupported  # a sequence in a sequence on one line
            else:
                key, sep, rest = item.partition(":")
                if sep and (not rest or rest[0] == " "):
                    # A mapping that starts on the item's line; its other keys are indented to its first key.
                    out.append(self._mapping(indent + 2, first=(key, rest.strip(" "))))
                else:
                    if ": " in item or item.endswith(":"):
                        raise _Unsupported
                    out.append(_scalar(item))
        return out
