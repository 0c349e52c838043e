"""The device manager checkpoint, ``kubelet_internal_checkpoint``: read, verify, decode, and write for the simulator.

The kubelet refuses a checkpoint whose checksum does not match and starts with
no allocations, so devctl must compute the checksum exactly as the kubelet
does and report a mismatch as a finding, not fail on it. The checksum is
FNV-1a 32 over go-spew's ``%#v`` rendering of the ``Data`` value *as Go decoded
it* (pkg/kubelet/checkpointmanager/checksum/checksum.go, pkg/util/hash/hash.go),
so this module re-creates both: what encoding/json makes of the file (a JSON
``null`` is a nil slice or map, printed ``<nil>``; a missing key keeps the
empty value the kubelet pre-filled) and how go-spew prints the structs of
pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go and checkpointv1.go.

Files the kubelet never writes are judged as closely as is cheap: a key
matches its field case-insensitively as in encoding/json, but when one field
appears under two spellings the exact spelling wins here (in Go, the later one).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from sys import intern
from typing import Any

from google.protobuf.message import DecodeError

from devctl.base.names import go_field
from devctl.model import Checkpoint, CheckpointEntry
from devctl.node.convert import decode_allocation
from devctl.node.gojson import (
    LONE_SURROGATE,
    CheckpointError,
    Shape,
    go_checksum,
    go_string,
    go_text,
    kind_of,
    load_json,
    read_bytes,
)

FORMAT_V2 = "v2"
FORMAT_V1 = "v1"  # Kubernetes <= 1.19: DeviceIDs a flat list, no NUMA nodes
NO_NUMA = "-1"  # pkg/kubelet/cm/devicemanager/manager.go: nodeWithoutTopology

# The checksum is verified when the text it is computed over (the go-spew rendering,
# about 2.7 bytes per byte of AllocResp) is at most this long: FNV-1a is a byte-by-byte
# loop, in Python about 10-20 MB/s, so a 100 MB checkpoint took half a minute.
# Above it the checksum is reported as not verified, never as ok (docs/safety.md).
CHECKSUM_LIMIT = 8 * 1024 * 1024

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_NIL = "<nil>"
_INT64 = range(-(2**63), 2**63)
_NUMA_KEY = re.compile(r"[+-]?[0-9]+")
# encoding/json.Marshal escapes these inside strings (HTMLEscape and JSONP safety).
GO_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


@dataclass(frozen=True)
class RawEntry:
    """One PodDevicesEntry as the simulated kubelet writes it.

    ``device_ids`` is keyed by NUMA node as a string (``"-1"``: none);
    ``alloc_resp`` is the serialized ContainerAllocateResponse the plugin
    returned (``b""`` for an empty one, which the kubelet stores as ``""``).
    """

    pod_uid: str
    container: str
    resource: str
    device_ids: Mapping[str, Sequence[str]]
    alloc_resp: bytes


@dataclass(frozen=True)
class _Entry:
    """A PodDevicesEntry as Go decodes it; ``None`` stands for Go's nil."""

    pod_uid: str
    container: str
    resource: str
    # v2: NUMA node -> IDs; v1: a flat tuple; None: nil (either format).
    device_ids: dict[int, tuple[str, ...] | None] | tuple[str, ...] | None
    alloc_resp: bytes | None
    alloc_error: str | None  # AllocResp was not base64: Go could not decode the file at all


