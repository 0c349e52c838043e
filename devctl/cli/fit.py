"""``devctl fit``: would the kubelet on this node admit this pod now, and with what (issue 31, cli.md "Answers").

The prediction is the core's (``core.admission.predict_fit``, under ``--timeout``); this module reads the
command line, prints the table (``render.admission``) or the document, and exits 0 admitted, 1 rejected,
2 usage, 3 unknown (an input the verdict rests on could not be read).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devctl.cli.common import ExitCode, Output, fail, options, run
from devctl.cli.output import OutputOpt, write_structured

if TYPE_CHECKING:
    from devctl.core.admission import FitAnswer


class TopologyPolicy(str, Enum):
    none = "none"
    best_effort = "best-effort"
    restricted = "restricted"
    single_numa_node = "single-numa-node"


class Scope(str, Enum):
    container = "container"
    pod = "pod"


class CpuPolicy(str, Enum):
    none = "none"
    static = "static"


class MemoryPolicy(str, Enum):
    none = "None"
    static = "Static"


def _offer(choices: type[Enum]) -> Callable[[str], list[str]]:
    """Completion for a choice taken as text (so a wrong one is one line, not click's usage block)."""

    def complete(incomplete: str) -> list[str]:
        return [c.value for c in choices if c.value.startswith(incomplete)]

    return complete


def _pick(option: str, value: str | None, choices: type[Enum], case_sensitive: bool = True) -> str | None:
    """``value`` as one of ``choices``' values; a usage error in one line (exit 2) when it is none of them."""
    if value is None:
        return None
    for c in choices:
        if c.value == value or (not case_sensitive and c.value.lower() == value.lower()):
            return str(c.value)
    from devctl.base.escape import escape

    fail(f"{option}: {escape(repr(value))} is not one of {', '.join(c.value for c in choices)}", ExitCode.USAGE)


def _body(answer: FitAnswer) -> dict[str, Any]:
    from devctl.model.serial import to_plain

    body = to_plain(answer)
    body.pop("errors", None)
    return dict(body)


def fit(
    ctx: typer.Context,
    request: Annotated[
        list[str] | None,
        typer.Argument(metavar="[REQUEST...]", help="NAME=QUANTITY for one Guaranteed container: cpu=8 memory=32Gi."),
    ] = None,
    filename: Annotated[
        str | None,
        typer.Option("--filename", "-f", metavar="POD.yaml", help="A Pod manifest (YAML or JSON); - reads stdin."),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            metavar="[none|best-effort|restricted|single-numa-node]",
            help="What if the topology manager's policy were this.",
            autocompletion=_offer(TopologyPolicy),
        ),
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope",
            metavar="[container|pod]",
            help="What if the topology manager's scope were this.",
            autocompletion=_offer(Scope),
        ),
    ] = None,
    cpu_policy: Annotated[
        str | None,
        typer.Option(
            "--cpu-policy",
            metavar="[none|static]",
            help="What if the CPU manager's policy were this.",
            autocompletion=_offer(CpuPolicy),
        ),
    ] = None,
    memory_policy: Annotated[
        str | None,
        typer.Option(
            "--memory-policy",
            metavar="[None|Static]",
            help="What if the memory manager's policy were this.",
            autocompletion=_offer(MemoryPolicy),
        ),
    ] = None,
    kubelet_config: Annotated[
        str | None,
        typer.Option("--kubelet-config", metavar="FILE", help="The kubelet's config file, when no kubelet runs here."),
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Would the kubelet admit this pod now: the verdict, each container's NUMA affinity, devices and CPUs.

    Predicts the kubelet's admission (topology, device, CPU and memory
    managers) from this node's configuration, devices, allocations and
    CPUs; --policy, --scope, --cpu-policy and --memory-policy ask "what if".
    Read-only: a plugin's GetPreferredAllocation may be asked, never Allocate.
    Exit 0 admitted, 1 rejected, 2 usage, 3 unknown (an input not read).
    """
    from devctl.core.admission import FitInputError, WhatIf, predict_fit, read_pod

    opts = options(ctx)
    if opts.from_file:
        fail("fit reads the live node (its kubelet configuration and CPUs): --from is not supported")
    try:
        pod = read_pod(request or [], filename, opts.timeout)  # -f -: stdin must end within --timeout
    except FitInputError as err:
        fail(err.message)
    what_if = WhatIf(
        _pick("--policy", policy, TopologyPolicy),
        _pick("--scope", scope, Scope),
        _pick("--cpu-policy", cpu_policy, CpuPolicy),
        _pick("--memory-policy", memory_policy, MemoryPolicy, case_sensitive=False),
    )
    answer = run(predict_fit(opts.paths(), opts.timeout, pod, what_if=what_if, config_file=kubelet_config))
    if output in (Output.json, Output.yaml):
        write_structured(output, _body(answer), answer.errors)
    else:
        from devctl.render.admission import fit_table
        from devctl.render.style import use_color
        from devctl.render.table import warnings

        sys.stderr.write(warnings(answer.errors, use_color(sys.stderr)))
        sys.stdout.write(fit_table(answer))
    sys.stdout.flush()
    if answer.admit is None:
        raise typer.Exit(int(ExitCode.NO_SOURCE))
    if not answer.admit:
        raise typer.Exit(int(ExitCode.FINDINGS))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("fit")(fit)


__all__ = ["fit", "register"]
