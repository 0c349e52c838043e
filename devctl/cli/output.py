"""What the commands that print a view of the node share: getting the snapshot, and printing it.

A view command collects (or loads ``--from FILE``), analyses, and prints in one
of the ``-o`` forms with the source errors beside it; ``read`` and ``doctor``
differ only in their views. Only typer and the standard library are imported
here at module level: this module is on the start-up path of ``devctl --help``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.cli.common import NO_RIGHTS, ExitCode, Output, fail, options, reader_gone, run, say
from devctl.fast.interpreter import without_cyclic_gc

if TYPE_CHECKING:
    from devctl.model import NodeSnapshot, SourceError
    from devctl.render.table import TableStyle

OutputOpt = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="table, wide (more columns), json, yaml or name (as -q).", case_sensitive=False
    ),
]
NoHeadersOpt = Annotated[bool, typer.Option("--no-headers", help="Tables without their header line.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Names only, one per line.")]
SortByOpt = Annotated[
    str | None,
    typer.Option(
        "--sort-by", metavar="FIELD", help="Sort the rows by this field of -o json's rows (e.g. free, numa_nodes)."
    ),
]
WatchOpt = Annotated[
    bool,
    typer.Option("--watch", "-w", help="Read again every 2 s and print again when the answer changes (Ctrl-C ends)."),
]
AllNamespacesOpt = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="Every namespace (the default; kubectl's habit).")
]


# How often -w reads the node again: what a person watching a table notices, at one read's cost.
REWATCH_EVERY = 2.0
# How often, meanwhile, it looks whether its reader has gone away.
READER_POLL = 0.2


def rewatch(watch: bool, once: Callable[[], None]) -> None:
    """``-w``: run ``once`` (a view command's body) again and again, printing only when its output changes.

    As ``kubectl get -w``: the first answer at once, then a new table whenever
    the node's answer differs from the last one printed (stdout and stderr
    together, so a warning that comes or goes counts). Without ``watch`` it is
    ``once()``. Ctrl-C or SIGTERM ends it with exit 0, a normal end for a watch.

    Each answer is read and printed with the cyclic garbage collector paused
    (``without_cyclic_gc``).
    """
    if not watch:
        with without_cyclic_gc(last=True):
            once()
        return
    import contextlib
    import io
    import signal
    import time

    # Ctrl-C and SIGTERM raise KeyboardInterrupt wherever it is. Not left to asyncio.run, which turns
    # Ctrl-C into a cancellation of the read: a cancellation that a library swallows is a Ctrl-C lost,
    # and the watch would go on. (A handler other than the default one is left alone by asyncio.run.)
    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    last: tuple[str, str] | None = None
    try:
        while True:
            out, err = io.StringIO(), io.StringIO()
            usage = None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), without_cyclic_gc():
                try:
                    once()
                except typer.Exit as e:  # an exit code is this answer's, not the watch's; a usage error ends it
                    usage = e if e.exit_code == ExitCode.USAGE else None
            answer = (out.getvalue(), err.getvalue())
            if usage is not None:
                sys.stderr.write(answer[1])
                raise usage
            if answer != last:
                if last is not None and answer[0]:
                    sys.stdout.write("\n")
                sys.stderr.write(answer[1])
                sys.stdout.write(answer[0])
                sys.stdout.flush()
                last = answer
            # A quiet node prints nothing more: look for a reader that went away (`ls -w | head -1`) meanwhile.
            deadline = time.monotonic() + REWATCH_EVERY
            while (left := deadline - time.monotonic()) > 0:
                if reader_gone(sys.stdout):
                    # The interpreter's last flush must not fail on the closed pipe again.
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                    raise typer.Exit(int(ExitCode.OK))
                time.sleep(min(left, READER_POLL))
    except KeyboardInterrupt:
        raise typer.Exit(int(ExitCode.OK)) from None


def one_answer(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` (a read that answers once and exits) run as rewatch runs ``once``: the collector paused."""
    if getattr(command, "one_answer", False):
        return command  # the group handed out this command before (completion, help)

    @functools.wraps(command)
    def paused(*args: Any, **kwargs: Any) -> Any:
        with without_cyclic_gc(last=True):
            return command(*args, **kwargs)

    paused.one_answer = True  # type: ignore[attr-defined]
    return paused


# The headers of the tables that are not their JSON field's name -> that field: ls's short counts
# (render/table.py's RESOURCE_COUNTS, the TUI's), the POD and CLAIM of a pod's or claim's row, claims' DRIVER.
_HEADERS = {
    "cap": "capacity",
    "alloc": "allocatable",
    "used": "allocated",
    "bad": "unhealthy",
    "numa": "numa_nodes",
    "pod": "name",
    "claim": "name",
    "driver": "drivers",
}


def _pci(name: str) -> Callable[[Any], Any]:
    return lambda row: getattr(row.pci, name) if row.pci is not None else None


