"""The one way devctl reads a file it did not write: regular files only, never blocking, never unbounded.

The checkpoint, sysfs attributes, scenario and plugin configs and ``--from``
snapshots are paths someone else controls. A FIFO there blocks ``open()``
until a writer comes (forever, and Ctrl-C cannot interrupt a thread stuck in
it); a character device such as ``/dev/zero`` reads without end. So a path is
opened non-blocking and without acquiring a terminal, the *opened* descriptor
is checked to be a regular file (a path checked before opening could be
swapped), and at most ``limit`` bytes are read.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing's own: this module is imported by helper processes too (devctl.node.helper)
if TYPE_CHECKING:
    from devctl.model import ErrorKind

# The largest file devctl reads; docs/performance.md says what reading one costs.
MAX_FILE_BYTES = 256 * 1024 * 1024
MiB = 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1024 * 1024


class FileReadError(Exception):
    """A file that cannot be read safely; ``reason`` is one line without the path, ``kind`` says why."""

    def __init__(self, path: str, reason: str, kind: ErrorKind):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.kind = kind


class FileRefused(Exception):
    """:func:`read_regular`'s refusal: ``reason`` is one line without the path, ``error`` the OS's, if it was one."""

    def __init__(self, reason: str, error: OSError | None = None):
        super().__init__(reason)
        self.reason = reason
        self.error = error


def read_file(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The whole content of the regular file at ``path`` (symlinks followed); raises FileReadError.

    The size ``fstat`` reports is only a hint (sysfs says 4096 for every
    attribute, a file may grow while read): reading stops after ``limit + 1``
    bytes, and more than ``limit`` is refused.
    """
    try:
        return read_regular(path, limit)
    except FileRefused as refused:
        from devctl.model import ErrorKind  # here: a helper process reads with read_regular, without the model

        kind = ErrorKind.OTHER if refused.error is None else ErrorKind.of_oserror(refused.error)
        raise FileReadError(path, refused.reason, kind) from None


def read_regular(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """:func:`read_file` without devctl.model (for a helper process, devctl.node.helper); raises FileRefused."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:
        raise FileRefused(_strerror(err), err) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"not a regular file but {_file_type(info.st_mode)}")
        if info.st_size > limit:
            raise FileRefused(_too_large(info.st_size, limit))
        chunks = []
        left = limit + 1
        # One read when the reported size is right; the loop covers files that lie or grow.
        want = min(max(info.st_size + 1, 4096), left)
        while left > 0 and (chunk := os.read(fd, min(want, left))):
            chunks.append(chunk)
            left -= len(chunk)
            want = _CHUNK
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except OSError as err:
        raise FileRefused(_strerror(err), err) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileRefused(_too_large(None, limit))
    return data


def _strerror(err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return "no such file"
    if isinstance(err, PermissionError):
        return "permission denied"
    return (err.strerror or str(err)).lower()


def _too_large(size: int | None, limit: int) -> str:
    if size is None:
        return f"too large to read: more than the limit of {_size(limit)}"
    return f"too large to read: {_size(size)}, the limit is {_size(limit)}"


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"


def _file_type(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
