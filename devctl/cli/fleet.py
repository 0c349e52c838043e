"""``devctl fleet --prometheus URL ls | devices | doctor``: the node views across the fleet, from Prometheus.

Each command asks Prometheus (``devctl.fleet``) and prints as the node
commands do (``-o table|wide|json|yaml``, ``--no-headers``). Prometheus
unreachable, not answering within ``--timeout`` (all queries together), or
answering something that is not its query API, is one line and exit 3; a URL
that is not http(s), or a ``--job`` that is not a regular expression, is one line
and exit 2; Ctrl-C exits 130 at once. Every query asks only the series of the
scrape jobs ``--job`` matches (default ``(.+/)?devctl-exporter``). Only typer
and the standard library at module level.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.cli.common import ExitCode, Output, fail, options
from devctl.cli.output import NoHeadersOpt, OutputOpt, table_style

if TYPE_CHECKING:
    from devctl.fleet.prometheus import Prometheus

fleet_app = typer.Typer(
    name="fleet",
    help="The node views across many nodes, from the Prometheus that scrapes every node's devctl exporter.",
    no_args_is_help=True,
)

NodeOpt = Annotated[list[str] | None, typer.Option("--node", help="Only this node; repeatable.")]
ResourcesArg = Annotated[list[str] | None, typer.Argument(help="Only these resources.", show_default=False)]


@fleet_app.callback()
def fleet(
    ctx: typer.Context,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            envvar="DEVCTL_PROMETHEUS",
            metavar="URL",
            help="Prometheus' base URL, e.g. http://prom:9090.",
        ),
    ] = None,
    job: Annotated[
        str,
        typer.Option(
            "--job",
            envvar="DEVCTL_FLEET_JOB",
            metavar="REGEX",
            help="Only the series of the scrape jobs this regex matches (PromQL's job=~, anchored).",
        ),
    ] = "(.+/)?devctl-exporter",
) -> None:
    """The node views across many nodes, from the Prometheus that scrapes every node's devctl exporter."""
    from devctl.fleet.views import BadJob, job_matcher

    try:
        job_matcher(job)
    except BadJob as e:
        fail(str(e))
    ctx.obj = (prometheus, job)


def _job(ctx: typer.Context) -> str:
    return ctx.parent.obj[1] if ctx.parent is not None else "(.+/)?devctl-exporter"


def _server(ctx: typer.Context) -> Prometheus:
    from devctl.fleet.prometheus import BadURL, Prometheus

    url = ctx.parent.obj[0] if ctx.parent is not None else None
    if not url:
        fail("fleet needs --prometheus URL (or DEVCTL_PROMETHEUS)")
    try:
        return Prometheus(url, options(ctx).timeout)
    except BadURL as e:
        fail(f"--prometheus {e}")


def _show(
    ctx: typer.Context,
    fetch: Callable[[Prometheus], Sequence[Any]],
    key: str,
    table: str,
    output: Output,
    no_headers: bool,
) -> Sequence[Any]:
    """Fetch the rows and print them; ``table`` names the function of ``devctl.fleet.tables`` that lays them out."""
    from devctl.fleet.prometheus import PrometheusError

    if output == Output.name:
        fail("-o name: fleet prints table, wide, json or yaml")
    server = _server(ctx)
    try:
        rows = fetch(server)
    except PrometheusError as e:
        fail(str(e), ExitCode.NO_SOURCE)
    except KeyboardInterrupt:
        # Ctrl-C: the queries' sockets are shut and their (daemon) threads abandoned; nothing waits for them.
        raise typer.Exit(130) from None
    if output in (Output.json, Output.yaml):
        from devctl.render import structured

        # The rows are flat dataclasses: their plain form is their fields, made here without reflection per value.
        doc = {key: [_plain(r) for r in rows], "errors": []}
        sys.stdout.write(structured.to_json(doc) if output == Output.json else structured.to_yaml(doc))
    else:
        from devctl.fleet import tables  # only tables pay for the table renderer's import

        text = getattr(tables, table)(rows, table_style(output, no_headers))
        if text:
            sys.stdout.write(text)
        else:
            print("No resources found.", file=sys.stderr)
    sys.stdout.flush()
    return rows


@fleet_app.command("ls")
def ls(
    ctx: typer.Context,
    resources: ResourcesArg = None,
    node: NodeOpt = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Per node and resource: capacity, allocatable, allocated, free, unhealthy (? where a node could not know)."""
    from devctl.fleet.views import fleet_resources, only

    _show(
        ctx,
        lambda p: only(fleet_resources(p.query_all, _job(ctx)), node or (), resources or ()),
        "resources",
        "resources_table",
        output,
        no_headers,
    )


@fleet_app.command("devices")
def devices(
    ctx: typer.Context,
    resources: ResourcesArg = None,
    node: NodeOpt = None,
    unhealthy_held: Annotated[
        bool, typer.Option("--unhealthy-held", help="Only unhealthy devices that a container still holds.")
    ] = False,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
) -> None:
    """One row per device of every node: health, state, NUMA, holders."""
    from devctl.fleet.views import fleet_devices, only

    _show(
        ctx,
        lambda p: only(fleet_devices(p.query_all, unhealthy_held, _job(ctx)), node or (), resources or ()),
        "devices",
        "devices_table",
        output,
        no_headers,
    )


@fleet_app.command("doctor")
def doctor(
    ctx: typer.Context,
    node: NodeOpt = None,
    output: OutputOpt = Output.table,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Doctor's findings of every node by code. Exit 1 when any node has an error finding."""
    from devctl.fleet.views import fleet_findings, only

    rows = _show(
        ctx,
        lambda p: only(fleet_findings(p.query_all, _job(ctx)), node or (), ()),
        "findings",
        "findings_table",
        output,
        no_headers,
    )
    if any(r.severity == "error" for r in rows):
        raise typer.Exit(int(ExitCode.FINDINGS))


def _plain(row: Any) -> dict[str, Any]:
    """A fleet row as JSON has it (``serial.to_plain``'s shape): its fields, holders as objects."""
    plain = dict(vars(row))
    if "allocated_to" in plain:
        plain["allocated_to"] = [dict(vars(h)) for h in plain["allocated_to"]]
    return plain


def register(app: typer.Typer) -> None:
    """Add `devctl fleet …` to the app."""
    app.add_typer(fleet_app, name="fleet")
