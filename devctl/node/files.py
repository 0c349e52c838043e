"""The one way devctl reads a file it did not write: regular files only, never blocking, never unbounded.

The checkpoint, sysfs attributes, scenario and plugin configs and ``--from``
snapshots are paths someone else controls. A FIFO there blocks ``open()``
until a writer comes (forever, and Ctrl-C cannot interrupt a thread stuck in
it); a character device such as ``/dev/zero`` reads without end, and merely
opening some (``/dev/watchdog`` arms on open) changes the node. So nothing
but a regular file is ever opened for reading: the path is first opened with
``O_PATH`` (which opens no device, FIFO or socket: it only names the inode),
that descriptor is checked to be a regular file, and only then is that same
inode opened for reading through ``/proc/self/fd/N`` (non-blocking, without
acquiring a terminal); at most ``limit`` bytes are read. A symlink to a
regular file is followed, as the kubelet follows it; ``inside`` refuses one
that leads out of a directory (CDI specs). Without ``/proc`` the resolved
path is opened with ``O_NOFOLLOW`` and must be the inode checked, a weaker
guard (a directory on the way swapped meanwhile is not seen). docs/safety.md,
"Files devctl reads".
"""

from __future__ import annotations

import os
import re
import stat

from devctl.base.errors import DevctlError

TYPE_CHECKING = False  # typing's own: this module is imported by helper processes too (devctl.fast.helper)
if TYPE_CHECKING:
    from devctl.model import ErrorKind

# The largest file devctl reads; docs/performance.md says what reading one costs.
MAX_FILE_BYTES = 256 * 1024 * 1024
MiB = 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_CLOEXEC  # O_PATH: Linux's; elsewhere the fallback's stat
_CHUNK = 1024 * 1024


class FileReadError(DevctlError):
    """A file that cannot be read safely; ``reason`` is one line without the path, ``kind`` says why."""

    def __init__(self, path: str, reason: str, kind: ErrorKind):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.kind = kind


class FileRefused(DevctlError):
    """:func:`read_regular`'s refusal: ``reason`` is one line without the path, ``error`` the OS's, if it was one."""

    def __init__(self, reason: str, error: OSError | None = None):
        super().__init__(reason)
        self.reason = reason
        self.error = error


def read_file(path: str, limit: int = MAX_FILE_BYTES, *, inside: str | None = None) -> bytes:
    """The whole content of the regular file at ``path`` (symlinks followed); raises FileReadError.

    The size ``fstat`` reports is only a hint (sysfs says 4096 for every
    attribute, a file may grow while read): reading stops after ``limit + 1``
    bytes, and more than ``limit`` is refused.
    """
    try:
        return read_regular(path, limit, inside=inside)
    except FileRefused as refused:
        from devctl.model import ErrorKind  # here: a helper process reads with read_regular, without the model

        kind = ErrorKind.OTHER if refused.error is None else ErrorKind.of_oserror(refused.error)
        raise FileReadError(path, refused.reason, kind) from None


def read_regular(path: str, limit: int = MAX_FILE_BYTES, *, inside: str | None = None) -> bytes:
    """:func:`read_file` without devctl.model (for a helper process, devctl.fast.helper); raises FileRefused.

    ``inside``: a resolved directory (``os.path.realpath``) the file itself
    must be directly in, wherever its path's symlinks lead.
    """
    fd, size = open_regular(path, limit, inside)
    try:
        chunks = []
        left = limit + 1
        # One read when the reported size is right; the loop covers files that lie or grow.
        want = min(max(size + 1, 4096), left)
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


def open_regular(path: str, limit: int, inside: str | None) -> tuple[int, int]:
    """A descriptor open for reading on the regular file at ``path``, and its size; nothing else is opened to read."""
    if not _PATH_FLAGS & ~os.O_CLOEXEC:  # no O_PATH: stat, then the fallback's checked open
        try:
            info = os.stat(path)
        except OSError as err:
            raise FileRefused(_strerror(err), err) from None
        _check(info, limit)
        return _reopen_resolved(path, info, inside), info.st_size
    try:
        handle = os.open(path, _PATH_FLAGS)  # names the inode; opens no device, FIFO or socket
    except OSError as err:
        raise FileRefused(_strerror(err), err) from None
    try:
        info = os.fstat(handle)
        _check(info, limit)
        if inside is not None:
            try:
                where = os.readlink(f"/proc/self/fd/{handle}")
            except FileNotFoundError:  # no /proc
                return _reopen_resolved(path, info, inside), info.st_size
            except OSError as err:
                raise FileRefused(_strerror(err), err) from None
            if os.path.dirname(where) != inside:
                raise FileRefused(_OUTSIDE)
        try:
            return os.open(f"/proc/self/fd/{handle}", _OPEN_FLAGS), info.st_size  # the inode checked, to read
        except FileNotFoundError:  # no /proc (the checked inode's own open cannot say ENOENT)
            if os.path.isdir("/proc/self/fd"):
                raise FileRefused("no such file") from None
            return _reopen_resolved(path, info, inside), info.st_size
        except OSError as err:
            raise FileRefused(_strerror(err), err) from None
    finally:
        os.close(handle)


def _check(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"not a regular file but {file_type(info.st_mode)}")
    if info.st_size > limit:
        raise FileRefused(_too_large(info.st_size, limit))


def _reopen_resolved(path: str, info: os.stat_result, inside: str | None) -> int:
    """Without /proc: the resolved path opened without following a last symlink, and the same inode as checked."""
    where = os.path.realpath(path)
    if inside is not None and os.path.dirname(where) != inside:
        raise FileRefused(_OUTSIDE)
    try:
        fd = os.open(where, _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise FileRefused(_strerror(err), err) from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise FileRefused("changed while it was opened")
    return fd


_OUTSIDE = "a link to a file outside its directory: not read"
_SHOWN = re.compile(r"[A-Za-z0-9_.:/@+-]{1,64}")


def excerpt(value: object) -> str:
    """A value from a file's content as a message may show it: a short plain token quoted, else only its kind.

    A file that fails to parse may be anything (a secret behind a symlink):
    its text is never echoed beyond one word of at most 64 plain characters.
    """
    if isinstance(value, str):
        if _SHOWN.fullmatch(value) and value.count(":") < 2:
            return repr(value)
        return f"a string of {len(value)} characters"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return f"a {type(value).__name__}"


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


def file_type(mode: int) -> str:
    """What a file that is not a regular one is, for a one-line refusal (``a FIFO``, ``a socket``...)."""
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