def _options(name: str) -> Callable[[Any], Any]:
    return lambda row: getattr(row.options, name) if row.options is not None else None


def _claim_numa(row: Any) -> Any:
    return sorted({n for d in row.devices for n in d.numa_nodes if n >= 0}) or None


def _claim_healthy(row: Any) -> Any:
    if any(d.health is None for d in row.devices):
        return None
    return sum(d.health == "Healthy" for d in row.devices)


# The columns that are no field of -o json's rows -> (the field that says which rows have it, the value to
# sort by): the PCI function's parts of devices -o wide, ls -o wide's plugin options, a pod's first container,
# its devices and CPUs counted, a claim's healthy devices and NUMA nodes.
_COMPUTED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "vendor": ("pci", lambda row: row.pci and (row.pci.vendor or row.pci.vendor_id)),
    "model": ("pci", lambda row: row.pci and (row.pci.device or row.pci.device_id)),
    "driver": ("pci", _pci("driver")),
    "pre_start": ("options", _options("pre_start_required")),
    "preferred": ("options", _options("get_preferred_allocation_available")),
    "container": ("containers", lambda row: ",".join(c.name for c in row.containers)),
    "devices": ("containers", lambda row: sum(len(d.ids) for c in row.containers for d in c.devices)),
    "cpus": ("containers", lambda row: sum(len(c.cpu_ids) for c in row.containers)),
    "healthy": ("duplicate_devices", _claim_healthy),
    "numa": ("duplicate_devices", _claim_numa),
}


def sort_rows(rows: Sequence[Any], field: str | None) -> list[Any]:
    """``--sort-by FIELD``: rows (dataclasses) ordered by one field, unknown values last; usage error for no such field.

    FIELD is the key of ``-o json``'s rows; kubectl's JSONPath form ``{.free}`` or
    ``.free`` is taken too, and so is any column as the table heads it, in any case (``FREE``, ``NUMA``,
    ``ls``'s short ``CAP ALLOC USED BAD``, ``pods``' ``POD``, ``CONTAINER``, ``CPUS``). Numbers sort as
    numbers, everything else as text.
    """
    import dataclasses

    if field is None or not rows:
        return list(rows)
    key = field.strip("{}").lstrip(".").replace("-", "_").lower()
    fields = [f.name for f in dataclasses.fields(rows[0])]
    if key not in fields and _HEADERS.get(key) in fields:
        key = _HEADERS[key]
    computed = _COMPUTED.get(key)
    if key in fields:
        value_of: Callable[[Any], Any] = lambda row: getattr(row, key)  # noqa: E731
    elif computed is not None and computed[0] in fields:
        value_of = computed[1]
    else:
        fail(f"--sort-by {field}: no such field; one of {', '.join(fields)}")

    def order(row: Any) -> tuple[bool, int, Any]:
        value = value_of(row)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return (value is None, 0, value)
        return (value is None or value == () or value == [], 1, str(value))

    return sorted(rows, key=order)


def node_snapshot(ctx: typer.Context, want: Iterable[str]) -> NodeSnapshot:
    """The live node's sources in ``want``, or the ``--from`` snapshot with the errors of those sources."""
    from devctl.analyze import only_sources
    from devctl.cli.progress import collect_saying_what_waits
    from devctl.core.collect import SnapshotError, load_snapshot
    from devctl.core.paths import looks_like_a_node

    opts = options(ctx)
    if opts.from_file:
        try:
            whole = load_snapshot(opts.from_file)
        except SnapshotError as e:
            fail(f"--from {e}", ExitCode.NO_SOURCE)
        ctx.meta[_NO_PLUGINS_DIR] = no_plugins_dir(whole)  # before only_sources drops that error
        return only_sources(whole, set(want))
    snapshot = run(collect_saying_what_waits(opts.paths(), opts.timeout, set(want)))
    ctx.meta[_NO_PLUGINS_DIR] = no_plugins_dir(snapshot) or not looks_like_a_node(snapshot.paths)
    return snapshot


# ctx.meta: whether the node read had no device-plugins dir (see absent_line).
_NO_PLUGINS_DIR = "devctl.no_plugins_dir"


def no_plugins_dir(snapshot: NodeSnapshot) -> bool:
    """Whether the snapshot says its node had no device-plugins dir (devctl.analyze.sources.no_plugins_dir)."""
    from devctl.analyze.sources import no_plugins_dir as said

    return said(snapshot)


def refused_line(snapshot: NodeSnapshot, shown: set[str] | frozenset[str]) -> str:
    """The "run as root" line (with its newline) when the kubelet's sources among ``shown`` all refused devctl."""
    from devctl.analyze import refused

    return f"devctl: {NO_RIGHTS}\n" if refused(snapshot, shown) else ""