@dataclass(frozen=True)
class _Data:
    entries: tuple[_Entry, ...] | None
    registered: dict[str, tuple[str, ...] | None] | None
    format: str | None  # None when no entry tells (no entries, or every DeviceIDs null)


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits: the hash/fnv.New32a the kubelet's checkpoint checksum uses.

    The rendering it hashes is larger than the file (every AllocResp byte
    becomes a decimal number), so the loop takes four bytes a turn and masks
    every second step, which is exact because XOR with a byte and
    multiplication modulo 2**32 depend only on the low 32 bits: 2-3 times
    faster than one byte a turn.
    """
    h, p = _FNV32_OFFSET, _FNV32_PRIME
    quads = iter(data)
    for a, b, c, d in zip(quads, quads, quads, quads, strict=False):  # the tail is hashed below
        h = (((((h ^ a) * p ^ b) * p & 0xFFFFFFFF) ^ c) * p ^ d) * p & 0xFFFFFFFF
    for byte in data[len(data) - len(data) % 4 :]:
        h = ((h ^ byte) * p) & 0xFFFFFFFF
    return h


def render_spew(data: Mapping[str, Any]) -> str:
    """The go-spew ``%#v`` rendering of a checkpoint's ``Data`` value (parsed JSON), whose FNV-1a is the checksum.

    The format follows the value: flat ``DeviceIDs`` lists render the old
    (v1) struct, as checkpointv1.go does after renaming its types. Raises
    ValueError when ``data`` is not the shape of a checkpoint's ``Data``.
    """
    parsed = _parse_data(data)
    return _render(parsed, parsed.format or FORMAT_V2)


def read_checkpoint(path: str) -> Checkpoint:
    """Read, verify and decode a checkpoint; raise CheckpointError only when it cannot be read at all.

    A checksum mismatch is a finding, not an error: ``checksum_ok`` is False
    with both checksums set. As the kubelet does (manager.go readCheckpoint),
    a file that fails as the current format is tried as the old one; the old
    format's checksum is checkpointv1.go's. An ``AllocResp`` that is not base64
    leaves the kubelet unable to decode the file, so then no checksum is
    computed (``computed_checksum`` None). An undecodable allocation is
    flagged on its own entry (``alloc_error``); the other entries still decode.
    """
    doc = load_json(path, read_bytes(path))
    try:
        if not isinstance(doc, dict):
            raise Shape(f"the file holds {kind_of(doc)}, expected an object")
        data = go_field(doc, "Data")
        if data is None:
            raise Shape("it has no Data object")
        stored = go_checksum(go_field(doc, "Checksum"))
        parsed = _parse_data(data)
    except Shape as err:
        raise CheckpointError(path, f"not a device manager checkpoint: {err}") from err

    fmt = parsed.format or FORMAT_V2
    computed = None
    unverified = None
    if not any(e.alloc_error for e in parsed.entries or ()):
        rendered = None if _rendered_at_least(parsed) > CHECKSUM_LIMIT else _render(parsed, fmt).encode()
        if rendered is None or len(rendered) > CHECKSUM_LIMIT:
            unverified = (
                f"checksum not verified: the text it is computed over is "
                f"{'more than ' if rendered is None else ''}"
                f"{_amount(max(len(rendered or b''), _rendered_at_least(parsed)))}, "
                f"above devctl's limit of {_amount(CHECKSUM_LIMIT)}"
            )
        else:
            computed = fnv1a32(rendered)
            if parsed.format is None and computed != stored:
                old = fnv1a32(_render(parsed, FORMAT_V1).encode())
                if old == stored:
                    fmt, computed = FORMAT_V1, old
    return Checkpoint(
        path=path,
        format=fmt,
        checksum_ok=None if unverified else computed is not None and computed == stored,
        unverified=unverified,
        checksum=stored,
        computed_checksum=computed,
        registered_devices={name: ids or () for name, ids in sorted((parsed.registered or {}).items())},
        entries=tuple(_model_entry(e) for e in parsed.entries or ()),
    )


def dump_checkpoint(entries: Sequence[RawEntry], registered: Mapping[str, Sequence[str]]) -> bytes:
    """The checkpoint file the kubelet would write for these entries and healthy devices, checksum included.

    Byte for byte what Go's json.Marshal makes of the kubelet's Data struct:
    compact, fields in struct order, map keys sorted as strings, no entries
    as ``null``. Raises ValueError for a NUMA key that is not an integer.
    """
    data = {
        "PodDeviceEntries": [_entry_json(e) for e in entries] or None,
        "RegisteredDevices": {name: list(ids) for name, ids in sorted(registered.items())},
    }
    checksum = fnv1a32(render_spew(data).encode())
    text = json.dumps({"Data": data, "Checksum": checksum}, ensure_ascii=False, separators=(",", ":"))
    return text.translate(GO_JSON_ESCAPES).encode()


def write_checkpoint(path: str, entries: Sequence[RawEntry], registered: Mapping[str, Sequence[str]]) -> None:
    """Write the checkpoint atomically, for the simulated kubelet only (devctl never writes node files)."""
    write_atomically(path, dump_checkpoint(entries, registered))


def write_atomically(path: str, blob: bytes) -> None:
    """Replace ``path`` with ``blob`` as the kubelet's file store does (the simulator's state files).

    pkg/kubelet/util/store/filestore.go: a hidden temporary file in the same
    directory, synced, then renamed over the old one, so a reader sees the old
    file or the new one, never half.
    """
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f".{name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# --- reading: bytes, JSON, and Go's view of the value ------------------------------


def _ids(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise Shape(f"{where} is {kind_of(value)}, expected a list of device IDs")
    # A million registered IDs are a million strings: check their type in one
    # pass and look for lone surrogates in one search, element by element only
    # when something is off.
    if all(v.__class__ is str for v in value) and not LONE_SURROGATE.search("".join(value)):
        return tuple(map(intern, value))  # the same str as the plugin's and the kubelet's lists (convert.py)
    return tuple(go_text(v, f"{where}[{i}]") for i, v in enumerate(value))


def _numa_node(key: str) -> int | None:
    """A NUMA node map key as encoding/json parses an int64 key (strconv.ParseInt(key, 10, 64)); None if it fails."""
    if _NUMA_KEY.fullmatch(key) and int(key) in _INT64:
        return int(key)
    return None


def _numa_key(key: str, where: str) -> int:
    node = _numa_node(key)
    if node is None:
        raise Shape(f"{where} has the key {json.dumps(key)}, expected a NUMA node number")
    return node


def _device_ids(value: Any, where: str) -> dict[int, tuple[str, ...] | None] | tuple[str, ...] | None:
    if isinstance(value, dict):
        return {_numa_key(k, where): _ids(v, f"{where}[{json.dumps(k)}]") for k, v in value.items()}
    if value is None or isinstance(value, list):
        return _ids(value, where)
    raise Shape(f"{where} is {kind_of(value)}, expected an object of NUMA node to device IDs (or an old flat list)")


def _alloc_resp(value: Any) -> tuple[bytes | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, str):
        return None, f"AllocResp is {kind_of(value)}, not base64"
    try:
        # encoding/json decodes []byte with base64.StdEncoding, which skips line breaks.
        return base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True), None
    except (binascii.Error, ValueError) as err:
        return None, f"AllocResp is not base64: {err}"


def _parse_entry(value: Any, where: str) -> _Entry:
    if value is None:  # a null element is a zero PodDevicesEntry
        value = {}
    if not isinstance(value, dict):
        raise Shape(f"{where} is {kind_of(value)}, expected an object")
    alloc, alloc_error = _alloc_resp(go_field(value, "AllocResp"))
    return _Entry(
        pod_uid=go_text(go_field(value, "PodUID"), f"{where}.PodUID"),
        container=go_text(go_field(value, "ContainerName"), f"{where}.ContainerName"),
        resource=go_text(go_field(value, "ResourceName"), f"{where}.ResourceName"),
        device_ids=_device_ids(go_field(value, "DeviceIDs"), f"{where}.DeviceIDs"),
        alloc_resp=alloc,
        alloc_error=alloc_error,
    )


def _parse_data(data: Any) -> _Data:
    """Go's view of the Data value: nil where JSON says null, empty where a key is missing.

    The kubelet unmarshals into a checkpoint pre-filled with an empty entry
    list and an empty map (manager.go getCheckpoint), so a missing key renders
    as empty while a ``null`` renders as nil.
    """
    if not isinstance(data, Mapping):
        raise Shape(f"Data is {kind_of(data)}, expected an object")
    raw_entries = go_field(data, "PodDeviceEntries", [])
    if raw_entries is not None and not isinstance(raw_entries, list):
        raise Shape(f"Data.PodDeviceEntries is {kind_of(raw_entries)}, expected a list")
    entries = None
    if raw_entries is not None:
        entries = tuple(_parse_entry(e, f"Data.PodDeviceEntries[{i}]") for i, e in enumerate(raw_entries))

    raw_registered = go_field(data, "RegisteredDevices", {})
    if raw_registered is not None and not isinstance(raw_registered, dict):
        raise Shape(f"Data.RegisteredDevices is {kind_of(raw_registered)}, expected an object")
    registered = None
    if raw_registered is not None:
        registered = {
            go_string(name): _ids(ids, f"Data.RegisteredDevices[{json.dumps(name)}]")
            for name, ids in raw_registered.items()
        }

    kinds = {type(e.device_ids) for e in entries or () if e.device_ids is not None}
    if len(kinds) > 1:
        raise Shape("Data.PodDeviceEntries mixes NUMA maps and old flat DeviceIDs lists")
    fmt = None
    if kinds:
        fmt = FORMAT_V2 if kinds == {dict} else FORMAT_V1
    return _Data(entries=entries, registered=registered, format=fmt)


# --- go-spew ------------------------------------------------------------------------

# Each byte of an AllocResp is printed as its decimal number.
_DECIMAL = tuple(str(n) for n in range(256))


def _rendered_at_least(data: _Data) -> int:
    """A lower bound of the rendering's length, without rendering: each AllocResp byte and each ID take 2 or more."""
    total = sum(2 * len(e.alloc_resp or b"") for e in data.entries or ())
    for ids in (data.registered or {}).values():
        total += sum(map(len, ids or ())) + len(ids or ())
    return total


