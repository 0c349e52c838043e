"""``devctl why POD``: one verdict for a pod that does not run as it should, its evidence and a command to run.

The sources and their deadlines are devctl.core.why's, the verdict devctl.analyze.why's; this module
reads the arguments, prints for a person (verdict first, then one line per piece of evidence, then the
hint, within one 80x24 screen) or for a script (``-o json|yaml``: cli.md's shape), and exits 0 for
``running``, 1 otherwise, 2 on a usage error, 3 when no source could be read.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, Output, fail, options, run
from devctl.cli.output import OutputOpt

if TYPE_CHECKING:
    from devctl.analyze.why import Evidence, WhyAnswer

WIDTH = 80
MAX_EVIDENCE = 14  # with the verdict, the hint and a few warnings: one 24-line screen
MAX_WARNINGS = 4


def _cut(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _short_time(time: str | None) -> str:
    if not time:
        return "-"
    if len(time) >= 19 and time[4] == "-" and time[10] == "T":
        return f"{time[5:10]} {time[11:19]}"
    return time


# A log line's own header, shown in the time column already: klog's (``E1203 13:00:00.123456 4242 ``) and
# journalctl short-iso's (``2026-12-03T13:00:00+0000 host kubelet[4242]: ``).
_LOG_HEADER = re.compile(r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ |\d{4}-\d\d-\d\dT\S+ \S+ \S+\[\d+\]: )")


def _evidence_line(e: Evidence) -> str:
    from devctl.base.escape import escape

    what = _LOG_HEADER.sub("", e.what) if e.source in ("kubelet-log", "journal") else e.what
    return _cut(f"  {_short_time(e.time):<14} {escape(e.source):<11} {escape(' '.join(what.split()))}")


def table(answer: WhyAnswer) -> str:
    """The answer for a person: verdict, evidence, hint, warnings; every string from outside escaped."""
    from devctl.base.escape import escape

    lines = [_cut(f"{answer.code}: {escape(' '.join(answer.verdict.split()))}")]
    lines += [_evidence_line(e) for e in answer.evidence[:MAX_EVIDENCE]]
    if len(answer.evidence) > MAX_EVIDENCE:
        lines.append(f"  … {len(answer.evidence) - MAX_EVIDENCE} more (-o json)")
    if answer.hint:
        lines.append(f"hint: {escape(answer.hint)}")
    shown = answer.errors[:MAX_WARNINGS]
    lines += [_cut(f"warning: {escape(e.source)}: {escape(' '.join(e.message.split()))}") for e in shown]
    if len(answer.errors) > MAX_WARNINGS:
        lines.append(f"warning: … {len(answer.errors) - MAX_WARNINGS} more (-o json)")
    return "\n".join(lines) + "\n"


def _no_source(answer: WhyAnswer) -> bool:
    from devctl.core.why import CRI
    from devctl.model import POD_RESOURCES

    failed = {e.source for e in answer.errors}
    return answer.code == "unknown" and not answer.evidence and {CRI, POD_RESOURCES} <= failed


def _target(pod: str, namespace: str | None, manifest: str | None) -> tuple[str, str]:
    if manifest is not None:
        from devctl.base.errors import DevctlError
        from devctl.core.why import manifest_pod

        try:
            ns, name = manifest_pod(manifest)
        except DevctlError as e:
            fail(str(e), ExitCode.USAGE)
        return ns or namespace or "default", name
    if "/" in pod:
        ns, _, name = pod.partition("/")
        if namespace is not None and namespace != ns:
            fail(f"{pod}: names namespace {ns}, but -n says {namespace}", ExitCode.USAGE)
        return ns, name
    return namespace or "default", pod


def why(
    ctx: typer.Context,
    pod: Annotated[
        str | None, typer.Argument(metavar="POD", help="The pod: NAME or NAMESPACE/NAME.", show_default=False)
    ] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="The pod's namespace.")] = None,
    manifest: Annotated[
        str | None, typer.Option("--filename", "-f", metavar="POD.yaml", help="The pod's manifest (-: stdin).")
    ] = None,
    kubelet_log: Annotated[
        str | None,
        typer.Option(
            "--kubelet-log",
            metavar="FILE",
            help="The kubelet's log (its last 8 MiB are read). Default: <root>/var/log/kubelet.log when it "
            "exists, else journalctl -u kubelet on the node itself.",
        ),
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Why a pod does not run as it should on this node: one verdict, the evidence it rests on, a command to run.

    Reads the CRI runtime (the pod's sandboxes and containers, with reason
    and message), pod-resources, the device-manager and DRA checkpoints, the
    DRA drivers, the CDI specs, device health and the kubelet's log lines
    about the pod, each under its own deadline. CODE is one of running,
    admission-rejected, device-unhealthy, plugin-missing, dra-driver-missing,
    claim-not-prepared, cdi-unresolvable, container-error, not-on-node,
    unknown. Exit 0 for running, 1 otherwise, 3 when no source answered.

    Examples:
      devctl why -n ml train-0
      devctl why inference/embed-0 -o json
      devctl why train-0 -n ml --kubelet-log /var/log/kubelet.log
    """
    from devctl.core.why import WhyRequest
    from devctl.core.why import why as answer_why
    from devctl.render import structured

    if pod is None and manifest is None:
        fail("why: name a POD (or -f POD.yaml)", ExitCode.USAGE)
    if output not in (Output.table, Output.json, Output.yaml):
        fail(f"why: -o {output.value} is not offered (table, json or yaml)", ExitCode.USAGE)
    ns, name = _target(pod or "", namespace, manifest)
    opts = options(ctx)
    answer = run(answer_why(opts.paths(), opts.timeout, WhyRequest(ns, name, kubelet_log)))
    if output == Output.table:
        sys.stdout.write(table(answer))
    else:
        body = {k: getattr(answer, k) for k in ("pod", "code", "verdict", "evidence", "hint")}
        if output == Output.json:
            sys.stdout.writelines(structured.json_pieces(body, answer.errors))
        else:
            sys.stdout.write(structured.to_yaml(structured.document(body, answer.errors)))
    if _no_source(answer):
        raise typer.Exit(int(ExitCode.NO_SOURCE))
    raise typer.Exit(int(ExitCode.OK if answer.code == "running" else ExitCode.FINDINGS))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("why")(why)
