"""The one root of devctl's failures, and the one vocabulary of why something failed.

Every exception devctl defines derives from ``DevctlError``, which carries a ``kind``: the reason as a word
(``ErrorKind``), set once where the failure happens (``node/`` for the node's sources). Everything above decides
on the kind, never on the words of a message or a path's substring. ``Word`` is the base of devctl's
vocabularies: an enum whose members print as their value, so a table, a JSON document and a metric label all
show the same word.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """An enum of words: ``str()`` and formatting give the value itself, as the contract spells it."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class ErrorKind(Word):
    """Why a source could not be read: set once where the failure happens (``node/``).

    Everything above ``node/`` (doctor, exit codes, the TUI) decides on the kind,
    never on the words of a message. The values are the ``errors[].kind`` of JSON.
    """

    MISSING = "missing"  # no such file, socket or directory
    NOT_A_SOCKET = "not-a-socket"  # a regular file, directory or FIFO where a socket belongs
    STALE = "stale"  # a socket file with nothing listening on it
    PERMISSION_DENIED = "permission-denied"
    TIMEOUT = "timeout"  # connected (or tried to), no answer within the deadline
    UNIMPLEMENTED = "unimplemented"  # the server does not offer that RPC or API version
    MALFORMED = "malformed"  # an answer or file that does not parse, or fails its checksum
    RATE_LIMITED = "rate-limited"  # the kubelet's pod-resources rate limit
    TOO_LARGE = "too-large"  # above a limit devctl documents or the kubelet keeps (docs/safety.md, Bounds)
    WRONG_API = "wrong-api"  # something answers, but another protocol or service
    OTHER = "other"

    @classmethod
    def of_oserror(cls, err: OSError) -> ErrorKind:
        """The kind of a failed open, read or list: what the errno says."""
        if isinstance(err, FileNotFoundError):
            return cls.MISSING
        if isinstance(err, PermissionError):
            return cls.PERMISSION_DENIED
        return cls.OTHER


class SocketStatus(Word):
    """The one vocabulary of a socket's state, for every socket devctl dials: a device plugin's (the ``status`` of
    ``plugins`` and ``ls``), a DRA driver's, the kubelet's. Dialled, not stat'ed: the kubelet never removes
    ``kubelet.sock`` or the pod-resources socket when it exits, so a socket file says nothing of a listener.
    ``PluginStatus`` (devctl.model) is this enum under the name plugin code reads best with.
    """

    SERVING = "serving"  # a plugin answered
    LISTENING = "listening"  # the kubelet's socket has a listener
    UNREACHABLE = "unreachable"  # the socket refused or the RPC failed
    MISSING = "missing"
    NOT_A_SOCKET = "not-a-socket"  # a regular file, directory or FIFO where a socket belongs
    STALE = "stale"  # a socket file with nothing listening on it
    TIMEOUT = "timeout"  # accepted the connection, never answered in time
    PERMISSION_DENIED = "permission-denied"
    NO_PLUGIN = "no-plugin"  # known to the kubelet, but no socket serves it
    OTHER = "other"

    @classmethod
    def of_failure(cls, kind: ErrorKind) -> SocketStatus:
        """The state of a socket whose connect failed with ``kind`` (a kind with no state of its own is OTHER)."""
        return _STATUS_OF_KIND.get(kind, cls.OTHER)

    def failure_kind(self) -> ErrorKind:
        """The kind of failure this state is, where nothing more precise is known."""
        return _KIND_OF_STATUS.get(self, ErrorKind.OTHER)


_KIND_OF_STATUS = {
    SocketStatus.MISSING: ErrorKind.MISSING,
    SocketStatus.NOT_A_SOCKET: ErrorKind.NOT_A_SOCKET,
    SocketStatus.STALE: ErrorKind.STALE,
    SocketStatus.TIMEOUT: ErrorKind.TIMEOUT,
    SocketStatus.PERMISSION_DENIED: ErrorKind.PERMISSION_DENIED,
    SocketStatus.NO_PLUGIN: ErrorKind.MISSING,
}
_STATUS_OF_KIND = {
    ErrorKind.MISSING: SocketStatus.MISSING,
    ErrorKind.NOT_A_SOCKET: SocketStatus.NOT_A_SOCKET,
    ErrorKind.STALE: SocketStatus.STALE,
    ErrorKind.TIMEOUT: SocketStatus.TIMEOUT,
    ErrorKind.PERMISSION_DENIED: SocketStatus.PERMISSION_DENIED,
    ErrorKind.OTHER: SocketStatus.OTHER,
}


class DevctlError(Exception):
    """The root of every exception devctl defines; ``kind`` says why, for code that decides on it."""

    kind: ErrorKind = ErrorKind.OTHER
