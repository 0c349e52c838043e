"""Long lists of small messages decoded a field at a time by protobuf's C parser, not a message at a time.

A plugin's ListAndWatch reply and the kubelet's GetAllocatableResources can
carry a million small messages (a Device, a ContainerDevices per device ID).
Reading them one by one costs a Python object and several attribute reads
each: seconds. Protobuf concatenates repeated fields when it parses messages
laid end to end, so the items, joined and parsed once as a message whose
fields 1, 2 and 3 are repeated, come out as three lists, a column per field.

That only holds when every item carries each field exactly once (fields the
real message does not know, which its parse skips, aside): proved, not
assumed, and in C. The reply is cut where each pass's items end (its sizes as
the encoders write them), and each piece parsed as a list of messages with
fields 1, 2, 3 each at most once (proto2, so an empty value is kept) must
serialize back to the same bytes, with as many messages as the pass has items:
then no item repeats a field or lays its fields out of order, and the pieces
are the reply's items, in order. Each column must then have one value per
item, so that none leaves one out. Anything else (a cut that falls elsewhere
included) gives None, and the caller decodes message by message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache

from google.protobuf.message import DecodeError, Message


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (the benches build wire messages with it)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@cache
def _message_types() -> tuple[type[Message], type[Message], type[Message]]:
    """``Rows`` (field 1: repeated Row of fields 1, 2, 3 at most once), ``Columns`` (fields 1, 2, 3 repeated)
    and ``Items`` (field 1: repeated bytes), at first use.

    Made at the first long list, not at import: every command imports this module.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # not on every command's path

    label = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="devctl/columns.proto", package="devctl.columns", syntax="proto2")
    row = f.message_type.add(name="Row")
    columns = f.message_type.add(name="Columns")
    for number, name in enumerate(("first", "second", "third"), start=1):
        row.field.add(name=name, number=number, type=label.TYPE_BYTES, label=label.LABEL_OPTIONAL)
        columns.field.add(name=name, number=number, type=label.TYPE_BYTES, label=label.LABEL_REPEATED)
    rows = f.message_type.add(name="Rows")
    rows.field.add(
        name="items", number=1, type=label.TYPE_MESSAGE, type_name=".devctl.columns.Row", label=label.LABEL_REPEATED
    )
    items = f.message_type.add(name="Items")
    items.field.add(name="items", number=1, type=label.TYPE_BYTES, label=label.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    found = pool.FindMessageTypeByName
    return (
        message_factory.GetMessageClass(found("devctl.columns.Rows")),
        message_factory.GetMessageClass(found("devctl.columns.Columns")),
        message_factory.GetMessageClass(found("devctl.columns.Items")),
    )


# Replies shorter than this are read message by message: the columns pay off on long lists only.
LONG = 64 * 1024
# Items taken per pass: what a pass holds besides its results stays a few MiB however long the list.
CHUNK = 1 << 15

Columns = tuple[list[bytes], list[bytes], "list[bytes] | None"]


def columns(wire: bytes) -> Iterator[Columns | None] | None:
    """Fields 1, 2 and 3 (length-delimited) of the items of field 1 of ``wire``, CHUNK items a pass.

    Field 3 may be absent from every item of a pass (then None), never from
    some. A pass is None, and the last, when its items are not each of those
    fields exactly once, in order; None at once when ``wire`` does not parse.
    Other fields of ``wire`` are left out (``without_items``).
    """
    try:
        found: Sequence[bytes] = _message_types()[2].FromString(wire).items  # type: ignore[attr-defined]
    except DecodeError:
        return None
    return _passes(wire, found)


def _passes(wire: bytes, items: Sequence[bytes]) -> Iterator[Columns | None]:
    rows_type, columns_type, _ = _message_types()
    framed = _framed_sizes()
    at = 0
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        lengths = list(map(len, chunk))
        if max(lengths) >= _MAX_LEN:
            yield None
            return
        end = at + sum(map(framed.__getitem__, lengths))
        if not _exact(rows_type, wire[at:end], len(chunk)):
            yield None
            return
        at = end
        cols = columns_type.FromString(b"".join(chunk))
        first, second, third = list(cols.first), list(cols.second), list(cols.third)  # type: ignore[attr-defined]
        n = len(chunk)
        if len(first) != n or len(second) != n or len(third) not in (0, n):
            yield None
            return
        yield first, second, third or None
    if not _exact(rows_type, wire[at:], 0):  # the rest: other fields only
        yield None


def _exact(rows_type: type[Message], piece: bytes, n: int) -> bool:
    """Whether ``piece`` is ``n`` items of fields 1, 2, 3 at most once each, in order, and other fields after them."""
    try:
        rows = rows_type.FromString(piece)
    except DecodeError:
        return False
    return len(rows.items) == n and rows.SerializeToString() == piece  # type: ignore[attr-defined]


# Items up to this many bytes take the fast path (a length varint of at most two bytes).
_MAX_LEN = 1 << 14


@cache
def _framed_sizes() -> tuple[int, ...]:
    """By length: what an item of field 1 takes on the wire, tag and length included."""
    return tuple(1 + len(varint(n)) + n for n in range(_MAX_LEN))


@cache
def _heads() -> tuple[bytes, ...]:
    """By length: the tag and length an item of field 1 starts with."""
    return tuple(b"\x0a" + varint(n) for n in range(_MAX_LEN))


def items(wire: bytes) -> Sequence[bytes] | None:
    """The bytes of each item of field 1 of ``wire`` (None when it does not parse), for ``of_messages``."""
    try:
        found: Sequence[bytes] = _message_types()[2].FromString(wire).items  # type: ignore[attr-defined]
    except DecodeError:
        return None
    return found


def of_messages(messages: Sequence[bytes]) -> Columns | None:
    """Fields 1, 2 and 3 of messages given one by one (a column of a column: a pod's containers).

    Stricter than ``columns``: every message must be those fields exactly once
    each, in order (field 3 in all or none), and nothing else, since the caller
    reads messages that have more fields (a container's memory and claims) and
    must not lose them. None otherwise.
    """
    n = len(messages)
    if n == 0:
        return [], [], None
    lengths = list(map(len, messages))
    if max(lengths) >= _MAX_LEN:
        return None
    framed: list[bytes] = [b""] * (2 * n)
    framed[0::2] = map(_heads().__getitem__, lengths)
    framed[1::2] = messages
    rows_type, columns_type, _ = _message_types()
    if not _exact(rows_type, b"".join(framed), n):
        return None
    joined = b"".join(messages)
    cols = columns_type.FromString(joined)
    first, second, third = list(cols.first), list(cols.second), list(cols.third)  # type: ignore[attr-defined]
    if len(first) != n or len(second) != n or len(third) not in (0, n):
        return None
    # Each field once in order, and the fields' sizes adding up to the messages' bytes: no other field anywhere.
    size = _framed_sizes().__getitem__
    if sum(map(size, map(len, first))) + sum(map(size, map(len, second))) + sum(map(size, map(len, third))) != len(
        joined
    ):
        return None
    return first, second, third or None


def without_items(wire: bytes) -> bytes:
    """The message's other fields: the same message with field 1 left out (``wire`` parses, see ``columns``)."""
    msg = _message_types()[2].FromString(wire)  # field 1 as bytes: no message made per item
    msg.ClearField("items")
    return msg.SerializeToString()
