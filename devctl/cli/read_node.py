"""The read commands about the node as a whole: topo, plugins, checkpoint, snapshot.

Registered with the others by devctl.cli.read's ``register`` (devctl.cli.lazy maps their names to "read").
Only typer and the standard library at module level, as in devctl.cli.read.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, Output, fail
from devctl.cli.output import (
    NoHeadersOpt,
    OutputOpt,
    QuietOpt,
    absent_line,
    emit,
    folded,
    node_snapshot,
    refused_line,
)
from devctl.cli.topo_pci import PCI_HELP, topo_pci

if TYPE_CHECKING:
    pass


def dra_sources(numa: bool = True) -> set[str]:
    """Read beside a view's own sources for its DRA rows (claims from dra_manager_state, NUMA through CDI specs).

    The CDI specs only when the view shows NUMA nodes (``numa``): a node with
    1,000 claims has 1,000 spec files, most of `ls`'s cost (docs/dra.md).
    A function, not a constant: the names live in devctl.model, which the commands import and `--help` does not.
    """
    from devctl import analyze

    return {analyze.DRA_CHECKPOINT, analyze.IDENTITIES} | ({analyze.CDI} if numa else set())


def topo(
    ctx: typer.Context,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
    pci: Annotated[bool, typer.Option("--pci", help=PCI_HELP + ".")] = False,
) -> None:
    """NUMA nodes: CPUs (allocatable, exclusive, shared pool), memory, devices; alignment per container."""
    from devctl import analyze
    from devctl.analyze.kubeletstate import kubelet_state_view
    from devctl.model.serial import to_plain
    from devctl.render.kubeletstate import kubelet_state_table
    from devctl.render.table import topology_table

    # The checkpoint names the resource behind each plugin socket when pod-resources cannot.
    sources = {
        analyze.TOPOLOGY,
        analyze.POD_RESOURCES,
        analyze.PLUGINS,
        analyze.CHECKPOINT,
        analyze.KUBELET_STATE,
        analyze.IDENTITIES,
    }
    snap = node_snapshot(ctx, sources | dra_sources())
    view = analyze.topology_view(snap)
    state = kubelet_state_view(snap)
    snap, extra, pcie_table = topo_pci(ctx, snap, pci=pci, structured=output in (Output.json, Output.yaml))
    emit(
        snap,
        {analyze.TOPOLOGY, analyze.POD_RESOURCES},
        output,
        {**to_plain(view), "kubelet_state": to_plain(state), **extra},
        lambda style: topology_table(view, style) + kubelet_state_table(state, style) + pcie_table(style),
        lambda: (str(n.id) for n in view.numa_nodes if n.id is not None),
        no_headers=no_headers,
        quiet=quiet,
    )


def plugins(
    ctx: typer.Context,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Every socket in the plugins dir and plugins_registry/: resource, status, devices, latency."""
    from devctl import analyze
    from devctl.render.table import plugins_table

    sources = {analyze.PLUGINS, analyze.POD_RESOURCES, analyze.CHECKPOINT}
    snap = node_snapshot(ctx, sources)
    view = analyze.plugins_view(snap)
    emit(
        snap,
        sources,
        output,
        view,
        lambda style: plugins_table(view, style),
        lambda: (p.socket for p in view.plugins),
        no_headers=no_headers,
        quiet=quiet,
    )


def checkpoint(
    ctx: typer.Context,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """The device manager and DRA checkpoints decoded: checksum, format, entries with their allocation and pod.

    Exit 3 when neither checkpoint can be read: they are all this command shows.
    """
    from devctl import analyze
    from devctl.render.dra import dra_checkpoint_lines
    from devctl.render.table import checkpoint_table

    # DRA: dra_manager_state, with the drivers (a claim whose driver is gone) and CDI (its NUMA nodes).
    dra = {analyze.DRA_CHECKPOINT, analyze.PLUGINS, analyze.CDI}
    snap = node_snapshot(ctx, {analyze.CHECKPOINT, analyze.POD_RESOURCES, analyze.IDENTITIES, *dra})
    view = analyze.checkpoint_view(snap)
    emit(
        snap,
        {analyze.CHECKPOINT, analyze.DRA_CHECKPOINT},
        output,
        view,
        lambda style: checkpoint_table(view, style) + dra_checkpoint_lines(view.dra, style),
        lambda: dict.fromkeys(e.pod_uid for e in view.entries),
        no_headers=no_headers,
        quiet=quiet,
    )


def snapshot(
    ctx: typer.Context,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", metavar="FILE", help="Write here instead of stdout.", show_default=False),
    ] = None,
    redact: Annotated[
        bool, typer.Option("--redact", help="Hide process command lines and the env values of Allocate replies.")
    ] = False,
) -> None:
    """Every source at once as one JSON document, for `devctl --from FILE ...` anywhere else."""
    from devctl.analyze import ALL_SOURCES, sources_read
    from devctl.core.collect import dump_snapshot
    from devctl.model import EXTRA_SOURCES
    from devctl.render.table import warnings

    snap = node_snapshot(ctx, ALL_SOURCES | EXTRA_SOURCES)
    if redact:
        from devctl.analyze.redact import redact as hide

        snap = hide(snap)
    denied = refused_line(snap, ALL_SOURCES)
    absent = absent_line(snap, ALL_SOURCES)
    sys.stderr.write(denied + absent + warnings(folded(snap.errors, denied, absent)))
    if file is None:
        dump_snapshot(snap, sys.stdout)
    else:
        try:
            with open(file, "w", encoding="utf-8") as f:
                dump_snapshot(snap, f)
        except OSError as e:
            fail(f"cannot write {file}: {e.strerror or e}", ExitCode.USAGE)
    if denied or not sources_read(snap):
        raise typer.Exit(int(ExitCode.NO_SOURCE))
