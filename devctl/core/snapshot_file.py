"""Snapshot files: what ``devctl snapshot`` writes and ``--from`` reads back, without loss."""

from __future__ import annotations

import json
from typing import IO

from devctl.base.errors import DevctlError
from devctl.model import NodeSnapshot

# What ``devctl snapshot`` writes at the top of its JSON, so ``--from`` can tell a
# snapshot from any other JSON file.
SNAPSHOT_KIND = "devctl-snapshot/v1"


class SnapshotError(DevctlError):
    """A snapshot file that cannot be read back; the message is one line."""


def dump_snapshot(snapshot: NodeSnapshot, stream: IO[str]) -> None:
    """Write a snapshot as one JSON document that ``load_snapshot`` reads back without loss."""
    from devctl.model.serial import to_plain

    json.dump({"kind": SNAPSHOT_KIND, **to_plain(snapshot)}, stream, indent=2)
    stream.write("\n")


def load_snapshot(path: str) -> NodeSnapshot:
    """A snapshot written by ``devctl snapshot``; raises SnapshotError with a one-line reason."""
    from devctl.model.serial import PlainError, from_plain
    from devctl.node.files import FileReadError, read_file

    try:
        text = read_file(path).decode("utf-8")
    except FileReadError as e:
        raise SnapshotError(str(e)) from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not a text file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:  # json's C scanner gives up past ~1,000 levels: one line, not a traceback
        raise SnapshotError(f"{path}: not JSON: nested too deeply") from None
    if not isinstance(data, dict) or data.get("kind") != SNAPSHOT_KIND:
        raise SnapshotError(f"{path}: not a devctl snapshot (written by `devctl snapshot`)")
    try:
        return from_plain(NodeSnapshot, data)
    except PlainError as e:
        raise SnapshotError(f"{path}: damaged snapshot: {e}") from None
