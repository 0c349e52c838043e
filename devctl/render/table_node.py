"""``devctl topo``, ``plugins`` and ``checkpoint``: the node's NUMA view, its plugin sockets, its checkpoints."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from devctl.base.escape import escape
from devctl.base.units import format_bytes, format_count, format_cpulist
from devctl.model import (
    SocketStatus,
)
from devctl.render.style import NONE, paint, word

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    from devctl.analyze import CheckpointView, PluginsView, TopologyView

from devctl.render.grid import WIDTH, TableStyle, cut_path, grid, numa_cell, options_cells, some


def topology_table(view: TopologyView, style: TableStyle) -> str:
    """The NUMA nodes, their devices (one row per node and resource), the shared CPU pool, then each
    container's alignment: tables narrow enough for 80 columns, as ``ls``'s."""
    headers = ["node", "cpus", "allocatable", "exclusive", "shared", "memory"]
    if style.wide:
        headers += ["hugepages"]
    nodes, devices = [], []
    for n in view.numa_nodes:
        row: list[object] = [
            n.id,  # None: the devices no NUMA node is known for, <none> as everywhere
            format_cpulist(n.cpus),
            format_cpulist(n.allocatable_cpus),
            format_cpulist(n.exclusive_cpus),
            format_cpulist(n.shared_cpus),
            format_bytes(n.memory_bytes) if n.memory_bytes else "",
        ]
        if style.wide:
            row.append(" ".join(f"{format_bytes(h['size_kb'] * 1024)}={h['free']}/{h['total']}" for h in n.hugepages))
        if n.id is not None or n.cpus:
            nodes.append(row)
        for r, c in n.devices.items():
            devices.append(
                [n.id, r, format_count(c.total, c.total_min), format_count(c.allocated), format_count(c.free)]
            )
    sep = "\n" if style.headers else ""  # --no-headers: rows only, no blank separator
    tables = [
        grid(headers, nodes, style),
        grid(["node", "resource", "cap", "used", "free"], devices, style),
    ]
    parts = [t for t in tables if t]
    if style.headers and (nodes or devices):
        parts.append(f"shared pool: {format_cpulist(view.shared_pool) or NONE}\n")
    aligned = [
        [
            a.namespace,
            a.pod,
            a.container,
            "unknown" if a.aligned is None else word("yes" if a.aligned else "no", style.color),
            numa_cell(a.device_numa),
            numa_cell(a.cpu_numa),
            numa_cell(a.memory_numa),
        ]
        for a in view.alignment
    ]
    table = grid(["namespace", "pod", "container", "aligned", "device-numa", "cpu-numa", "memory-numa"], aligned, style)
    if table:
        parts.append(table)
    return sep.join(parts)


def plugins_table(view: PluginsView, style: TableStyle) -> str:
    headers = ["socket", "resource", "status", "devices", "latency"]
    if style.wide:
        headers += ["kind", "healthy", "pre-start", "preferred", "registry", "error"]
    out = []
    for p in view.plugins:
        row: list[object] = [
            p.socket if style.wide else os.path.basename(p.socket),
            p.resource,
            word(p.status, style.color),
            p.devices,
            f"{p.latency_ms:.1f}ms" if p.latency_ms is not None else "",
        ]
        if style.wide:
            registry = f"{p.registry.type}:{p.registry.name}" if p.registry else ""
            row += [p.kind, p.healthy, *options_cells(p.options), registry, p.error]
        out.append(row)
    text = grid(headers, out, style, cut=(0, 1))  # SOCKET, RESOURCE
    if style.headers:
        ks, cp = view.kubelet_socket, view.checkpoint
        # The plugins dir is the usual place: its files by name (the full paths when wide, or when absent).
        ks_path = escape(ks.path if style.wide or not ks.present else os.path.basename(ks.path))
        cp_path = escape(cp.path if style.wide or not cp.present else os.path.basename(cp.path))
        socket: str
        if not ks.present:
            socket = paint("absent", "red", style.color)
        elif ks.status in (None, SocketStatus.LISTENING):
            socket = "present"
        else:  # on disk, but nothing listens: the kubelet leaves its socket when it exits
            socket = paint(f"present but {ks.status.value}", "red", style.color)
        checksum = {True: "checksum ok", False: paint("checksum MISMATCH", "red", style.color), None: ""}[
            cp.checksum_ok
        ]
        text += (
            ("\n" if text else "")
            + f"kubelet socket: {socket} ({ks_path})\n"
            + f"checkpoint:     {'present' if cp.present else paint('absent', 'red', style.color)}"
            + (f", {checksum}" if checksum else "")
            + f" ({cp_path})\n"
        )
    return text


def checkpoint_table(view: CheckpointView, style: TableStyle) -> str:
    """The checksum verdict and format on top, then one row per entry (its allocation when wide)."""
    headers = ["pod", "container", "resource", "devices", "stale"]
    if style.wide:
        headers = ["pod-uid", *headers, "numa", "envs", "device-nodes", "mounts", "cdi"]
    out = []
    for e in view.entries:
        pod = f"{e.pod.namespace}/{e.pod.name}" if e.pod else "<unknown>"
        # A device on two NUMA nodes is filed under both keys: list it once.
        ids = dict.fromkeys(i for group in e.device_ids.values() for i in group)
        # The kubelet files a device without NUMA affinity under -1: <none> here, as in every table.
        numa = ",".join(k for k, v in e.device_ids.items() if v and not k.startswith("-"))
        stale = paint("yes", "red", style.color) if e.stale else "no"
        row: list[object] = [pod, e.container, e.resource, ",".join(ids) if style.wide else some(list(ids)), stale]
        if style.wide:
            a = e.allocation
            if a is None:
                extra = [f"({e.allocation_error})" if e.allocation_error else "", "", "", ""]
            else:
                extra = [
                    " ".join(f"{k}={v}" for k, v in a.envs.items()),
                    " ".join(f"{d.host_path}:{d.container_path}:{d.permissions}" for d in a.devices),
                    " ".join(f"{m.host_path}:{m.container_path}{':ro' if m.read_only else ''}" for m in a.mounts),
                    " ".join(a.cdi_devices),
                ]
            row = [e.pod_uid, *row, numa, *extra]
        out.append(row)
    text = ""
    if style.headers:
        if view.format is None:
            return ""
        fmt = view.format + (" (the flat DeviceIDs of Kubernetes <= 1.19)" if view.format == "v1" else "")
        verdict = "ok" if view.checksum_ok else paint("MISMATCH", "red", style.color)
        if view.checksum_ok is None:  # too large to verify: the warning above says why
            verdict = paint("not verified", "yellow", style.color)
        elif not view.checksum_ok and view.checksum is not None:
            verdict += f" (stored {view.checksum}, computed {view.computed_checksum}: the kubelet would start empty)"
        import textwrap

        registered = " ".join(f"{escape(r)}={len(ids)}" for r, ids in view.registered_devices.items())
        # Many resources wrap under their label rather than run past 80 columns.
        registered = "\n".join(
            textwrap.wrap(
                registered or NONE,
                80,
                initial_indent="registered: ",
                subsequent_indent=" " * 12,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        path = escape(view.path)
        if not style.wide:  # its file name whole; -o wide the whole path
            path = cut_path(path, WIDTH - len("path:       "))
        text = f"path:       {path}\nformat:     {fmt}\nchecksum:   {verdict}\n{registered}\n"
        table = grid(headers, out, style, cut=(0, 1, 2))  # POD, CONTAINER, RESOURCE
        return text + ("\n" + table if table else "")
    return grid(headers, out, style, cut=(0, 1, 2))
