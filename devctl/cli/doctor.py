"""``devctl doctor``: every check on the node, as findings that each say what to do.

The command collects every source (or loads ``--from FILE``), hands the snapshot
to ``devctl.analyze.doctor.diagnose`` and prints the findings. Only typer and the
standard library are imported at module level.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, Output, options, run
from devctl.cli.output import NoHeadersOpt, OutputOpt, node_snapshot, refused_line, table_style, write_structured
from devctl.model.findings import Severity

if TYPE_CHECKING:
    pass


def doctor(
    ctx: typer.Context,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    fail_on: Annotated[
        Severity, typer.Option("--fail-on", help="Exit 1 when a finding is this severe or more.", case_sensitive=False)
    ] = Severity.ERROR,
) -> None:
    """Run every check on the node and say what to do about each finding. Exit 1 on an error finding.

    Checks the kubelet's sockets, pod-resources, every plugin socket (stale,
    silent, forbidden, speaking another API), resources without a plugin,
    unhealthy and missing devices, the checkpoint (checksum, format, entries of
    pods that are gone), NUMA alignment and the shared CPU pool, and whether
    each plugin's healthy devices are the ones the kubelet offers (read twice,
    a second apart, when they are not). Each finding's hint is the indented line
    under it (`wide`: a HINT column). `-o name`: CODE/SUBJECT per line.
    Exit 3 when no source could be read at all, or devctl may not read the
    kubelet's (run it as root).
    """
    from devctl.analyze import ALL_SOURCES, errors_of, sources_read
    from devctl.analyze.doctor import fails_on
    from devctl.analyze.holders import without_absent_runtime
    from devctl.core.doctor import examine
    from devctl.model import EXTRA_SOURCES
    from devctl.render.table import findings_table

    opts = options(ctx)
    snapshot = without_absent_runtime(node_snapshot(ctx, ALL_SOURCES | EXTRA_SOURCES))
    findings = run(examine(snapshot, opts.timeout, live=not opts.from_file))
    denied = refused_line(snapshot, ALL_SOURCES)
    if output in (Output.json, Output.yaml):
        write_structured(output, {"findings": findings}, errors_of(snapshot))
    elif output == Output.name:
        from devctl.render.table import names

        sys.stdout.write(names(f"{f.code}/{f.subject}" for f in findings))
    else:
        # Every source error is a finding too, so the table needs no warning lines.
        import shutil

        # Messages and hints wrap at the terminal's width (COLUMNS, else 80 when not a terminal).
        text = findings_table(findings, table_style(output, no_headers), shutil.get_terminal_size().columns)
        if text:
            sys.stdout.write(text)
        elif not denied:
            print("No problems found.", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.write(denied)
    if denied or not sources_read(snapshot):
        raise typer.Exit(int(ExitCode.NO_SOURCE))
    if fails_on(findings, fail_on):
        raise typer.Exit(int(ExitCode.FINDINGS))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("doctor")(doctor)
