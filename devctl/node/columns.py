"""Long lists of small messages decoded a field at a time by protobuf's C parser, not a message at a time.

A plugin's ListAndWatch reply and the kubelet's GetAllocatableResources can
carry a million small messages (a Device, a ContainerDevices per device ID).
Reading them one by one costs a Python object and several attribute reads
each: seconds. Protobuf concatenates repeated fields when it parses messages
laid end to end, so the items, joined and parsed once as a message whose
fields 1, 2 and 3 are repeated, come out as three lists, a column per field.

That only holds when every item carries each field exactly once, in field
order, and nothing else: the form Go's and Python's encoders write. It is
proved, not assumed: the columns are encoded again (in C, by joins) and must
give back every item byte for byte; anything else (a field left out, one
repeated, an unknown one) returns None and the caller decodes message by
message, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from operator import add

from google.protobuf.message import DecodeError, Message

# Field lengths up to this many bytes take the fast path (a varint of at most two bytes).
_MAX_LEN = 1 << 14


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (the benches build wire messages with it too)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@cache
def _tables() -> tuple[tuple[int, ...], tuple[tuple[bytes, ...], ...]]:
    """By length: what one length-delimited field takes on the wire, and its tag and length for fields 1, 2, 3.

    Made at the first long list, not at import: every command imports this module.
    """
    varints = [varint(n) for n in range(_MAX_LEN)]
    sizes = tuple(1 + len(v) + n for n, v in enumerate(varints))
    heads = tuple(tuple(tag + v for v in varints) for tag in (b"\x0a", b"\x12", b"\x1a"))
    return sizes, heads


@cache
def _message_types() -> tuple[type[Message], type[Message]]:
    """``Items`` (field 1: repeated bytes) and ``Columns`` (fields 1, 2, 3: repeated bytes), made at first use."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # not on every command's path

    f = descriptor_pb2.FileDescriptorProto(name="devctl/columns.proto", package="devctl.columns", syntax="proto3")
    items = f.message_type.add(name="Items")
    items.field.add(name="items", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES, label=3)
    columns = f.message_type.add(name="Columns")
    for number, name in enumerate(("first", "second", "third"), start=1):
        columns.field.add(name=name, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES, label=3)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("devctl.columns.Items")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("devctl.columns.Columns")),
    )


# Replies shorter than this are read message by message: the columns pay off on long lists only.
LONG = 64 * 1024
# Items taken per pass: what a pass holds besides its results stays a few MiB however long the list.
CHUNK = 1 << 15

Columns = tuple[list[bytes], list[bytes], "list[bytes] | None"]


def items(wire: bytes) -> Sequence[bytes] | None:
    """Field 1 of a message read as a repeated length-delimited field: each item's bytes.

    The items stay in protobuf's memory until sliced (see ``chunked``). None
    when the bytes do not parse.
    """
    try:
        found: Sequence[bytes] = _message_types()[0].FromString(wire).items  # type: ignore[attr-defined]  # made at run time
    except DecodeError:
        return None
    return found


def without_items(wire: bytes) -> bytes:
    """The message's other fields: the same message with field 1 left out (the bytes parse, see ``items``)."""
    msg = _message_types()[0].FromString(wire)
    msg.ClearField("items")
    return msg.SerializeToString()


def chunked(items: Sequence[bytes]) -> Iterator[Columns | None]:
    """``columns`` of the items, CHUNK at a time."""
    for start in range(0, len(items), CHUNK):
        yield columns(items[start : start + CHUNK])


def columns(messages: Sequence[bytes]) -> Columns | None:
    """Fields 1, 2 and 3 (length-delimited) of every message, as three lists in the messages' order.

    Field 3 may be absent from every message (then None), never from some.
    None when any message is not exactly those fields once each, in order.
    """
    joined = b"".join(messages)
    try:
        cols = _message_types()[1].FromString(joined)
    except DecodeError:
        return None
    first, second, third = list(cols.first), list(cols.second), list(cols.third)  # type: ignore[attr-defined]
    n = len(messages)
    if len(first) != n or len(second) != n or len(third) not in (0, n):
        return None
    present = [first, second, third] if third else [first, second]
    lengths = [list(map(len, col)) for col in present]
    if n and max(max(ls) for ls in lengths) >= _MAX_LEN:
        return None
    # The columns encoded again, item after item: the same bytes, and each item as long as the original.
    # Laid out by slice assignment (a C loop): each message's pieces, a tag-and-length and a value per field.
    field_size, heads_by_field = _tables()
    width = 2 * len(present)
    pieces = [b""] * (width * n)
    for k, (heads, ls, col) in enumerate(zip(heads_by_field, lengths, present, strict=False)):
        pieces[2 * k :: width] = list(map(heads.__getitem__, ls))
        pieces[2 * k + 1 :: width] = col
    if b"".join(pieces) != joined:
        return None
    sizes = map(field_size.__getitem__, lengths[0])
    for ls in lengths[1:]:
        sizes = map(add, sizes, map(field_size.__getitem__, ls))
    if list(map(len, messages)) != list(sizes):
        return None
    return first, second, third or None
