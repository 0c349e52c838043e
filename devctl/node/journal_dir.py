"""The journal's directory confined to ``--root``: made if absent, never reached through a link that leaves the root.

``devctl record --root R`` writes ``R/var/lib/devctl/journal``. A link on that way (``R/var/lib/devctl ->
/elsewhere``, or ``R/var -> /``) would put the journal outside the node's tree; ``O_NOFOLLOW`` on the file
guards its last component only. So the directory is first resolved and refused when it leaves the root
(a link that stays inside it, ``var/lib/devctl -> ../../data/devctl``, is followed), then opened one
component at a time from the root's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` (each missing one made
with ``mkdirat``): a link swapped in after the check is refused too, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os

from devctl.base.errors import ErrorKind
from devctl.node.journal import JournalError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_MODE = 0o755


def _inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def open_dir_under(root: str, directory: str, journal: str) -> int:
    """A descriptor on ``directory`` (a path under ``root``), made if absent; JournalError naming ``journal`` if
    it leads out of ``root``, or a component is not a directory. The caller closes it."""
    real_root = os.path.realpath(root)
    real_dir = os.path.realpath(directory)
    if not _inside(real_dir, real_root):
        raise JournalError(journal, f"{directory} leads out of --root {root} (to {real_dir}): refused", ErrorKind.OTHER)
    try:
        fd = os.open(real_root, _DIR_FLAGS)
    except OSError as err:
        raise JournalError(journal, f"{root}: {_strerror(err)}", ErrorKind.of_oserror(err)) from None
    done = real_root
    for name in os.path.relpath(real_dir, real_root).split("/"):
        if name in ("", "."):
            continue
        done = os.path.join(done, name)
        fd = _step(fd, name, done, journal)  # closes the parent's descriptor, whatever happens
    return fd


def _step(parent: int, name: str, shown: str, journal: str) -> int:
    """The directory ``name`` in ``parent`` (closed here), made if absent, never through a link."""
    try:
        try:
            return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # made meanwhile (another recorder): opened as any other
                os.mkdir(name, _MODE, dir_fd=parent)
            return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            reason = f"{shown} is not a directory under the root (a link or a file): refused"
            raise JournalError(journal, reason, ErrorKind.OTHER) from None
        raise JournalError(journal, f"{shown}: {_strerror(err)}", ErrorKind.of_oserror(err)) from None
    finally:
        os.close(parent)


def _strerror(err: OSError) -> str:
    return (err.strerror or str(err)).lower()


__all__ = ["open_dir_under"]