def folded(errors: Iterable[SourceError], denied: str, absent: str) -> tuple[SourceError, ...]:
    """The warnings a table still shows beside the "run as root" or "is this a node?" line: not the ones it says.

    Without rights, each socket's "permission denied"; at a root that is no node,
    each "no such file or socket" (the sysfs, /proc and CRI socket under a wrong
    root are just as missing).
    """
    from devctl.model import ErrorKind

    said = {ErrorKind.PERMISSION_DENIED} if denied else set()
    if absent:
        said.add(ErrorKind.MISSING)
    return tuple(e for e in errors if e.kind not in said)


def absent_line(snapshot: NodeSnapshot, shown: set[str] | frozenset[str]) -> str:
    """The "is this a node?" line (with its newline) when the kubelet's sources among ``shown`` gave nothing
    and its device-plugins dir is not there; else "".

    Then every "no such socket" and "no such file" follows from that one fact,
    most likely a wrong ``--root``: a person needs that line, as ``watch`` and
    ``call`` say it, not one warning per path (``-o json`` keeps them all in
    ``errors[]``). Whether the dir was there is noted by ``node_snapshot``, from
    the live node or the whole ``--from`` file, as commands that do not list the
    dir (``pods``) do not have its error.
    """
    from devctl.analyze import KUBELET_SOURCES, source_of, sources_read
    from devctl.cli.common import current_context
    from devctl.core.paths import not_a_node
    from devctl.model import ErrorKind

    kubelet = KUBELET_SOURCES & shown
    if not kubelet or sources_read(snapshot) & kubelet:
        return ""
    if any(source_of(e) in kubelet and e.kind != ErrorKind.MISSING for e in snapshot.errors):
        return ""  # something is there and failed otherwise: its own warning says more
    ctx = current_context()
    if no_plugins_dir(snapshot) or (ctx is not None and ctx.meta.get(_NO_PLUGINS_DIR)):
        return f"devctl: {not_a_node(snapshot.paths)}\n"
    return ""


def table_style(output: Output, no_headers: bool) -> TableStyle:
    """How a table is drawn for this invocation: wide or not, headers or not, colour only on a terminal."""
    from devctl.render.style import use_color
    from devctl.render.table import TableStyle

    return TableStyle(wide=output == Output.wide, headers=not no_headers, color=use_color(sys.stdout))


def write_structured(output: Output, body: Any, errors: Iterable[SourceError] | None) -> None:
    """A view as JSON or YAML on stdout, with ``errors`` appended when given."""
    from devctl.render import structured

    if output == Output.json:
        sys.stdout.writelines(structured.json_pieces(body, errors))  # never the whole text at once
    else:
        sys.stdout.write(structured.to_yaml(structured.document(body, errors)))


def emit(
    snapshot: NodeSnapshot,
    shown: Iterable[str],
    output: Output,
    body: Any,
    table: Callable[[TableStyle], str],
    names: Callable[[], Iterable[str]],
    *,
    no_headers: bool,
    quiet: bool,
    not_found: Sequence[str] = (),
) -> None:
    """Print one view in the chosen form, warnings on stderr; exit 3 when none of ``shown`` could be read.

    ``not_found`` are lines for what the command line named and the node does
    not have: printed after the view, then exit 1, as ``kubectl get`` does for
    a name it cannot find.
    """
    from devctl.analyze import HOST_ONLY_SOURCES, errors_of, sources_read

    errors = errors_of(snapshot)
    denied = refused_line(snapshot, set(shown))
    absent = absent_line(snapshot, set(shown))
    read = sources_read(snapshot) & set(shown)
    if absent:
        # No kubelet at this root (the "is this a node?" line): what the host alone gave (sysfs, /proc) is no
        # node's answer, so topo and who exit 3 there as every read command does.
        read -= HOST_ONLY_SOURCES
    unread = bool(denied) or not read
    if output in (Output.json, Output.yaml):
        write_structured(output, body, errors)
        sys.stderr.write(denied + absent)
    else:
        # The table renderer (and tabulate) only here: -o json and yaml never load them.
        from devctl.render import table as tables
        from devctl.render.style import use_color

        sys.stderr.write(denied + absent + tables.warnings(folded(errors, denied, absent), use_color(sys.stderr)))
        if quiet or output == Output.name:
            sys.stdout.write(tables.names(names()))
        else:
            text = table(table_style(output, no_headers))
            if text:
                sys.stdout.write(text)
            elif not unread and not not_found:
                # Only a node that answered can be said to have nothing; when nothing
                # answered, the warnings above are the whole story.
                print("No resources found.", file=sys.stderr)
    sys.stdout.flush()
    if unread:
        raise typer.Exit(int(ExitCode.NO_SOURCE))
    if not_found:
        for line in not_found:
            say(line)
        raise typer.Exit(int(ExitCode.FINDINGS))
