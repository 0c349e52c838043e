"""A kubelet state file's JSON as Go's encoding/json decodes it: shared by both checkpoints' readers.

The device manager checkpoint (devctl.node.checkpoint) and the DRA manager
checkpoint (devctl.node.dra_checkpoint) are JSON the kubelet wrote with
encoding/json, and devctl judges them as Go reads them: invalid UTF-8 becomes
U+FFFD, a lone surrogate escape too, a key matches its field ignoring case, a
JSON null leaves a string empty, NaN is no JSON value. Nothing here imports
protobuf, so the DRA checkpoint's reader needs none.
"""

from __future__ import annotations

import json
import re
from typing import Any

from devctl.base.errors import DevctlError
from devctl.model import ErrorKind
from devctl.node.files import FileReadError, MiB, read_file

# The kubelet's own checkpoints are kilobytes to a few MiB; a larger file is refused unread, in one line
# (a 57 MB device manager checkpoint took 7 s and 590 MB to decode; docs/safety.md, "Files devctl reads").
CHECKPOINT_LIMIT = 64 * MiB
_UINT64 = range(2**64)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class CheckpointError(DevctlError):
    """A checkpoint that cannot be read at all: missing, unreadable, not JSON, or not a checkpoint (its ``kind``).

    ``reason`` is one line without the path, for a ``SourceError`` whose source
    is already the path; ``str()`` of the error carries both. ``kind`` is
    MALFORMED for content that is not a checkpoint, else what the read said.
    """

    def __init__(self, path: str, reason: str, kind: ErrorKind = ErrorKind.MALFORMED):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.kind = kind


class Shape(DevctlError, ValueError):
    """The JSON is not the shape of a checkpoint; the message names the offending field."""


def read_bytes(path: str) -> bytes:
    try:
        return read_file(path, CHECKPOINT_LIMIT)
    except FileReadError as err:
        raise CheckpointError(path, err.reason, err.kind) from None


def refuse_constant(name: str) -> Any:
    # Python's json takes NaN and Infinity; Go's, like the JSON grammar, does not.
    raise ValueError(f"{name} is not a JSON value")


def load_json(path: str, raw: bytes) -> Any:
    if not raw.strip():
        raise CheckpointError(path, "not JSON: the file is empty")
    # encoding/json replaces invalid UTF-8 inside strings with U+FFFD instead of failing.
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as err:
        raise CheckpointError(path, f"not JSON: {err.msg} at line {err.lineno} column {err.colno}") from err
    except ValueError as err:
        raise CheckpointError(path, f"not JSON: {err}") from err
    except RecursionError as err:
        raise CheckpointError(path, "not JSON: nested too deeply") from err


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def go_checksum(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value in _UINT64:
        return value
    shown = value if isinstance(value, (int, float)) and not isinstance(value, bool) else kind_of(value)
    raise Shape(f"Checksum is {shown}, expected an unsigned 64-bit integer")


def go_text(value: Any, where: str) -> str:
    if value is None:  # a JSON null leaves a Go string at ""
        return ""
    if not isinstance(value, str):
        raise Shape(f"{where} is {kind_of(value)}, expected a string")
    return go_string(value)


def go_string(value: str) -> str:
    # encoding/json turns a lone UTF-16 surrogate escape into U+FFFD; Python keeps it.
    return LONE_SURROGATE.sub("\ufffd", value)
