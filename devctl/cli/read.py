"""The read commands: ls, devices, pods, get here; topo, plugins, checkpoint, snapshot in devctl.cli.read_node.

Each command is a thin function: collect (or load ``--from FILE``), analyse,
render. Only typer and the standard library are imported here at module level;
the core and the renderers are imported inside the commands, so ``devctl --help``
stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.base.escape import escape
from devctl.cli.common import AS_ROOT, ExitCode, Output, fail, options, run
from devctl.cli.complete import namespaces, pod_names, resources, resources_then_ids
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
    table_style,
    write_structured,
)
from devctl.cli.read_node import checkpoint, dra_sources, plugins, snapshot, topo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from devctl.analyze import DeviceRow
    from devctl.model import ErrorKind, NodeSnapshot, PodResources
    from devctl.render.table import TableStyle

ResourcesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Only these resources, e.g. nvidia.com/gpu.", show_default=False, autocompletion=resources),
]

DEFAULT_NAMESPACE = "default"


def _unknown_resources(asked: list[str] | None, snap: NodeSnapshot) -> list[str]:
    """A line for each resource named on the command line that the node does not know, with a likely spelling.

    The node's whole resource view is made only when resources were named (a filtered view lacks the others).
    """
    if not asked:
        return []
    from devctl import analyze
    from devctl.base.names import not_found

    known = {r.name for r in analyze.resources_view(snap)}
    return [not_found("resource", name, known) for name in dict.fromkeys(asked) if name not in known]


# A command's name where a pod's goes (`devctl get pods`, kubectl's habit): the command a person meant.
_COMMANDS_AS_POD = {"pod": "pods", "pods": "pods", "po": "pods", "devices": "devices", "device": "devices"}
_COMMANDS_AS_POD |= {"resources": "ls", "ls": "ls", "topo": "topo", "plugins": "plugins", "checkpoint": "checkpoint"}
_COMMANDS_AS_POD |= {"claims": "claims", "claim": "claims", "resourceclaims": "claims", "cdi": "cdi", "who": "who"}


def _pod_not_found(pod: str, namespace: str, snapshot: NodeSnapshot) -> str:
    """``get``'s one line for a pod not found: the command meant, the namespaces where a pod of that name runs,
    or a likely name."""
    from devctl.base.names import likely

    message = f"pod {pod} in namespace {namespace} not found"
    if pod in _COMMANDS_AS_POD:
        return f"{message} (did you mean `devctl {_COMMANDS_AS_POD[pod]}`?)"
    elsewhere = sorted({p.namespace for p in snapshot.pods or () if p.name == pod} - {namespace})
    if len(elsewhere) == 1:
        return f"{message} (it runs in namespace {elsewhere[0]}: devctl get {pod} -n {elsewhere[0]})"
    if elsewhere:
        return f"{message} (pods of that name run in namespaces {', '.join(elsewhere)})"
    guess = likely(pod, {p.name for p in snapshot.pods or () if p.namespace == namespace})
    if guess is None:  # a likely name in another namespace, as devctl prints holders: NAMESPACE/NAME
        guess = likely(pod, {f"{p.namespace}/{p.name}" for p in snapshot.pods or ()})
        if guess is None:
            by_name = {p.name: f"{p.namespace}/{p.name}" for p in snapshot.pods or ()}
            near = likely(pod, set(by_name))
            guess = by_name[near] if near else None
    return f"{message} (did you mean {guess}?)" if guess else message


def _split_pod(pod: str, namespace: str | None) -> tuple[str, str]:
    """``NS/NAME`` as devctl prints holders, or NAME in ``-n`` (default: default); ``-n`` that disagrees is usage."""
    if "/" in pod:
        ns, _, name = pod.partition("/")
        if namespace is not None and namespace != ns:
            fail(f"{pod} names namespace {ns}, -n {namespace} another")
        return name, ns
    return pod, namespace or DEFAULT_NAMESPACE


def _why(message: str, kind: ErrorKind) -> str:
    """A source's failure as one line, with what to do when devctl lacked the rights."""
    from devctl.model import ErrorKind

    return f"{message}: {AS_ROOT}" if kind == ErrorKind.PERMISSION_DENIED else message


