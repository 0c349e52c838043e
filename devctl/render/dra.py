"""Tables of the DRA and CDI views (``devctl claims``, ``devctl cdi``, the ``dra`` part of ``devctl checkpoint``).

Every cell goes through ``render.table.grid``, which escapes it: a driver,
claim or CDI name is data from the node and may hold control characters.
"""

from __future__ import annotations

from devctl.analyze.cdi import CdiView
from devctl.analyze.claims import ClaimRow, DraCheckpointSection
from devctl.escape import escape
from devctl.render.style import paint, word
from devctl.render.table import TableStyle, grid


def _pods(row: ClaimRow) -> str:
    return ",".join(f"{p.namespace}/{p.name}" if p.name else (p.uid or "?") for p in row.pods)


def _health(row: ClaimRow) -> str:
    return ",".join(d.health or "?" for d in row.devices)


def claims_table(rows: tuple[ClaimRow, ...], style: TableStyle) -> str:
    headers = ["namespace", "claim", "state", "driver", "devices", "health", "numa", "pods"]
    if style.wide:
        headers += ["uid", "cdi"]
    out = []
    for r in rows:
        row: list[object] = [
            r.namespace,
            r.name,
            word(r.state or "?", style.color),
            ",".join(r.drivers) or ",".join(sorted({d.driver for d in r.devices})),
            ",".join(f"{d.pool}/{d.device}" for d in r.devices),
            _health(r),
            ",".join(str(n) for n in sorted({n for d in r.devices for n in d.numa_nodes})),
            _pods(r),
        ]
        if style.wide:
            row += [r.uid or "", ",".join(n for d in r.devices for n in d.cdi_devices)]
        out.append(row)
    return grid(headers, out, style)


def cdi_table(view: CdiView, style: TableStyle) -> str:
    """The names in use, resolved (status, spec, device nodes with PCI and NUMA); then the bad specs."""
    headers = ["name", "status", "device-nodes", "pci", "numa", "used-by"]
    if style.wide:
        headers += ["spec", "env", "mounts"]
    out = []
    for n in view.names:
        row: list[object] = [
            n.name,
            word(n.status, style.color),
            ",".join(d.host_path for d in n.device_nodes),
            ",".join(d.pci or "?" for d in n.device_nodes),
            ",".join("?" if d.numa_node is None else str(d.numa_node) for d in n.device_nodes),
            ",".join(u.claim or u.resource or "" for u in n.used_by),
        ]
        if style.wide:
            row += [n.spec or ",".join(n.conflicting), ",".join(n.env), ",".join(m.host_path for m in n.mounts)]
        out.append(row)
    text = grid(headers, out, style)
    if style.headers:
        bad = [s for s in view.specs if s.error]
        summary = f"spec dirs: {', '.join(escape(d) for d in view.dirs)} ({len(view.specs)} specs"
        summary += f", {paint(f'{len(bad)} invalid', 'red', style.color)})" if bad else ")"
        text += ("\n" if text else "") + summary + "\n"
    return text


def dra_checkpoint_lines(section: DraCheckpointSection | None, style: TableStyle) -> str:
    """The ``dra`` part of ``devctl checkpoint``: its file, format and checksum, then its claims."""
    if section is None:
        return ""
    path, fmt, ok = section.path, section.format, section.checksum_ok
    if fmt is None:
        return f"dra_manager_state: absent ({escape(path)})\n" if style.headers else ""
    checksum = {
        True: "checksum ok",
        False: paint("checksum MISMATCH", "red", style.color),
        None: "checksum not checked",
    }[ok]
    head = f"dra_manager_state: format {escape(fmt)}, {checksum} ({escape(path)})\n" if style.headers else ""
    return head + claims_table(section.claims, style)
