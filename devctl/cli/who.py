"""``devctl who``: which processes hold each device open, in which container and pod, and whether it was given them.

Collects the checkpoint (the device nodes of each Allocate reply), a scan of
``<proc>`` and the CRI runtime's names, joins them in
``devctl.analyze.holders`` and prints one row per process and device.
"""

from __future__ import annotations

from typing import Annotated

import typer

from devctl.cli.common import Output, say
from devctl.cli.complete import targets
from devctl.cli.output import NoHeadersOpt, OutputOpt, QuietOpt, emit, node_snapshot


def _not_found(target: str, known: set[str]) -> list[str]:
    import difflib

    close = difflib.get_close_matches(target, sorted(known), n=1)
    return [
        f"{target}: no such device, device node, resource or driver" + (f" (did you mean {close[0]}?)" if close else "")
    ]


def _unplaced_line(pids: list[int]) -> str:
    """Why ALLOCATED is ``?`` for processes in no known pod: never "outside any pod" without the runtime's word."""
    shown = ", ".join(map(str, pids[:10])) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")
    return (
        f"pid {shown}: in which pod, if any, is unknown (the CRI runtime could not be read), "
        "so whether it may hold the device is unknown"
    )


def who(
    ctx: typer.Context,
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="[DEVICE | /dev/PATH | RESOURCE | DRIVER]",
            help="Only the holders of this device ID, device node, resource or driver.",
            show_default=False,
            autocompletion=targets,
        ),
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Which processes hold each device open, in which container and pod, and whether that container was given it.

    Device nodes come from the Allocate replies in the kubelet's checkpoint and
    from CDI specs (the CDI names of those replies, the prepared DRA claims'
    devices in dra_manager_state); the processes from a scan of <proc>/*/fd
    (root sees every process); container and pod names from the CRI runtime
    (--runtime-endpoint). ALLOCATED `no` is a process using a device its
    container was not given (a privileged pod, a leak); `?` where that is
    unknown (an Allocate reply not decoded; no runtime to say which pod, if
    any, runs the process). A device of which no
    node is known says so on stderr. Exit 1 when TARGET names nothing on this
    node.
    """
    from devctl.analyze.holders import holders_view, known_targets, match_target, without_nodes
    from devctl.model import HOLDER_SOURCES, PLUGINS
    from devctl.render.holders import holders_table, without_nodes_lines

    # The plugins too: their devices that no container was given are named, and said to have no known node.
    snap = node_snapshot(ctx, HOLDER_SOURCES | {PLUGINS})
    rows = holders_view(snap)
    not_found: list[str] = []
    if target is not None:
        rows = tuple(match_target(rows, target))
        known = known_targets(snap)
        if not rows and target not in known:
            not_found = _not_found(target, known)
    bare = without_nodes(snap, target) if target is not None and not not_found else []
    if output not in (Output.json, Output.yaml) and not quiet:
        for line in without_nodes_lines(bare):
            say(line)
        unplaced = sorted({r.pid for r in rows if r.pod is None and r.allocated is None})
        if unplaced:
            say(_unplaced_line(unplaced))
    emit(
        snap,
        HOLDER_SOURCES,
        output,
        {
            "holders": rows,
            "without_nodes": [{"kind": k, "resource": r, "device": d} for k, r, d in bare],
        },
        lambda style: holders_table(rows, style),
        lambda: dict.fromkeys(str(r.pid) for r in rows),
        no_headers=no_headers,
        quiet=quiet,
        not_found=not_found,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("who")(who)