def ls(
    ctx: typer.Context,
    resources: ResourcesArg = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
    sort_by: SortByOpt = None,
    watch: WatchOpt = False,
) -> None:
    """One row per extended resource: capacity, allocatable, allocated, free, unhealthy, plugin status."""
    from devctl import analyze

    def once() -> None:
        sources = {analyze.POD_RESOURCES, analyze.PLUGINS, analyze.CHECKPOINT}
        # The table has no NUMA column (-o wide has), the one thing `ls` takes from CDI specs.
        numa = output not in (Output.table, Output.name) or sort_by is not None
        snap = node_snapshot(ctx, sources | dra_sources(numa))
        rows = sort_rows(analyze.resources_view(snap, resources), sort_by)

        def table(style: TableStyle) -> str:
            from devctl.render.table import resources_table  # only for a table: -o json never loads tabulate

            return resources_table(rows, style)

        emit(
            snap,
            sources,
            output,
            {"resources": rows},
            table,
            lambda: (r.name for r in rows),
            no_headers=no_headers,
            quiet=quiet,
            not_found=_unknown_resources(resources, snap),
        )

    rewatch(watch, once)


def _resources_and_ids(asked: list[str] | None, snap: NodeSnapshot) -> tuple[list[str], list[str] | None, list[str]]:
    """``devices``' arguments: the resources named, the device IDs to keep (None: all), a not-found line per rest.

    ``devctl devices nvidia.com/gpu GPU-0`` (a resource, then a device of it, as
    completion offers them) or ``devctl devices GPU-0`` shows that device. After
    a resource, a name close to one of its devices is a device not found (with
    that ID as the guess); any other name keeps the resource's "did you mean"
    (the usual slip is a resource's spelling), and the rows found still show.
    """
    if not asked:
        return [], None, []
    from devctl import analyze
    from devctl.base.names import likely, not_found

    known = {r.name for r in analyze.resources_view(snap)}
    named = [n for n in dict.fromkeys(asked) if n in known]
    rest = [n for n in dict.fromkeys(asked) if n not in known]
    if not rest:
        return named, None, []
    ids = {d.id for d in analyze.devices_view(snap, named or None)}
    # After a resource, a name like one of its devices is that device misspelt; any other, a resource.
    devices = [n for n in rest if n in ids or (named and likely(n, ids))]
    lines = [not_found("device", n, ids) for n in devices if n not in ids]
    lines += _unknown_resources([n for n in rest if n not in devices], snap)
    return named, devices or None, lines


def _held_by(rows: Sequence[DeviceRow], pod: str, snap: NodeSnapshot) -> tuple[tuple[DeviceRow, ...], list[str]]:
    """``devices --pod NS/NAME``: the rows of the devices the pod's containers hold (DRA claims' too), and a
    not-found line when the node runs no such pod (a pod that holds no device has no rows, and no line)."""
    namespace, _, name = pod.rpartition("/")
    rows = tuple(
        r
        for r in rows
        if any(h.pod == name and (not namespace or h.namespace == namespace) for h in r.allocated_to or ())
    )
    if rows or snap.pods is None:  # pod-resources unread: its warning says why nothing is known
        return rows, []
    if any(p.name == name and (not namespace or p.namespace == namespace) for p in snap.pods):
        return rows, []
    if namespace:
        return rows, [_pod_not_found(name, namespace, snap)]
    return rows, [f"pod {name} not found in any namespace"]


