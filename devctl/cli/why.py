"""``devctl why POD``: one verdict for a pod that does not run as it should, its evidence and a command to run.

The sources and their deadlines are devctl.core.why's, the verdict devctl.analyze.why's; this module
reads the arguments, prints for a person (``render.why``: verdict first, then one line per piece of evidence,
then the hint, within one 80x24 screen) or for a script (``-o json|yaml``: cli.md's shape), and exits 0 for
``running``, 1 otherwise, 2 on a usage error, 3 when no source could be read.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, Output, fail, options, run
from devctl.cli.output import OutputOpt

if TYPE_CHECKING:
    from devctl.analyze.why import WhyAnswer
    from devctl.model.machine import PodRequest


def _no_source(answer: WhyAnswer) -> bool:
    from devctl.core.why import CRI
    from devctl.model import POD_RESOURCES

    failed = {e.source for e in answer.errors}
    return answer.code == "unknown" and not answer.evidence and {CRI, POD_RESOURCES} <= failed


def _target(
    pod: str, namespace: str | None, manifest: str | None, timeout: float
) -> tuple[str, str, PodRequest | None, str | None]:
    """(namespace, name, the manifest's requests, why none) of the pod asked about."""
    if manifest is not None:
        from devctl.base.errors import DevctlError
        from devctl.core.why import manifest_pod_request

        try:
            ns, name, request, note = manifest_pod_request(manifest, timeout)
        except DevctlError as e:
            fail(str(e), ExitCode.USAGE)
        return ns or namespace or "default", name, request, note
    if "/" in pod:
        ns, _, name = pod.partition("/")
        if namespace is not None and namespace != ns:
            fail(f"{pod}: names namespace {ns}, but -n says {namespace}", ExitCode.USAGE)
        return ns, name, None, None
    return namespace or "default", pod, None, None


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
    about the pod, and the node journal's last day of events about the
    devices it holds (newest last, at most 5), each under its own deadline.
    With -f, fit is replayed for the manifest's requests (the pod's own
    holdings freed) as evidence when the pod failed admission or holds
    nothing. CODE is one of running,
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
    opts = options(ctx)
    ns, name, request, note = _target(pod or "", namespace, manifest, opts.timeout)
    answer = run(answer_why(opts.paths(), opts.timeout, WhyRequest(ns, name, kubelet_log, pod=request, pod_note=note)))
    if output == Output.table:
        from devctl.render.why import why_table

        sys.stdout.write(why_table(answer))
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
