"""``devctl watch``: live ListAndWatch streams (and kernel device events) on one timeline.

The command parses its options and hands them to ``_follow``, which consumes
``devctl.core.watch.watch`` and prints; fetching and printing stay apart.
Only typer and the standard library are imported at module level.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from enum import Enum
from typing import IO, TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import NO_RIGHTS, ExitCode, fail, options, reader_gone, run, say, socket_path
from devctl.cli.complete import resources as complete_resources

if TYPE_CHECKING:
    from devctl.model import NodePaths


class WatchOutput(str, Enum):
    table = "table"
    json = "json"


def watch(
    ctx: typer.Context,
    resources: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RESOURCE",
            show_default=False,
            help="Resources or DRA drivers to watch [default: every plugin].",
            autocompletion=complete_resources,
        ),
    ] = None,
    socket: Annotated[
        list[str] | None,
        typer.Option("--socket", metavar="PATH", help="Watch this plugin socket (a bare name is in the plugins dir)."),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print each target's current list, then exit.")] = False,
    count: Annotated[int | None, typer.Option("--count", min=1, metavar="N", help="Exit after N events.")] = None,
    duration: Annotated[
        float | None, typer.Option("--duration", min=0.0, metavar="SECONDS", help="Exit after this long.")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for resources or sockets not served yet.")] = False,
    udev: Annotated[bool, typer.Option("--udev", help="Add kernel device events (PCI, DRM, net, IB, VFIO).")] = False,
    record: Annotated[
        str | None, typer.Option("--record", metavar="FILE", help="Also write the events as JSON lines to FILE.")
    ] = None,
    output: Annotated[
        WatchOutput, typer.Option("--output", "-o", help="table, or json: one object per line.")
    ] = WatchOutput.table,
    notices: Annotated[
        WatchOutput,
        typer.Option("--notices", hidden=True, help="json: status notes as JSON lines on stderr (the TUI's child)."),
    ] = WatchOutput.table,
) -> None:
    """Follow device plugins and DRA drivers live: a snapshot, then one line per change, until Ctrl-C.

    Without arguments, every plugin and every registered DRA driver (its health
    stream). Events: snapshot, added, removed, health, topology, disconnected and
    reconnected; with --udev also udev-add, udev-remove, udev-change,
    udev-bind, udev-unbind. Status notes (waiting, why a stream ended) go to
    stderr.
    """
    opts = options(ctx)
    if opts.from_file:
        fail("--from: watch follows live plugin streams; a snapshot file has none (try `devctl --from FILE ls`)")
    if duration is not None and duration != duration:  # NaN passes typer's min=0 and would end the watch at once
        fail("--duration: not a number of seconds")
    paths = opts.paths()
    sockets = [socket_path(s, paths.plugins_dir) for s in socket or ()]
    try:
        recording = open(record, "w", encoding="utf-8") if record else None  # noqa: SIM115 closed below
    except OSError as e:
        fail(f"--record {record}: {e.strerror or e}")
    try:
        code = run(
            _follow(
                paths,
                resources or [],
                sockets,
                json_output=output == WatchOutput.json,
                once=once,
                count=count,
                duration=duration,
                wait=wait,
                udev=udev,
                record=recording,
                timeout=opts.timeout,
                json_notices=notices == WatchOutput.json,
            )
        )
    except KeyboardInterrupt:
        code = ExitCode.OK  # Ctrl-C before the watch set its own handler (still starting up)
    finally:
        if recording is not None:
            recording.close()
    raise typer.Exit(int(code))


async def _follow(
    paths: NodePaths,
    resources: list[str],
    sockets: list[str],
    *,
    json_output: bool,
    once: bool,
    count: int | None,
    duration: float | None,
    wait: bool,
    udev: bool,
    record: IO[str] | None,
    timeout: float,
    json_notices: bool = False,
) -> ExitCode:
    """Print events until ``count``, ``duration``, ``once``, SIGINT or SIGTERM ends the watch.

    Every event line, on stdout with ``-o json`` and in the ``--record`` file,
    is ``devctl.model.serial``'s (``render.events.json_line``); with ``json_notices``
    (the TUI's child) so is every notice on stderr, read back whole by the TUI.
    """
    import asyncio

    from devctl.core.watch import (
        NoPluginsDir,
        NoRights,
        Notice,
        ResourceNotServed,
        UnknownTarget,
        plugin_sockets,
        watch,
    )
    from devctl.model.serial import json_line as notice_line
    from devctl.render.events import EventTable, json_line

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    out = sys.stdout
    printed = 0
    header = not json_output
    table = EventTable()

    async def consume() -> ExitCode:
        nonlocal printed, header
        async with contextlib.aclosing(
            watch(paths, resources, sockets, wait=wait, once=once, udev=udev, timeout=timeout)
        ) as items:
            async for item in items:
                if isinstance(item, Notice):
                    if json_notices:
                        sys.stderr.write(notice_line(item) + "\n")  # JSON escapes every control and non-ASCII
                        sys.stderr.flush()
                    else:
                        say(item.message)
                    continue
                if header:
                    out.write(table.header() + "\n")
                    header = False
                line = json_line(item)
                out.write((line if json_output else table.line(item)) + "\n")
                out.flush()
                if record is not None:
                    record.write(line + "\n")
                    record.flush()
                printed += 1
                if count is not None and printed >= count:
                    break
        # --once that printed no snapshot at all could read no source; an empty
        # plugins dir is an answer (no plugins), a dir of failing sockets is not.
        if once and printed == 0 and (resources or sockets or plugin_sockets(paths.plugins_dir, paths.root)):
            return ExitCode.NO_SOURCE
        return ExitCode.OK

    task = asyncio.ensure_future(consume())
    stopper = asyncio.ensure_future(stop.wait())
    closed = asyncio.ensure_future(_until_closed(out))
    try:
        await asyncio.wait({task, stopper, closed}, timeout=duration, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        closed.cancel()
        if closed.done() and not closed.cancelled():
            _quiet_stdout()
        if not task.done():
            task.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    try:
        return await task
    except asyncio.CancelledError:
        return ExitCode.OK  # ended by --duration or a signal: a normal end for a watch
    except ResourceNotServed as e:  # a name that does not exist, as in ls or get
        say(e.message)
        return ExitCode.FINDINGS
    except UnknownTarget as e:
        say(e.message)
        return ExitCode.USAGE
    except NoRights as e:  # as every read command says it: one line, exit 3
        say(f"{e.message}: {NO_RIGHTS}")
        return ExitCode.NO_SOURCE
    except NoPluginsDir as e:
        say(e.message)
        return ExitCode.NO_SOURCE
    except BrokenPipeError:
        # The reader went away (`devctl watch | head`): stop quietly, as Unix tools do.
        _quiet_stdout()
        return ExitCode.OK


# How often a quiet watch looks whether its reader has gone away.
STDOUT_POLL = 0.2


async def _until_closed(stream: IO[str]) -> None:
    """Return once nobody reads ``stream`` any more (``reader_gone``); never for a terminal or a file.

    A closed reader sets no event to wait on: look, then sleep.
    """
    import asyncio

    while not reader_gone(stream):  # noqa: ASYNC110
        await asyncio.sleep(STDOUT_POLL)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush to a closed pipe does not fail again."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("watch")(watch)
