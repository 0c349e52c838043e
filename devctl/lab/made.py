"""Only remove what devctl made: the one place that decides whether a path may be deleted.

devctl runs as root on production nodes, next to files it must never touch
(a host's pod logs, another plugin's socket, a file a person left at a path
that happens to match ours). So every server and the simulator remove only
what they themselves made in this run, and check before each removal that the
thing on disk is still that thing:

- a socket is unlinked only when the socket at the path is the one we bound
  (``socket_identity``: its inode and the time it was bound);
- before binding, a path may hold nothing or a stale socket (nothing listens,
  so no one is served by it); anything else is refused (``clear_for_bind``);
- ``Made`` records each directory and file a run creates, with its inode, and
  removes those and nothing else. A directory that devctl made loses the files
  and sockets in it (the node it simulates writes there) and is then removed
  with ``rmdir``: a directory in it that devctl did not make stays, with all
  it holds, and so does every directory around it. A directory that was there
  before is never removed.

No marker file is ever trusted: a marker can be copied, forged or left on a
host mount, and then it would hand someone else's files to the remover.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from typing import Protocol

from devctl.base.errors import DevctlError

# sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
LIVE_CHECK_TIMEOUT = 0.5

SocketId = tuple[int, int]
FileId = tuple[int, int]


class PathTaken(DevctlError, OSError):
    """Something that devctl may not remove sits where it wants to bind; ``str()`` is one line."""

    def __init__(self, message: str):
        super().__init__(errno.EEXIST, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def socket_identity(path: str, *, follow_symlinks: bool = False) -> SocketId | None:
    """Which socket file sits at ``path`` (None when there is none, or something else is there).

    The inode alone is not enough (a deleted socket's inode is reused at once), so
    the modification time, set when the socket is bound, tells a new socket from
    the old one. Not the change time: a chmod of the socket changes that.
    """
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if stat.S_ISSOCK(st.st_mode) else None


def socket_listens(path: str, timeout: float = LIVE_CHECK_TIMEOUT) -> bool:
    """Whether a process accepts connections on the unix socket at ``path`` (a busy one counts as live)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(path)
    except TimeoutError:
        return True  # its backlog is full: something listens, just slowly
    except OSError:
        return False
    finally:
        probe.close()
    return True


def what_is_at(path: str) -> str:
    """What occupies ``path``, in words for an error message ("a regular file", "a live socket", ...)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "nothing"
    except OSError as e:
        return f"something devctl cannot look at ({e.strerror or e})"
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            return f"a symbolic link to {os.readlink(path)}"
        except OSError:
            return "a symbolic link"
    if stat.S_ISSOCK(mode):
        owner = f" of uid {st.st_uid}" if st.st_uid != os.geteuid() else ""
        return f"a socket{owner} that a live process listens on" if socket_listens(path) else "a stale socket"
    kinds = [
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    return next((words for test, words in kinds if test(mode)), "a special file")


def bind_failure(path: str) -> str:
    """Why a socket could not be bound at ``path``, for the message that replaces gRPC's own log line."""
    what = what_is_at(path)
    if what != "nothing":
        return f"{what} is there"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable here (read-only, or another user's)"
    return "nothing is there, yet the kernel refused to bind it"


def clear_for_bind(path: str) -> None:
    """Make ``path`` free for a new socket, or raise PathTaken saying what is there.

    Only a stale socket (nothing listens on it: its process was killed) is
    removed, as the kubelet and gRPC do; a live socket, a regular file, a
    directory, a symlink or anything else is left alone and refused.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(mode) and not socket_listens(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    raise PathTaken(f"{path} is taken: {what_is_at(path)} is there (devctl removes only sockets it made)")


def _link_private(temporary: str, path: str) -> None:
    """The socket just bound at ``temporary`` made 0600 and linked to ``path``; ``temporary`` gone."""
    try:
        os.chmod(temporary, 0o600)
        os.link(temporary, path)
    except FileExistsError:
        raise PathTaken(f"{path} is taken: {what_is_at(path)} is there (devctl removes only sockets it made)") from None
    finally:
        os.unlink(temporary)


def bind_private(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` at ``path`` with mode 0600 from its first moment there, whatever the umask.

    A bind makes the file with the umask's mode, and a chmod after it leaves a
    moment where another user could connect. So the socket is bound at a
    temporary name beside ``path``, made 0600, and then linked to ``path``
    (a link never replaces what may have appeared there meanwhile: that is
    refused as PathTaken). The link keeps the inode and modification time, so
    ``socket_identity`` knows it as the socket we bound.
    """
    # Short (a socket path has at most 107 bytes), and this process' own: nothing awaits between bind and unlink.
    temporary = os.path.join(os.path.dirname(path), f".{os.getpid()}.binding")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    sock.bind(temporary)
    _link_private(temporary, path)


class _PortServer(Protocol):
    def add_insecure_port(self, address: str) -> int: ...


_bindings = itertools.count()


def add_private_port(server: _PortServer, path: str) -> None:
    """A gRPC server's unix socket at ``path``, mode 0600 from its first moment there, whatever the umask.

    As :func:`bind_private`, for a socket gRPC binds itself (``add_insecure_port``):
    bound at a temporary name beside ``path``, made 0600, linked into place. Only
    a stale socket at ``path`` is removed first (:func:`clear_for_bind`), where
    gRPC would unlink any socket. gRPC unlinks the name it bound when the server
    stops, so each binding's temporary name is its own, and ``path`` is removed
    by its owner through :func:`unlink_socket`. The kubelet dials plugins as
    root, so 0600 keeps out only the other local users.
    """
    clear_for_bind(path)
    temporary = os.path.join(os.path.dirname(path), f".{os.getpid()}.{next(_bindings)}.binding")
    with contextlib.suppress(OSError):  # a read-only dir refuses this too: the bind below says so in one line
        os.unlink(temporary)
    server.add_insecure_port(f"unix:{temporary}")  # RuntimeError when it cannot bind: the caller says why
    _link_private(temporary, path)


def unlink_socket(path: str, identity: SocketId | None) -> bool:
    """Unlink ``path`` only if it is still the socket we bound (``identity``); whether it was removed."""
    if identity is None or socket_identity(path) != identity:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True


def check_socket_path(path: str) -> None:
    """ValueError when ``path`` is too long for a unix socket (the kernel would cut or refuse it)."""
    if len(os.fsencode(os.path.abspath(path))) > MAX_SOCKET_PATH:
        raise ValueError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; choose a shorter directory")


def private_dir(path: str) -> None:
    """Make ``path`` (and missing parents) a directory that only this user may enter: mode 0700, ours.

    Control sockets live in such a directory, so no other local user can reach
    them whatever the umask. A directory that is there already must be ours (or
    we refuse: its owner could swap our socket for theirs); it is tightened to 0700.
    """
    missing = []
    head = os.path.abspath(path)
    while not os.path.lexists(head):
        missing.append(head)
        head = os.path.dirname(head)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
            os.chmod(directory, 0o700)  # the umask may have taken bits away; never added
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PathTaken(f"{path} is not a directory: {what_is_at(path)} is there")
    if st.st_uid != os.geteuid():
        raise PermissionError(
            errno.EPERM, f"{path} belongs to uid {st.st_uid}; control sockets go only in a directory of your own"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


def _file_id(path: str) -> FileId | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class Made:
    """The directories and files one run created, so that it removes those and nothing else.

    Record a thing right after creating it; ``remove`` takes the files, then the
    directories deepest first, each only if the path still holds the very same
    inode (a directory swapped for a symlink or another directory is left alone).
    """

    def __init__(self) -> None:
        self._dirs: dict[str, FileId] = {}
        self._files: dict[str, FileId] = {}

    def makedirs(self, path: str | os.PathLike[str], mode: int = 0o755) -> None:
        """``mkdir -p path``, recording each directory this call created."""
        missing = []
        head = os.path.abspath(path)
        while not os.path.lexists(head):
            missing.append(head)
            head = os.path.dirname(head)
        for directory in reversed(missing):
            os.mkdir(directory, mode)
            self._record_dir(directory)
        if not os.path.isdir(path):
            raise PathTaken(f"{path} is not a directory: {what_is_at(os.fspath(path))} is there")

    @contextlib.contextmanager
    def new_dirs(self, top: str | os.PathLike[str]) -> Iterator[None]:
        """Record every directory under ``top`` that appears while the block runs (a writer's own mkdirs).

        For writers that lay out a whole tree at once (the simulated sysfs) before
        the node is announced, so no one else writes under ``top`` meanwhile.
        """
        before = _dirs_under(os.fspath(top))
        try:
            yield
        finally:  # a block cut short (Ctrl-C during start-up) made directories too
            for path, identity in _dirs_under(os.fspath(top)).items():
                if before.get(path) != identity:
                    self._dirs[path] = identity

    def temp_dir(self, prefix: str, parent: str = "/tmp") -> str:
        """A fresh ``mkdtemp`` directory (mode 0700), recorded as made."""
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        self._record_dir(path)
        return path

    def file(self, path: str | os.PathLike[str]) -> None:
        """Record a file (or symlink) this run just created at ``path``."""
        identity = _file_id(os.fspath(path))
        if identity is not None:
            self._files[os.path.abspath(path)] = identity

    def _record_dir(self, path: str) -> None:
        identity = _file_id(path)
        if identity is not None:
            self._dirs[os.path.abspath(path)] = identity

    def __contains__(self, path: object) -> bool:
        """Whether ``path`` is a file or directory this run made, or lies inside a directory it made."""
        if not isinstance(path, (str, os.PathLike)):
            return False
        full = os.path.abspath(os.fspath(path))
        if full in self._files:
            return True
        return any(full == d or full.startswith(d + os.sep) for d in self._dirs)

    @property
    def dirs(self) -> tuple[str, ...]:
        return tuple(self._dirs)

    def remove(self, under: str | os.PathLike[str] | None = None) -> None:
        """Remove what was recorded (all of it, or what lies at or ``under`` a path) and is still what was made.

        Recorded files go first, each only if it is still the same inode. Then
        each recorded directory, deepest first, only if it is still the same
        directory: the files, sockets and symlinks in it (the node's own, made
        there by the run) are unlinked, a subdirectory this run did not make is
        left whole with all it holds, and the directory is removed with
        ``rmdir``, so one that still holds something is kept (never rmtree).
        What was handled is forgotten; safe to call twice.
        """
        top = None if under is None else os.path.abspath(under)

        def chosen(path: str) -> bool:
            return top is None or path == top or path.startswith(top + os.sep)

        for path, identity in list(self._files.items()):
            if chosen(path):
                if _file_id(path) == identity:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                del self._files[path]
        for path in sorted((d for d in self._dirs if chosen(d)), key=len, reverse=True):
            self._empty_and_rmdir(path, self._dirs.pop(path))

    def _empty_and_rmdir(self, path: str, identity: FileId) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return  # gone, or swapped for a symlink or something else: left alone
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != identity:
                return  # another directory now sits there
            with os.scandir(fd) as entries:
                names = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
            for name in names:  # through the directory's fd: a swapped parent never leads elsewhere
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):  # ENOTEMPTY: it holds a directory that is not ours
            os.rmdir(path)


def _dirs_under(top: str) -> dict[str, FileId]:
    """Each real directory at or under ``top`` (symlinks never followed), with its identity."""
    found: dict[str, FileId] = {}
    identity = _file_id(top)
    if identity is None or not os.path.isdir(top) or os.path.islink(top):
        return found
    found[os.path.abspath(top)] = identity
    pending = [os.path.abspath(top)]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found[entry.path] = (st.st_dev, st.st_ino)
                    pending.append(entry.path)
    return found
