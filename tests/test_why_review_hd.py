"""What a final review of ``devctl why`` on the default simulated node found (full-HD): each test fails unfixed."""

from __future__ import annotations

import asyncio
import socket

from devctl.analyze.why import WhyAnswer, WhyInputs, log_time, verdict
from devctl.core.why import PODS_API, _pods_api
from devctl.model import ErrorKind, SourceError
from tests.helpers import devctl


def test_a_pods_api_socket_that_is_not_there_is_no_warning(sim_node):
    """The sim serves no Pods API (alpha, gate off): neither the table nor the JSON's errors speak of it."""
    table = devctl(sim_node.root, "why", "-n", "ml", "train-0")
    assert table.exit_code == 1, table.stderr
    assert "pods-api" not in table.stdout
    doc = devctl(sim_node.root, "why", "ml/train-0", "-o", "json").json
    assert all(e["source"] != PODS_API for e in doc["errors"])


def test_a_pods_api_socket_with_no_listener_is_an_error(short_root):
    """A socket file there that refuses connections (a kubelet gone) stays a typed error: stale."""
    sock_dir = short_root / "pods-api"
    sock_dir.mkdir()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock_dir / "pods-api.sock"))  # bound, never listening: connect is refused
    try:
        errors: list[SourceError] = []
        asyncio.run(_pods_api_at(str(short_root), errors))
    finally:
        s.close()
    assert [(e.source, e.kind) for e in errors] == [(PODS_API, ErrorKind.STALE)]
    assert str(sock_dir / "pods-api.sock") in errors[0].message


async def _pods_api_at(kubelet_dir: str, errors: list[SourceError]) -> None:
    from devctl.model import NodePaths

    await _pods_api(NodePaths("/", kubelet_dir, "", "", "", ""), 2.0, errors)


def _stuck_on_cdi() -> WhyAnswer:
    """A container stuck on an unresolvable CDI name: the runtime's line, two klog lines (newest first in
    the input), and the name devctl cannot resolve from the checkpoint."""
    from devctl.model import Allocation, Checkpoint, CheckpointEntry
    from devctl.model.runtime import LogLine
    from devctl.node.kubeletlog import line_time
    from tests.test_why import POD, UID, _container, _gpu_plugin, _gpu_pod, _runtime, _snap

    entry = CheckpointEntry(
        UID, "main", "nvidia.com/gpu", {"0": ("GPU-0",)}, Allocation(cdi_devices=("nvidia.com/gpu=GPU-0",))
    )
    cp = Checkpoint("/dp/kubelet_internal_checkpoint", "v2", True, 1, 1, {}, (entry,))
    msg = "CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=GPU-0"
    logs = [
        f'E1203 {t}.5 1 kuberuntime_manager.go:1] "err" pod="ml/train-0" err="{msg}"' for t in ("09:59:00", "08:00:00")
    ]
    return verdict(
        POD,
        _snap(pods=(_gpu_pod(),), plugins=(_gpu_plugin(),), checkpoint=cp),
        WhyInputs(
            runtime=_runtime(_container("created", "CreateContainerError", msg)),
            kubelet_lines=tuple(LogLine(line_time(ln), ln) for ln in logs),
        ),
    )


def test_evidence_times_are_iso_utc_in_time_order_unknown_last() -> None:
    """klog's yearless ``12-03 09:59:00`` is ISO 8601 UTC like the runtime's; oldest first; the CDI line,
    about a name no spec defines (since when: not known), has no time and comes last."""
    a = _stuck_on_cdi()
    assert a.code == "cdi-unresolvable"
    assert [(e.source, e.time) for e in a.evidence] == [
        ("kubelet-log", "2026-12-03T08:00:00Z"),
        ("cri", "2026-12-03T09:00:01Z"),
        ("kubelet-log", "2026-12-03T09:59:00Z"),
        ("cdi", None),
    ]


def test_a_klog_time_after_now_is_last_years() -> None:
    """klog has no year: a December line read on 2 January is the year before's."""
    assert log_time("12-31 23:59:00", "2027-01-02T00:00:00.000Z") == "2026-12-31T23:59:00Z"
    assert log_time("01-02 00:00:05", "2027-01-02T00:00:00.000Z") == "2027-01-02T00:00:05Z"
    assert log_time("2026-12-03T10:00:00", "2026-12-03T11:00:00Z") == "2026-12-03T10:00:00Z"
    assert log_time(None, "2026-12-03T11:00:00Z") is None
    assert log_time("13-45 99:00:00", "2026-12-03T11:00:00Z") is None


def _words(text: str) -> list[str]:
    return text.replace("…", " ").split()


def test_the_table_wraps_verdict_evidence_and_hint_whole_on_one_screen() -> None:
    """The verdict's last words ("is missing") and every evidence word are on screen, 80 columns at most."""
    from devctl.render.why import why_table

    a = _stuck_on_cdi()
    out = why_table(a)
    lines = out.splitlines()
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines)
    assert "…" not in out
    assert _words(out)[: len(_words(a.code + ": " + a.verdict))] == _words(a.code + ": " + a.verdict)
    assert a.verdict.endswith("the CDI spec is missing")
    for e in a.evidence:
        assert " ".join(e.what.split()[-3:]) in " ".join(out.split())
    narrow = why_table(a, width=40).splitlines()  # the TUI's box gives its own width
    assert all(len(ln) <= 40 for ln in narrow) and "missing" in narrow[1] + narrow[2]


def test_fourteen_long_pieces_still_fit_one_screen() -> None:
    """When wrapping all would overflow 24 lines, each piece keeps its share and ends in "…"."""
    from dataclasses import replace

    from devctl.analyze.why import Evidence
    from devctl.render.why import why_table

    long = Evidence("kubelet-log", "2026-12-03T09:00:00Z", "word " * 60)
    a = replace(_stuck_on_cdi(), evidence=(long,) * 14)
    lines = why_table(a).splitlines()
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines)
    assert sum(ln.startswith("  12-03 09:00:00 kubelet-log") for ln in lines) == 14
