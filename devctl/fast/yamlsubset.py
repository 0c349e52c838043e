"""Block YAML as tools write it, loaded fast; anything else goes to libyaml.

A node with 1,000 DRA claims has 1,000 transient CDI spec files (one per
claim, written by its driver with go-yaml or PyYAML), and every ``devctl``
read that shows DRA NUMA or CDI reads them all. PyYAML builds its objects in
Python even with libyaml's parser, about 1 ms a small file on a quiet machine:
most of a command's time (bench/bench_dra.py). What those tools emit is a
small subset — block mappings and sequences, one plain scalar per line — that
one pass over the lines loads in a few tens of microseconds. Any line outside
that subset (quotes, flow ``[]``/``{}``, anchors, tags, block scalars,
comments, tabs, several documents, an indent the pass does not expect) gives
the whole text to ``yaml.load`` with the safe loader, so the result is always
what the safe loader returns.

PyYAML itself is imported only then (its import costs more than scanning a
hundred specs): the plain scalars are typed by a copy of the safe loader's
implicit resolvers, which tests/test_yamlsubset.py checks against PyYAML's.
"""

from __future__ import annotations

import re

from devctl.base.errors import DevctlError

TYPE_CHECKING = False  # typing's own, without importing typing: the CDI helper process loads this module alone
if TYPE_CHECKING:
    from typing import Any

# The safe loader's implicit resolvers (YAML 1.1: yaml/resolver.py), verbose patterns, and the first characters
# each applies to. A plain scalar none of them matches is a string as written; one that does is typed by PyYAML.
_BOOL = r"""^(?:yes|Yes|YES|no|No|NO
                    |true|True|TRUE|false|False|FALSE
                    |on|On|ON|off|Off|OFF)$"""
_FLOAT = r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$"""
_INT = r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"""
_MERGE = r"^(?:<<)$"
_NULL = r"""^(?: ~
                    |null|Null|NULL
                    | )$"""
_TIMESTAMP = r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
                    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
                     (?:[Tt]|[ \t]+)[0-9][0-9]?
                     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
                     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"""
_VALUE = r"^(?:=)$"
_YAML = r"^(?:!|&|\*)$"
RESOLVERS = (  # (tag, pattern, first characters), in PyYAML's order of registration
    ("tag:yaml.org,2002:bool", _BOOL, "yYnNtTfFoO"),
    ("tag:yaml.org,2002:float", _FLOAT, "-+0123456789."),
    ("tag:yaml.org,2002:int", _INT, "-+0123456789"),
    ("tag:yaml.org,2002:merge", _MERGE, "<"),
    ("tag:yaml.org,2002:null", _NULL, "~nN\0"),  # "\0": the empty scalar
    ("tag:yaml.org,2002:timestamp", _TIMESTAMP, "0123456789"),
    ("tag:yaml.org,2002:value", _VALUE, "="),
    ("tag:yaml.org,2002:yaml", _YAML, "!&*"),
)
_FIRST = {c: tuple(p for _, p, chars in RESOLVERS if c in chars) for _, _, chars in RESOLVERS for c in chars}
_typed: dict[str, re.Pattern[str]] = {}  # first character -> its resolvers as one pattern, compiled when first met
# First characters of a scalar that _scalar must look at (a resolver's, or an indicator's); any other is a string.
_LOOK = frozenset(_FIRST) | frozenset(",?:")

_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)\Z")  # YAML 1.1 reads 010 as octal: not here
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_SPECIAL = set("'\"[]{}&*!|>%@`#\t")
# Text of printable ASCII lines and none of _SPECIAL: each line's own checks below are then known to pass.
_PLAIN_TEXT = re.compile(r"[ $()+,\-./0-9:;<=?A-Z\\^_a-z~\n]*\Z")
_keys: dict[str, bool] = {}  # mapping keys seen: whether each is a plain string key (specs repeat a dozen)
_OPEN = object()  # a key's (or a ``-``'s) missing value: null, or the block on the lines below
# Lines read so far, as _line reads them (a value is immutable: str, int, float, bool, None, a date).
_lines: dict[str, tuple[int, bool, str | None, Any]] = {}


class _Unsupported(DevctlError):
    """A line outside the subset: the text goes to the safe loader."""


def load(text: str, *, unique: bool = False) -> Any:
    """``text`` loaded as YAML's safe loader would; raises yaml.YAMLError as it does.

    ``unique``: a key twice in one mapping is an error (a ConstructorError, "found duplicate key"), as
    go-yaml's strict mode makes it, instead of the last one winning. The subset's pass never takes such a text.
    """
    try:
        return _scan(text)
    except _Unsupported:
        return _unique_load(text) if unique else _safe_load(text)


def scan(text: str) -> Any:
    """The subset's one pass alone, without the safe loader behind it: raises for any text outside the subset.

    For devctl.node.cdi_scan's helper, which leaves such a text to its caller.
    """
    return _scan(text)


def _safe_load(text: str) -> Any:
    """The safe loader itself, libyaml's when present."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


_unique_loader: Any = None  # the safe loader refusing a key twice, made when first needed