def _amount(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


def _spew_list(items: Sequence[str] | None) -> str:
    return _NIL if items is None else "[" + " ".join(items) + "]"


def _spew_entry(e: _Entry, fmt: str) -> str:
    # Elements of a slice or map are printed without their type; struct fields with it.
    if isinstance(e.device_ids, dict):
        # go-spew with SortKeys sorts integer keys numerically: -1 0 1 2 10.
        pairs = sorted(e.device_ids.items())
        ids = "(checkpoint.DevicesPerNUMA)map[" + " ".join(f"{n}:{_spew_list(v)}" for n, v in pairs) + "]"
    elif fmt == FORMAT_V1:
        ids = "([]string)" + _spew_list(e.device_ids)
    else:
        ids = "(checkpoint.DevicesPerNUMA)" + _NIL
    alloc = _NIL if e.alloc_resp is None else "[" + " ".join(map(_DECIMAL.__getitem__, e.alloc_resp)) + "]"
    return (
        f"{{PodUID:(string){e.pod_uid} ContainerName:(string){e.container} ResourceName:(string){e.resource} "
        f"DeviceIDs:{ids} AllocResp:([]uint8){alloc}}}"
    )


def _render(data: _Data, fmt: str) -> str:
    """``%#v`` of checkpointData; the old struct's type names are renamed to these (checkpointv1.go)."""
    if any(e.alloc_error for e in data.entries or ()):
        raise Shape("an AllocResp is not base64, so the value cannot be rendered")
    entries = _NIL if data.entries is None else "[" + " ".join(_spew_entry(e, fmt) for e in data.entries) + "]"
    if data.registered is None:
        registered = _NIL
    else:
        # Strings sort by code point, which is Go's byte order of their UTF-8.
        pairs = sorted(data.registered.items())
        registered = "map[" + " ".join(f"{name}:{_spew_list(ids)}" for name, ids in pairs) + "]"
    return (
        f"(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){entries} "
        f"RegisteredDevices:(map[string][]string){registered}}}"
    )


# --- model and writing -----------------------------------------------------------------


def _model_entry(e: _Entry) -> CheckpointEntry:
    if isinstance(e.device_ids, tuple):
        # The old format recorded no NUMA node. The kubelet files such devices
        # under node 0 when it upgrades them (checkpointv1.go); devctl says "none".
        device_ids = {NO_NUMA: e.device_ids}
    else:
        device_ids = {str(n): ids or () for n, ids in sorted((e.device_ids or {}).items())}
    if e.alloc_error:
        return CheckpointEntry(e.pod_uid, e.container, e.resource, device_ids, None, e.alloc_error)
    try:
        allocation = decode_allocation(e.alloc_resp or b"")
    except DecodeError as err:
        return CheckpointEntry(
            e.pod_uid, e.container, e.resource, device_ids, None, f"AllocResp is not a ContainerAllocateResponse: {err}"
        )
    return CheckpointEntry(e.pod_uid, e.container, e.resource, device_ids, allocation)


def _entry_json(e: RawEntry) -> dict[str, Any]:
    nodes = {}
    for key, ids in e.device_ids.items():
        node = _numa_node(key)
        if node is None:
            raise ValueError(f"NUMA node key {key!r} of {e.pod_uid}/{e.container} is not an integer")
        nodes[str(node)] = list(ids)
    return {
        "PodUID": e.pod_uid,
        "ContainerName": e.container,
        "ResourceName": e.resource,
        # encoding/json writes map keys sorted as strings: "-1", "0", "1", "10", "2".
        "DeviceIDs": dict(sorted(nodes.items())),
        "AllocResp": base64.b64encode(e.alloc_resp).decode(),
    }