def devices(
    ctx: typer.Context,
    resources: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[RESOURCE|ID]...",
            help="Only these resources (e.g. nvidia.com/gpu) or devices (e.g. GPU-0).",
            show_default=False,
            autocompletion=resources_then_ids,
        ),
    ] = None,
    pod: Annotated[
        str | None,
        typer.Option(
            "--pod",
            metavar="NAMESPACE/NAME",
            help="Only the devices this pod holds (NAME alone: a pod of that name in any namespace).",
            autocompletion=pod_names,
        ),
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
    sort_by: SortByOpt = None,
    watch: WatchOpt = False,
) -> None:
    """One row per device: health, state (free, allocated, unhealthy, unhealthy-allocated), NUMA, holder."""
    from devctl import analyze
    from devctl.analyze.holders import holder_counts

    def once() -> None:
        sources = {analyze.POD_RESOURCES, analyze.PLUGINS, analyze.CHECKPOINT}
        # -o wide adds PROCS, the processes holding each device open: only it pays for a /proc scan.
        wide = {analyze.PROCS, analyze.RUNTIME, analyze.IDENTITIES} if output == Output.wide else set()
        # The PCI function behind each device (-o wide and the structured forms): sysfs names it.
        hardware = output in (Output.wide, Output.json, Output.yaml)
        snap = node_snapshot(ctx, sources | dra_sources() | wide | ({analyze.TOPOLOGY} if hardware else set()))
        named, ids, not_found = _resources_and_ids(resources, snap)
        rows: Sequence[DeviceRow] = analyze.devices_view(snap, named or (None if ids else resources))
        if ids is not None:
            rows = tuple(r for r in rows if r.id in ids)
        if pod is not None:
            rows, missing = _held_by(rows, pod, snap)
            not_found = [*not_found, *missing]
        if hardware:
            from devctl.analyze.hardware import with_hardware
            from devctl.core.physical import read_host_nodes

            # on a live node the allocations' device nodes are traced too (stat only): replicas and nodes join
            live = not options(ctx).from_file
            rows = with_hardware(rows, snap, run(read_host_nodes(snap, options(ctx).timeout)).nodes if live else None)
        rows = sort_rows(rows, sort_by)
        procs = holder_counts(snap) if output == Output.wide else None

        def table(style: TableStyle) -> str:
            from devctl.render.table import devices_table  # only for a table: -o json never loads tabulate

            return devices_table(rows, style, procs, procs_asked=output == Output.wide)

        emit(
            snap,
            sources,
            output,
            {"devices": rows},
            table,
            lambda: (d.id for d in rows),
            no_headers=no_headers,
            quiet=quiet,
            not_found=not_found,
        )

    rewatch(watch, once)


