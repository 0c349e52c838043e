"""The kubelet-state part of ``devctl topo``: the CPU and memory managers' policies and assignments."""

from __future__ import annotations

from devctl.analyze.kubeletstate import KubeletStateView
from devctl.base.escape import escape
from devctl.base.units import format_cpulist
from devctl.render.table import TableStyle, grid


def _checksum(ok: bool | None) -> str:
    return "none" if ok is None else "ok" if ok else "MISMATCH"


def kubelet_state_table(view: KubeletStateView | None, style: TableStyle) -> str:
    """'' when no state file and no config was read (a node with the default policies has none)."""
    if view is None or (
        view.cpu_policy is None and view.memory_policy is None and view.topology_manager_policy is None
    ):
        return ""
    # One fact per line, each short enough for 80 columns.
    lines = [
        "",
        escape(
            f"CPU manager:      policy {view.cpu_policy or '-'} (configured {view.configured_cpu_policy or '-'}), "
            f"checksum {_checksum(view.cpu_checksum_ok)}"
        ),
        *([escape(f"CPU checksum:     {view.cpu_checksum_rule}")] if view.cpu_checksum_rule else []),
        escape(f"CPU shared pool:  {format_cpulist(view.default_cpus or ()) or '-'}"),
        escape(
            f"Memory manager:   policy {view.memory_policy or '-'} "
            f"(configured {view.configured_memory_policy or '-'}), checksum {_checksum(view.memory_checksum_ok)}"
        ),
        *([escape(f"Memory checksum:  {view.memory_checksum_rule}")] if view.memory_checksum_rule else []),
        escape(f"Memory assigned:  {view.memory_assignments} container(s)"),
        escape(
            f"Topology manager: policy {view.topology_manager_policy or '-'}, "
            f"scope {view.topology_manager_scope or '-'}"
        ),
    ]
    text = "\n".join(lines) + "\n"
    rows = [
        [
            f"{r.namespace}/{r.pod}" if r.namespace else r.pod_uid,
            r.container,
            format_cpulist(r.state_cpus),
            "?" if r.pod_resources_cpus is None else format_cpulist(r.pod_resources_cpus) or "-",
            "?" if r.agrees is None else "yes" if r.agrees else "NO",
        ]
        for r in view.cpu_assignments
    ]
    table = grid(["pod", "container", "state-cpus", "pod-resources-cpus", "agree"], rows, style)
    if not style.headers:  # --no-headers: rows only, as every table of topo (no summary, no blank separator)
        return table
    return text + ("\n" + table if table else "")
