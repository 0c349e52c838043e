"""``devctl record`` (the node journal written) and ``devctl events`` (the journal and the kernel log read).

Only typer and the standard library at module level; the core is imported when a command runs.
Exit codes (cli.md): ``record`` 0 when stopped by Ctrl-C/SIGTERM, 1 when the journal is refused
(another recorder holds it, not a journal) or recording stopped (a full disk), 2 usage; ``events``
0, 1 when a SUBJECT matched nothing, 3 when neither the journal nor the kernel log could be read.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, fail, options, run, say

if TYPE_CHECKING:
    from devctl.core.history import EventsAnswer, JournalWriter
    from devctl.model import NodePaths


class EventsOutput(str, Enum):
    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


JournalOpt = Annotated[
    str | None,
    typer.Option("--journal", metavar="PATH", help="The journal file [default: <root>/var/lib/devctl/journal]."),
]
KmsgOpt = Annotated[
    str | None,
    typer.Option(
        "--kmsg", metavar="PATH", help="The kernel log, or a saved file in its format [default: <root>/dev/kmsg]."
    ),
]


def record(
    ctx: typer.Context,
    journal: JournalOpt = None,
    max_size: Annotated[
        str, typer.Option("--max-size", metavar="SIZE", help="The journal's bound; the oldest records go first.")
    ] = "64Mi",
    kmsg: KmsgOpt = None,
    udev: Annotated[
        bool, typer.Option("--udev", help="Record kernel device events (PCI, DRM, net, IB, VFIO) too.")
    ] = False,
) -> None:
    """Follow the node as `watch` does and append each device event to the journal, until Ctrl-C or SIGTERM.

    Every device plugin and DRA driver (added, removed, health, topology), the kubelet (restarts,
    allocations and frees), and the kernel log's device lines. A second recorder of the same
    journal is refused.
    """
    from devctl.base.units import parse_quantity
    from devctl.core.history import JournalError, check_bound, default_journal, default_kmsg, open_journal

    opts = options(ctx)
    if opts.from_file:
        fail("--from: record follows the live node; a snapshot file has no events")
    paths = opts.paths()
    path = journal or default_journal(paths)
    try:  # every option checked before anything is made on the node
        bound = parse_quantity(max_size)
        check_bound(path, bound)
    except ValueError:
        fail(f"--max-size {max_size}: not a size (64Mi, 1Gi, 100000000)")
    except JournalError as e:
        fail(f"--max-size {max_size}: {e.reason}")
    try:  # the default journal stays under --root: no link on its way may lead out of it
        writer = open_journal(path, bound, make_dir=True, root=None if journal else paths.root)
    except JournalError as e:
        fail(str(e), ExitCode.FINDINGS)
    say(f"recording to {path}")
    code = run(_record(paths, writer, default_kmsg(paths, kmsg), opts.timeout, udev))
    raise typer.Exit(int(code))


async def _record(paths: NodePaths, writer: JournalWriter, kmsg: str, timeout: float, udev: bool) -> ExitCode:
    import asyncio
    import signal

    from devctl.core.recorder import Recorder
    from devctl.core.watch import WatchError

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    recorder = Recorder(writer, on_notice=say)
    try:
        stats = await recorder.run(paths, stop, kmsg=kmsg, timeout=timeout, udev=udev)
    except WatchError as e:
        say(e.message)
        return ExitCode.NO_SOURCE
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if recorder.failure is not None:
        say(str(recorder.failure))
        return ExitCode.FINDINGS
    say(f"recorded {stats.written} events ({stats.coalesced} repeats counted, {stats.dropped} dropped)")
    return ExitCode.OK


def events(
    ctx: typer.Context,
    subjects: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SUBJECT", show_default=False, help="A resource, driver, device, PCI address or pod (ns/name)."
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="DURATION|TIME", help="From this long ago (10m, 2h) or this time.")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", metavar="TIME", help="Up to this time.")] = None,
    journal: JournalOpt = None,
    kmsg: KmsgOpt = None,
    follow: Annotated[
        bool, typer.Option("--watch", "-w", help="Go on following the journal and the kernel log.")
    ] = False,
    output: Annotated[
        EventsOutput, typer.Option("--output", "-o", help="table, wide, json or yaml.")
    ] = EventsOutput.table,
) -> None:
    """What happened to the node's devices, in time order: the journal and the kernel log, each with its source."""
    from datetime import datetime, timezone

    from devctl.core.history import parse_when, read_events_live

    opts = options(ctx)
    if opts.from_file:
        fail("--from: events reads the node's journal and kernel log; a snapshot file has neither")
    now = datetime.now(timezone.utc)
    try:
        start = parse_when(since, now) if since else None
        end = parse_when(until, now) if until else None
    except ValueError as e:
        fail(f"--since/--until {e}")
    paths = opts.paths()
    # The live kernel lines joined to their device and its holders at each line's time (a snapshot under --timeout).
    answer = run(
        read_events_live(
            paths, timeout=opts.timeout, journal=journal, kmsg=kmsg, since=start, until=end, subjects=subjects or ()
        )
    )
    _show(answer, output)
    if follow:
        run(_follow(paths, journal, kmsg, subjects or [], output, answer, opts.timeout))
    if not answer.journal_found and not answer.kernel_read:
        raise typer.Exit(int(ExitCode.NO_SOURCE))
    if subjects and not answer.events:
        say(f"no events of {', '.join(subjects)}")
        raise typer.Exit(int(ExitCode.FINDINGS))
    raise typer.Exit(int(ExitCode.OK))


def _show(answer: EventsAnswer, output: EventsOutput) -> None:
    from devctl.cli.common import Output
    from devctl.cli.output import table_style, write_structured
    from devctl.render.history import events_table

    if not answer.journal_found:
        say(f"no journal at {answer.journal.path}: showing the kernel log only")
    for notice in answer.notices:
        say(notice)
    for error in answer.errors:
        say(error.message)
    if output in (EventsOutput.json, EventsOutput.yaml):
        write_structured(Output(output.value), answer.body(), answer.errors)
    else:
        sys.stdout.write(events_table(answer.events, table_style(Output(output.value), False)))
    sys.stdout.flush()


async def _follow(
    paths: NodePaths,
    journal: str | None,
    kmsg: str | None,
    subjects: list[str],
    output: EventsOutput,
    answer: EventsAnswer,
    timeout: float,
) -> None:
    import asyncio
    import contextlib
    import signal

    from devctl.cli.common import Output
    from devctl.cli.output import table_style
    from devctl.core.history import follow_events
    from devctl.model.serial import json_line
    from devctl.render.history import event_line

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    style = table_style(Output.wide if output == EventsOutput.wide else Output.table, True)

    async def consume() -> None:
        async with contextlib.aclosing(
            follow_events(
                paths,
                journal=journal,
                kmsg=kmsg,
                subjects=subjects,
                after=answer.last_seq,
                timeout=timeout,
                kernel_after=answer.kernel_seq,
            )
        ) as items:
            async for item in items:
                if isinstance(item, str):
                    say(item)
                    continue
                text = json_line(item) if output in (EventsOutput.json, EventsOutput.yaml) else event_line(item, style)
                sys.stdout.write(text + "\n")
                sys.stdout.flush()

    task = asyncio.ensure_future(consume())
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, stopper):
            t.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("record")(record)
    app.command("events")(events)
