"""The node journal's bytes (devctl.node.journal says why it is a ring): its header, its records, one walk over them.

Every integer is little-endian. The header (64 bytes, zero-padded) is magic, format version, flags, its
own size, the bound, records written, records dropped, creation time (ms) and a CRC32 of those. A
record is its magic, payload length, sequence, time (ms since the epoch, UTC), a CRC32 of those three
and the payload, then the payload: devctl.model.serial's JSON of the NodeEvent without its time (the
header holds it), compact and ASCII only, so the record magic never occurs inside one.
"""

from __future__ import annotations

import json
import struct
import zlib
from array import array
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from devctl.model.history import NodeEvent
from devctl.model.serial import to_plain

MAGIC = b"\x89DVJRNL\n"
VERSION = 1
HEADER_SIZE = 64
HEADER = struct.Struct("<8sHHIQQQqI")  # magic, version, flags, header size, bound, written, dropped, created ms, crc
REC_MAGIC = b"\xd1\xe7JR"
REC = struct.Struct("<4sIQqI")  # magic, payload length, sequence, time in ms since the epoch, crc
REC_HEADER = REC.size  # 28
MAX_PAYLOAD = 32 * 1024  # an event's JSON; a longer kernel line is cut by its reader, not here

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MS = timedelta(milliseconds=1)


# --- the file's bytes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    bound: int
    written: int
    dropped: int
    created_ms: int
    intact: bool  # its CRC holds (a torn header write leaves the counters unknown)


def pack_header(bound: int, written: int, dropped: int, created_ms: int) -> bytes:
    body = HEADER.pack(MAGIC, VERSION, 0, HEADER_SIZE, bound, written, dropped, created_ms, 0)[:-4]
    return (body + struct.pack("<I", zlib.crc32(body))).ljust(HEADER_SIZE, b"\0")


def parse_header(data: bytes) -> Header | str:
    """The header at the start of ``data``, or why this is not a journal this devctl reads."""
    if data[: len(MAGIC)] != MAGIC:
        return "not a devctl journal (wrong magic)"
    if len(data) < HEADER_SIZE:
        return "a journal header cut short"
    _, version, _, size, bound, written, dropped, created, crc = HEADER.unpack_from(data)
    if version != VERSION:
        return f"journal format version {version}; this devctl reads version {VERSION}"
    if size != HEADER_SIZE:
        return f"a journal header of {size} bytes; version {VERSION} has {HEADER_SIZE}"
    return Header(bound, written, dropped, created, zlib.crc32(data[: HEADER.size - 4]) == crc)


def to_ms(t: datetime) -> int:
    return (t.astimezone(timezone.utc) - EPOCH) // MS


def record(event: NodeEvent, seq: int) -> bytes:
    plain = to_plain(event)
    del plain["time"]  # in the record's header, to the millisecond as serial writes it
    payload = json.dumps(plain, separators=(",", ":")).encode()
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"an event of {len(payload)} bytes (the limit is {MAX_PAYLOAD})")
    head = REC.pack(REC_MAGIC, len(payload), seq, to_ms(event.time), 0)[:-4]
    return head + struct.pack("<I", zlib.crc32(payload, zlib.crc32(head[4:]))) + payload


@dataclass
class Scan:
    """The records a walk over the file found (parallel arrays, in file order) and the stretches skipped."""

    offsets: array[int]
    seqs: array[int]
    times: array[int]
    lengths: array[int]
    skipped: list[tuple[int, int]]  # (offset, end) of bytes that make no whole, checked record


def scan(data: bytes, start: int = HEADER_SIZE) -> Scan:
    """Walk the record area; bytes that make no whole, checked record are skipped to the next record magic."""
    found = Scan(array("q"), array("q"), array("q"), array("q"), [])
    n = len(data)
    pos = start
    unpack = REC.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    while pos < n:
        if pos + REC_HEADER <= n:
            magic, length, seq, ms, crc = unpack(data, pos)
            end = pos + REC_HEADER + length
            if (
                magic == REC_MAGIC
                and length <= MAX_PAYLOAD
                and end <= n
                and crc32(view[pos + REC_HEADER : end], crc32(view[pos + 4 : pos + REC_HEADER - 4])) == crc
            ):
                found.offsets.append(pos)
                found.seqs.append(seq)
                found.times.append(ms)
                found.lengths.append(length)
                pos = end
                continue
        nxt = data.find(REC_MAGIC, pos + 1)
        nxt = n if nxt < 0 else nxt
        found.skipped.append((pos, nxt))
        pos = nxt
    return found


def newest(scan: Scan) -> int:
    """The index (in file order) of the record with the highest sequence; -1 for none."""
    return max(range(len(scan.seqs)), key=scan.seqs.__getitem__) if scan.seqs else -1


def skip_notices(path: str, data: bytes, scan: Scan) -> list[str]:
    """One line per stretch skipped, but none for the rest of a record the ring overwrote (expected, not damage).

    That rest follows the newest record and does not start with a record magic; a record cut by a crash
    (or being written as we read) follows it too, but starts with one, of a later sequence.
    """
    last = newest(scan)
    after_newest = HEADER_SIZE if last < 0 else scan.offsets[last] + REC_HEADER + scan.lengths[last]
    top = scan.seqs[last] if last >= 0 else 0
    notices = []
    for start, end in scan.skipped:
        head = data[start : start + REC_HEADER]
        starts_record = head[:4] == REC_MAGIC or (end == len(data) and REC_MAGIC.startswith(head[:4]))
        if start == after_newest:
            if not starts_record:
                continue  # the ring's leftover
            if len(head) < REC_HEADER or REC.unpack(head)[2] > top:
                notices.append(f"{path}: the last record is cut short ({end - start} bytes at {start}): skipped")
                continue
        notices.append(f"{path}: {end - start} bytes at {start} are no whole record (corrupt): skipped")
    return notices
