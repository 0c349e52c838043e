"""What every command shares: global options, exit codes, output formats, running the async core.

Only typer and the standard library are imported at module level: this module is
on the start-up path of ``devctl --help``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from devctl.base.escape import escape

if TYPE_CHECKING:
    from devctl.model import NodePaths

T = TypeVar("T")


class ExitCode(IntEnum):
    """The exit codes of the CLI contract."""

    OK = 0
    FINDINGS = 1  # the command ran and found problems (doctor, --fail-on)
    USAGE = 2
    NO_SOURCE = 3  # no source could be read at all


class Output(str, Enum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"
    name = "name"  # kubectl's -o name: the names only, one a line (as -q)


@dataclass(frozen=True)
class GlobalOptions:
    """The options given before (or after) the command; paths are resolved on first use.

    ``given`` holds the node paths typed or set in the environment, by their names in
    devctl.base.path_options; the resolver fills in the rest.
    """

    given: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 5.0
    from_file: str | None = None
    verbose: bool = False

    @property
    def root(self) -> str | None:
        return self.given.get("root")

    def paths(self) -> NodePaths:
        from devctl.core.paths import resolve_paths

        return resolve_paths(self.given)


def options(ctx: typer.Context) -> GlobalOptions:
    """The global options of this invocation (set by the app's callback)."""
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, GlobalOptions) else GlobalOptions()


# The root context of the invocation running now (set by the app's callback, cleared when that context closes):
# click's get_current_context is not part of typer's public API, and a function deep in a command's output has
# no context of its own to ask. Its ``meta`` is the one every context of the invocation shares.
_invocation: ContextVar[typer.Context | None] = ContextVar("devctl_invocation", default=None)


def begin_invocation(ctx: typer.Context) -> None:
    """Note ``ctx`` (the root context) as the invocation's, until that context closes."""
    _invocation.set(ctx)
    ctx.call_on_close(lambda: _invocation.set(None))


def current_context() -> typer.Context | None:
    """The root context of the invocation running now, or None outside one (a library call, a test)."""
    return _invocation.get()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run the async core at the CLI's edge.

    The result travels outside the main task: on the way out, Python 3.11's
    asyncio.run looks up the SIGINT handler, and ``signal.getsignal`` formats
    that handler (which holds the main task) into an error message it then
    drops, which ``repr``s the task's result in full: seconds and hundreds of
    MiB for a snapshot of a million devices (docs/performance.md).
    """
    import asyncio

    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


def socket_path(path: str, plugins_dir: str) -> str:
    """``--socket`` as given, or in the plugins dir when it is a bare file name not found here."""
    if "/" not in path and not os.path.exists(path):
        return os.path.join(plugins_dir, path)
    return path


def reader_gone(stream: IO[str]) -> bool:
    """Whether nobody reads ``stream`` any more: the reader's end of its pipe closed (``| head -1``).

    A command that waits for something to print (``watch``, ``-w``) on a quiet
    node writes nothing, so it would never meet the EPIPE that ends a busy
    one. A pipe's writing end reports POLLERR once its reader is gone; a
    terminal or a file never does, and a stream without a file descriptor (an
    embedding that captures output) has no reader to lose.
    """
    import select

    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def say(message: str) -> None:
    """One line for a person on stderr, after ``devctl: ``.

    Escaped as a whole: a message names sockets, resources, device IDs, gRPC
    error details and the user's own arguments, and must stay one line that
    cannot drive the terminal (devctl.base.escape).
    """
    print(f"devctl: {escape(message)}", file=sys.stderr, flush=True)


# The one line a command prints when the kubelet's side of the node refused devctl.
AS_ROOT = "run as root (e.g. kubectl debug node/NAME -it --profile=sysadmin --image=IMAGE)"
NO_RIGHTS = f"the kubelet's sockets and files refused devctl (permission denied): {AS_ROOT}"


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """One line on stderr (``say``), then exit with a code that means something."""
    say(message)
    raise typer.Exit(int(code))


def _json_escape(error: UnicodeError) -> tuple[str, int]:
    """The characters a stream cannot encode as JSON's ``\\uXXXX`` escapes (surrogate pairs above U+FFFF)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for char in error.object[error.start : error.end]:
        n = ord(char)
        if n > 0xFFFF:
            n -= 0x10000
            out.append(f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}")
        else:
            out.append(f"\\u{n:04x}")
    return "".join(out), error.end


def escape_unencodable() -> None:
    """Write what stdout and stderr cannot encode as ``\\uXXXX`` instead of failing with a traceback.

    A pipe or terminal that is not UTF-8 (``PYTHONIOENCODING=ascii``, a Latin-1
    locale) meets a device ID, a pod name or the watch table's arrow; inside a
    JSON string the escape is still valid JSON, so ``-o json`` stays parseable.
    """
    import codecs

    codecs.register_error("devctl-json-escape", _json_escape)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="devctl-json-escape")


class EscapingFormatter(logging.Formatter):
    """Log lines whose message is escaped: a record may quote a plugin's error or a device ID (devctl.base.escape).

    The traceback of a record, devctl's own text, keeps its lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        safe = logging.makeLogRecord({**record.__dict__, "message": escape(record.message)})
        return super().formatMessage(safe)


def setup_logging(verbose: bool, again: bool = False) -> None:
    """Warnings of anyone on stderr; with ``-v`` also devctl's own lines (each RPC, each source), nobody else's.

    ``-v`` lowers the level of the ``devctl`` logger only: gRPC's and asyncio's
    debug lines (event loop, poller, channel set-up) would bury the lines a
    person asked for, so their loggers stay at the root's level, warnings.
    ``again``: ``-v`` given after the command, once the first set-up is done.
    """
    if again:
        for old in [h for h in logging.getLogger().handlers if isinstance(h.formatter, EscapingFormatter)]:
            logging.getLogger().removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(EscapingFormatter("%(asctime)s %(name)s: %(message)s" if verbose else "devctl: %(message)s"))
    if again:
        logging.getLogger().addHandler(handler)
    else:
        logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("devctl").setLevel(logging.DEBUG if verbose else logging.NOTSET)
    # grpc logs a traceback of its own for a reply it cannot parse; devctl reports
    # that source as one line instead (devctl.node.rpc.parsed).
    logging.getLogger("grpc._common").setLevel(logging.CRITICAL)
