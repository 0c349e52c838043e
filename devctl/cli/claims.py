"""``devctl claims`` and ``devctl cdi``: the DRA claims on the node, and CDI names resolved as the runtime would.

Thin commands like those of ``cli/read.py``: collect (or ``--from FILE``),
analyse (``analyze/claims.py``, ``analyze/cdi.py``), render (``render/dra.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from devctl.cli.common import Output, fail
from devctl.cli.complete import claim_names, namespaces
from devctl.cli.output import (
    AllNamespacesOpt,
    NoHeadersOpt,
    OutputOpt,
    QuietOpt,
    SortByOpt,
    WatchOpt,
    emit,
    node_snapshot,
    rewatch,
    sort_rows,
)


def _unknown(asked: list[str] | None, found: set[str], known: list[str], what: str) -> list[str]:
    """A line per name asked for and not found, with the likeliest spelling among ``known``."""
    from devctl.base.names import likely

    lines = []
    for name in dict.fromkeys(asked or ()):
        if name not in found:
            close = likely(name, known)  # in another case, by its last path part, or the closest spelling
            lines.append(f"{what} {name} not found" + (f" (did you mean {close}?)" if close else ""))
    return lines


def claims(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None,
        typer.Argument(
            help="Only these claims (NAME or NAMESPACE/NAME).", show_default=False, autocompletion=claim_names
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace.", autocompletion=namespaces)
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
    sort_by: SortByOpt = None,
    watch: WatchOpt = False,
    all_namespaces: AllNamespacesOpt = False,
) -> None:
    """DRA claims on the node: state (prepared, checkpointed, stale, driver-missing), devices, health, NUMA, pods."""
    from devctl import analyze
    from devctl.analyze.claims import claims_view
    from devctl.render.dra import claims_table

    if all_namespaces and namespace is not None:
        fail("-A and -n: every namespace or one, not both")

    def once() -> None:
        shown = {analyze.DRA_CHECKPOINT, analyze.POD_RESOURCES}
        # The DRA drivers alone (liveness, health), not every device plugin, and pod-resources' List alone,
        # not the allocatable devices: the view shows neither.
        read = {analyze.DRA_CHECKPOINT, analyze.POD_LIST, analyze.DRA_DRIVERS, analyze.CDI, analyze.IDENTITIES}
        snap = node_snapshot(ctx, read)
        rows = sort_rows(claims_view(snap, namespace=namespace, names=names), sort_by)
        everything = claims_view(snap, namespace=namespace) if names else rows  # once when nothing is named
        found = {n for r in rows for n in (r.name, f"{r.namespace}/{r.name}")}
        emit(
            snap,
            shown,
            output,
            {"claims": rows},
            lambda style: claims_table(tuple(rows), style),
            lambda: (f"{r.namespace}/{r.name}" for r in rows),
            no_headers=no_headers,
            quiet=quiet,
            not_found=_unknown(names, found, sorted({r.name for r in everything}), "claim"),
        )

    rewatch(watch, once)


def cdi(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None, typer.Argument(help="Only these CDI names (vendor/class=name).", show_default=False)
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """CDI spec dirs and files, and every CDI name in use resolved to device nodes, PCI address and NUMA node."""
    from devctl import analyze
    from devctl.analyze.cdi import cdi_view
    from devctl.render.dra import cdi_table

    shown = {analyze.CDI, analyze.CHECKPOINT, analyze.DRA_CHECKPOINT}
    # The pods' claims name CDI devices; the allocatable devices name none (POD_LIST: the List alone).
    snap = node_snapshot(ctx, {*shown, analyze.POD_LIST, analyze.IDENTITIES})
    every = cdi_view(snap)
    # A name asked for that no spec defines and nothing uses does not exist here: it gets no row, only
    # the one line that says so with a likely name, and the command exits 1, as for a claim.
    known = {n.name for n in every.names} | {f"{s.kind}={d}" for s in every.specs if s.kind for d in s.devices}
    missing = [n for n in dict.fromkeys(names or ()) if n not in known]
    view = every
    if names:
        found = [n for n in names if n in known]
        view = replace(every, names=cdi_view(snap, found).names if found else ())
    emit(
        snap,
        shown,
        output,
        view,
        lambda style: cdi_table(view, style),
        lambda: (n.name for n in view.names),
        no_headers=no_headers,
        quiet=quiet,
        not_found=_unknown(missing, set(), sorted(known), "CDI name"),
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    for command in (claims, cdi):
        app.command(command.__name__)(command)
