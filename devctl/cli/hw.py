"""``devctl hw``: one row per physical device (PCI function) with the logical devices on it and who holds each.

The join is devctl.analyze.physical's; this module collects, filters by the PCI addresses named, and prints.
What leads to no PCI function, and functions that left sysfs, are one ``warning: hw:`` line each (in JSON, in
``errors``), the rest still shown. On a live node the PCI tree is read too: a function whose class or NUMA node
cannot be read is shown with it unknown (one ``warning: pci-tree:`` line), and a sysfs that lists no function
is one line, the devices' physical side unknown (nothing is said gone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, Output, fail, options, run
from devctl.cli.output import NoHeadersOpt, OutputOpt, QuietOpt, emit, node_snapshot

if TYPE_CHECKING:
    from devctl.analyze.physical import PhysicalDevice, PhysicalView
    from devctl.model import SourceError
    from devctl.render.table import TableStyle

HW_SOURCE = "hw"  # the ``source`` of hw's own lines among the errors


def _sources() -> set[str]:
    from devctl import model

    return {
        model.POD_RESOURCES,
        model.PLUGINS,
        model.CHECKPOINT,
        model.TOPOLOGY,
        model.CDI,
        model.DRA_CHECKPOINT,
        model.IDENTITIES,
    }


def _lines(view: PhysicalView) -> list[SourceError]:
    """hw's own warnings: each unresolved logical device, each function gone from sysfs, each bound reached."""
    from devctl.model import ErrorKind, SourceError

    folded: dict[tuple[str, str], list[str]] = {}  # (resource, reason) -> IDs: one line for a plugin's many
    for u in view.unresolved:
        folded.setdefault((u.logical.resource, u.reason), []).append(u.logical.id)
    out = []
    for (resource, reason), ids in folded.items():
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        out.append(SourceError(HW_SOURCE, f"{resource} {shown}: {reason}", ErrorKind.OTHER, resource))
    for p in view.devices:
        if p.pci in view.gone:
            on = ", ".join(f"{d.resource} {d.id}" for d in p.logical[:3]) + (" …" if len(p.logical) > 3 else "")
            out.append(
                SourceError(HW_SOURCE, f"{p.pci}: sysfs no longer lists it ({on} on it)", ErrorKind.MISSING, p.pci)
            )
    out += [SourceError(HW_SOURCE, line, ErrorKind.TOO_LARGE) for line in view.omitted]
    return out


def _holders(p: PhysicalDevice) -> str:
    pods = dict.fromkeys(f"{h.namespace}/{h.pod}" for d in p.logical for h in d.holders or ())
    unknown = any(d.holders is None for d in p.logical)
    text = ",".join(pods)
    return text + (",?" if unknown and text else "?" if unknown else "")


def hw_table(devices: tuple[PhysicalDevice, ...], style: TableStyle) -> str:
    """PCI, CLASS, NUMA, MODEL, LOGICAL (count), HOLDERS (pods); MODEL and HOLDERS cut to fit 80 columns."""
    from devctl.render.table import grid

    rows = [
        (
            p.pci,
            p.class_,
            None if p.numa_node is None or p.numa_node < 0 else str(p.numa_node),
            p.model or (f"{p.vendor_id}:{p.device_id}" if p.vendor_id and p.device_id else None),
            str(len(p.logical)),
            _holders(p),
        )
        for p in devices
    ]
    return grid(["pci", "class", "numa", "model", "logical", "holders"], rows, style, cut=(3, 5))


def hw(
    ctx: typer.Context,
    addresses: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PCI]...", help="Only these PCI functions (e.g. 0000:3b:00.0 or 3b:00.0).", show_default=False
        ),
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """One row per physical device (PCI function): the logical devices on it and who holds each.

    Device-plugin IDs, DRA devices and CDI names are joined to PCI functions
    through the device nodes they are given (major:minor to <sysfs>/dev/char),
    an ID that is a PCI address, and NVIDIA's time-slicing replicas
    (<id>::<n> are all the GPU <id> is on). LOGICAL counts them; HOLDERS are
    the pods holding any (`?` where pod-resources could not be read). A
    logical device that leads to no PCI function, and a function gone from
    sysfs, are one warning line each. Exit 1 when a PCI address named is not
    on this node.
    """
    from dataclasses import replace

    from devctl.core.physical import physical
    from devctl.model.pci import normalize_pci_address

    wanted: list[str] = []
    for text in addresses or ():
        address = normalize_pci_address(text)
        if address is None:
            fail(f"{text}: not a PCI address (like 0000:3b:00.0)", ExitCode.USAGE)
        wanted.append(address)
    sources = _sources()
    snap = node_snapshot(ctx, sources)
    opts = options(ctx)  # on a live node the allocations' device nodes are traced too (stat only)
    view, traced = run(physical(snap, opts.timeout, live=not opts.from_file))
    devices = view.devices
    not_found: list[str] = []
    if wanted:
        devices = tuple(p for p in devices if p.pci in wanted)
        shown = {p.pci for p in devices}
        not_found = [f"{a}: no such physical device on this node" for a in dict.fromkeys(wanted) if a not in shown]
    snap = replace(snap, errors=(*snap.errors, *traced.errors, *_lines(view)))
    emit(
        snap,
        sources,
        output,
        {"devices": devices},
        lambda style: hw_table(devices, style),
        lambda: (p.pci for p in devices),
        no_headers=no_headers,
        quiet=quiet,
        not_found=not_found,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("hw")(hw)
