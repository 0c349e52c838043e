"""A Pod manifest from a file or stdin (``devctl fit -f pod.yaml``, ``-f -``), bounded, as kubectl takes one.

YAML or JSON (JSON first when the text opens with ``{``: a JSON file indented with tabs is not YAML), one
document, whose ``kind`` is ``Pod`` and ``apiVersion`` ``v1`` — as ``kubectl get pod -o yaml`` prints it and
``kubectl apply`` requires; a ``List``, a Deployment or a bare pod spec is refused, naming what it is. At most
4 MiB is read: a larger file is refused from its size before a byte of it is read, and stdin is read to
4 MiB and one byte, never further, and must end within the command's deadline (a pipe left open).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import BinaryIO

from devctl.base.errors import DevctlError
from devctl.model import ErrorKind
from devctl.node.files import FileReadError, excerpt, read_file
from devctl.node.stdin_read import read_within

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
STDIN = "-"


class ManifestError(DevctlError):
    """A manifest that cannot be read or is not a Pod; the message is one line, naming the file."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.MALFORMED):
        super().__init__(message)
        self.kind = kind


def read_pod_manifest(path: str, stdin: BinaryIO | None = None, timeout: float | None = None) -> Mapping[str, object]:
    """The Pod manifest at ``path`` (``-``: ``stdin``, else the process' standard input) as a mapping; stdin
    must end within ``timeout`` seconds (the command's ``--timeout``; None: no deadline)."""
    name = "stdin" if path == STDIN else path
    raw = _read_stdin(stdin, timeout) if path == STDIN else _read_path(path)
    return parse_pod_manifest(raw, name)


def parse_pod_manifest(raw: bytes, name: str = "the manifest") -> Mapping[str, object]:
    """A manifest's bytes as a Pod mapping; raises ManifestError saying what it is instead."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ManifestError(f"{name}: not UTF-8 text") from None
    document = _load(text, name)
    if not isinstance(document, Mapping):
        raise ManifestError(f"{name}: not a Pod manifest but {excerpt(document)}")
    kind = document.get("kind")
    if kind != "Pod":
        what = "no kind" if kind is None else f"kind {excerpt(kind)}"
        hint = " (a pod spec alone? kubectl takes a whole Pod: apiVersion: v1, kind: Pod)" if kind is None else ""
        raise ManifestError(f"{name}: not a Pod: {what}{hint}")
    version = document.get("apiVersion")
    if version != "v1":
        raise ManifestError(f"{name}: a Pod of apiVersion {excerpt(version)}: expected v1")
    return document


def _load(text: str, name: str) -> object:
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            pass  # YAML's flow style opens with { too
    import yaml
    from yaml.composer import ComposerError

    try:
        return yaml.safe_load(text)
    except ComposerError as err:
        if "single document" in str(err):
            raise ManifestError(f"{name}: several YAML documents: give one Pod") from None
        raise ManifestError(f"{name}: not YAML or JSON") from None
    except (yaml.YAMLError, RecursionError):
        raise ManifestError(f"{name}: not YAML or JSON") from None


def _read_path(path: str) -> bytes:
    try:
        return read_file(path, MAX_MANIFEST_BYTES)
    except FileReadError as err:
        kind = ErrorKind.TOO_LARGE if err.reason.startswith("too large") else err.kind
        raise ManifestError(str(err), kind) from None


def _read_stdin(stdin: BinaryIO | None, timeout: float | None) -> bytes:
    if stdin is None:
        import sys

        stdin = sys.stdin.buffer
    raw, ended = read_within(stdin, MAX_MANIFEST_BYTES + 1, timeout)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"stdin: more than {MAX_MANIFEST_BYTES // (1024 * 1024)} MiB: not read", ErrorKind.TOO_LARGE
        )
    if not ended:
        raise ManifestError(f"no pod manifest on stdin within {timeout:g}s", ErrorKind.TIMEOUT)
    return raw