def _unique_load(text: str) -> Any:
    """The safe loader (libyaml's when present), but a mapping's key twice raises, as in go-yaml's strict mode."""
    global _unique_loader
    import yaml

    if _unique_loader is None:

        class Unique(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                if isinstance(node, yaml.MappingNode):
                    seen = set()
                    for key_node, _ in node.value:
                        if key_node.tag == "tag:yaml.org,2002:merge":
                            continue
                        key = self.construct_object(key_node, deep=True)
                        try:
                            twice = key in seen
                            seen.add(key)
                        except TypeError:  # an unhashable key: the safe loader's own error follows
                            continue
                        if twice:
                            raise yaml.constructor.ConstructorError(
                                "while constructing a mapping",
                                node.start_mark,
                                "found duplicate key",
                                key_node.start_mark,
                            )
                return super().construct_mapping(node, deep=deep)

        _unique_loader = Unique
    return yaml.load(text, Loader=_unique_loader)


def _scalar(value: str) -> Any:
    """A plain scalar as the safe loader types it (``value`` not empty): a string unless a resolver matches."""
    first = value[0]
    if first == "," or (first in "-?:" and (len(value) == 1 or value[1] == " ")):
        raise _Unsupported  # an indicator, not the start of a plain scalar
    if first not in _FIRST:
        return value
    if _DECIMAL.match(value):
        return int(value)
    typed = _typed.get(first)
    if typed is None:
        typed = _typed[first] = re.compile("|".join(f"(?:{p})" for p in _FIRST[first]), re.X)
    if not typed.match(value):
        return value
    loaded = _safe_load(value)
    if isinstance(loaded, (dict, list)):
        raise _Unsupported
    return loaded


def _key(key: str) -> str:
    """A mapping key the subset reads as itself: a plain name no resolver types (not ``yes``, ``null``, ``1``)."""
    ok = _keys.get(key)
    if ok is None:
        ok = _KEY.match(key) is not None and isinstance(_scalar(key), str)
        if len(_keys) < 4096:
            _keys[key] = ok
    if not ok:
        raise _Unsupported
    return key


def _value(rest: str) -> Any:
    """The plain scalar after a key's ``:`` or a ``-``, typed; _OPEN when there is none (a block may follow)."""
    value = rest.strip(" ")
    if not value:
        return _OPEN
    if ": " in value or value.endswith(":"):
        raise _Unsupported  # a second key on the line, or a key with nothing after it: not a plain scalar
    return value if value[0] not in _LOOK else _scalar(value)


def _line(raw: str, plain: bool) -> tuple[int, bool, str | None, Any] | None:
    """A line as (column, is a ``-`` item, key or None, value or _OPEN); None when blank.

    ``- key: value`` is an item whose key opens a mapping; ``- value`` an
    item without a key. ``plain``: the text is known to hold no character
    outside the subset.
    """
    line = raw.rstrip(" \r")
    if not line:
        return None
    content = line.lstrip(" ")
    first = content[0]
    if (
        not plain
        and (
            not content.isprintable()  # control characters, YAML's other line breaks, a BOM
            or _SPECIAL.intersection(content)
        )
    ) or (first in "-.?" and (content.startswith(("---", "...", "? ")) or content == "?")):
        raise _Unsupported
    col = len(line) - len(content)
    if content == "-":
        return col, True, None, _OPEN
    if content.startswith("- "):
        rest = content[2:]
        if rest[0] == " " or (rest[0] == "-" and (rest == "-" or rest[1] == " ")):
            raise _Unsupported  # a wider indent after the dash, or a sequence in a sequence on one line
        key, sep, after = rest.partition(":")
        if not sep or (after and after[0] != " "):
            return col, True, None, _value(rest)
        return col, True, _key(key), _value(after)
    key, sep, after = content.partition(":")
    if not sep or (after and after[0] != " "):
        raise _Unsupported  # a scalar where a key belongs (a plain scalar over several lines, a bare word)
    return col, False, _key(key), _value(after)


def _scan(text: str) -> Any:
    """One pass over the lines with a stack of the open collections, each with its column.

    A key (or ``-``) with nothing after it leaves a slot open: the next line
    fills it with a mapping (or sequence) when it is indented deeper, or with
    a sequence at the key's own column (PyYAML's indentless sequences), else
    the slot keeps null. ``- key: value`` opens a mapping two columns in.
    Lines repeat from spec to spec (``    deviceNodes:``, ``cdiVersion: 0.6.0``):
    each is read once and kept.
    """
    plain = _PLAIN_TEXT.match(text) is not None  # one scan of the whole text instead of two per line
    stack: list[tuple[int, Any]] = []  # (column, dict or list), outermost first
    slot: tuple[int, Any, Any] | None = None  # (column, container, key or index) awaiting a block
    for raw in text.split("\n"):
        parsed = _lines.get(raw)
        if parsed is None:
            parsed = _line(raw, plain)
            if parsed is None:
                continue
            if len(_lines) < 4096:
                _lines[raw] = parsed
        col, item, key, value = parsed
        if slot is not None:
            at, parent, index = slot
            slot = None
            if col > at or (item and col == at and isinstance(parent, dict)):
                block: Any = [] if item else {}
                parent[index] = block
                stack.append((col, block))
        elif not stack:
            if col:
                raise _Unsupported  # an indented document
            stack.append((0, [] if item else {}))
        while stack[-1][0] > col:
            stack.pop()
        at, top = stack[-1]
        if at != col:
            raise _Unsupported
        if item:
            if not isinstance(top, list):
                raise _Unsupported
            if key is None:
                if value is _OPEN:
                    top.append(None)
                    slot = (col, top, len(top) - 1)
                else:
                    top.append(value)
                continue
            mapping: dict[str, Any] = {}  # ``- key: …``: a mapping two columns in
            top.append(mapping)
            col += 2
            stack.append((col, mapping))
            top = mapping
        elif isinstance(top, list):
            # A key at an indentless sequence's column ends it: the mapping it is a value of goes on.
            if len(stack) < 2 or stack[-2][0] != col:
                raise _Unsupported
            stack.pop()
            top = stack[-1][1]
        if key in top:
            raise _Unsupported  # the safe loader keeps the last; not worth the subset's while
        if value is _OPEN:
            top[key] = None
            slot = (col, top, key)
        else:
            top[key] = value
    return stack[0][1] if stack else None