def pods(
    ctx: typer.Context,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace.", autocompletion=namespaces)
    ] = None,
    resource: Annotated[str | None, typer.Option("--resource", help="Only containers holding this resource.")] = None,
    pod: Annotated[str | None, typer.Option("--pod", help="Only the pod of this name.")] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
    sort_by: SortByOpt = None,
    watch: WatchOpt = False,
    all_namespaces: AllNamespacesOpt = False,
) -> None:
    """Allocations per container: devices, exclusive CPUs, memory, DRA claims (all namespaces by default)."""
    from dataclasses import replace

    from devctl import analyze
    from devctl.analyze.claims import with_claim_health
    from devctl.analyze.pods import device_health

    if all_namespaces and namespace is not None:
        fail("-A and -n: every namespace or one, not both")

    def once() -> None:
        sources = {analyze.POD_RESOURCES}
        snap = node_snapshot(ctx, sources)
        view = analyze.pods_view(snap, namespace=namespace, resource=resource, pod=pod)
        claims = [c.dynamic_resources for p in view for c in p.containers if c.dynamic_resources]
        dra = any(dr.devices for held in claims for dr in held)
        # HEALTHY: each device plugin device's health, from the plugins' lists (as devices shows it).
        table_health = output in (Output.table, Output.wide) and not quiet
        plugin_devices = table_health and any(c.devices for p in view for c in p.containers)
        health = None
        if dra or plugin_devices:
            # The drivers' health streams and the CDI specs give each DRA claim device its health and NUMA nodes,
            # the plugins' lists each plugin device's health; read only when a pod shown has such a device (every
            # plugin's list would cost a node without devices as much as the List itself). What they could not
            # tell is a null (`?` in HEALTHY), not a warning: their errors are not shown.
            more = node_snapshot(
                ctx,
                ({analyze.PLUGINS, analyze.CDI} if dra else set())
                | ({analyze.PLUGINS, analyze.CHECKPOINT} if plugin_devices else set()),
            )
            if dra:
                view = with_claim_health(view, more)
            if plugin_devices:
                health = device_health(replace(more, pods=snap.pods, allocatable=snap.allocatable))
        if sort_by is not None and sort_by.strip("{}").lstrip(".").lower() == "healthy":
            # HEALTHY is the table's (each plugin device's health is read for it): the pods with the most devices
            # that are not Healthy first, those whose health is unknown or that hold no device last.
            from devctl.render.table import healthy_of

            def healthy(p: PodResources) -> tuple[bool, int]:
                counts = [healthy_of(c, health) for c in p.containers if c.devices or c.dynamic_resources]
                unknown = not counts or any(n is None for n, _ in counts)
                return (unknown, -sum(total - (n or 0) for n, total in counts))

            rows = sorted(view, key=healthy)
        else:
            rows = sort_rows(view, sort_by)
        # --resource names a resource: one the node does not know is exit 1 with a likely spelling, as in ls
        # (asked only when no pod holds it, so a node of many pods pays nothing more).
        unknown = _unknown_resources([resource], snap) if resource is not None and not view else []

        def table(style: TableStyle) -> str:
            from devctl.render.table import pods_table  # only for a table: -o json never loads tabulate

            return pods_table(rows, style, health)

        emit(
            snap,
            sources,
            output,
            {"pods": rows},
            table,
            lambda: (f"{p.namespace}/{p.name}" for p in rows),
            no_headers=no_headers,
            quiet=quiet,
            not_found=unknown,
        )

    rewatch(watch, once)


def get(
    ctx: typer.Context,
    pod: Annotated[
        str, typer.Argument(help="The pod's name, or NAMESPACE/NAME.", show_default=False, autocompletion=pod_names)
    ],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="The pod's namespace [default: default].", autocompletion=namespaces),
    ] = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """One pod's allocations, by pod-resources Get (List where Get is disabled). Exit 1 when there is no such pod."""
    from devctl.core.collect import SnapshotError, load_snapshot
    from devctl.core.failures import NoSuchPod, RpcFailure
    from devctl.core.pod import pod_from_snapshot, read_pod
    from devctl.render.table import pods_table

    pod, namespace = _split_pod(pod, namespace)
    opts = options(ctx)
    try:
        if opts.from_file:
            try:
                snap = load_snapshot(opts.from_file)
            except SnapshotError as e:
                fail(f"--from {e}", ExitCode.NO_SOURCE)
            reading = pod_from_snapshot(snap, pod, namespace)
        else:
            table = output in (Output.table, Output.wide)  # HEALTHY: its plugin devices' health, read for it
            reading = run(read_pod(opts.paths(), opts.timeout, pod, namespace, health=table))
    except NoSuchPod as e:
        fail(_pod_not_found(pod, namespace, e.snapshot), ExitCode.FINDINGS)
    except RpcFailure as e:
        fail(_why(e.message, e.kind), ExitCode.NO_SOURCE)
    found = reading.pod
    if output in (Output.json, Output.yaml):
        write_structured(output, found, None)
    elif quiet or output == Output.name:
        print(escape(f"{found.namespace}/{found.name}"))
    else:
        sys.stdout.write(
            pods_table([found], table_style(output, no_headers), reading.health)
            or escape(f"{found.namespace}/{found.name}") + ": no containers\n"
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    for command in (ls, devices, pods, get, topo, plugins, checkpoint, snapshot):
        app.command(command.__name__)(command)
