"""Tables of the DRA and CDI views (``devctl claims``, ``devctl cdi``, the ``dra`` part of ``devctl checkpoint``).

Every cell goes through ``render.table.grid``, which escapes it: a driver,
claim or CDI name is data from the node and may hold control characters.
"""

from __future__ import annotations

from devctl.analyze.cdi import CdiView, unjudged_kinds
from devctl.analyze.claims import ClaimRow, DraCheckpointSection
from devctl.base.escape import escape
from devctl.render.style import paint, word
from devctl.render.table import WIDTH, TableStyle, cut_path, grid


def _pods(row: ClaimRow, namespace: str | None) -> str:
    """The claim's pods; a pod of the claim's own namespace (always so in Kubernetes) by its name alone."""
    return ",".join(
        (p.name if p.namespace == namespace else f"{p.namespace}/{p.name}") if p.name else (p.uid or "?")
        for p in row.pods
    )


def share(share_id: str | None) -> str:
    """`` (share ID)`` after a device shared between claims (its ``share_id``); nothing when it has none."""
    return "" if share_id is None else f" (share {share_id})"


def _healthy(row: ClaimRow) -> str:
    """``1/2``: healthy devices of all, as kubectl's READY; ``?`` for a device whose health is unknown."""
    if any(d.health is None for d in row.devices):
        return f"?/{len(row.devices)}"
    return f"{sum(d.health == 'Healthy' for d in row.devices)}/{len(row.devices)}"


def claims_table(rows: tuple[ClaimRow, ...], style: TableStyle) -> str:
    """NAMESPACE CLAIM STATE DRIVER HEALTHY NUMA PODS; ``wide`` adds each device with its health, the UID and
    the CDI names."""
    headers = ["namespace", "claim", "state", "driver", "healthy", "numa", "pods"]
    if style.wide:
        headers += ["devices", "health", "uid", "cdi"]
    out = []
    for r in rows:
        row: list[object] = [
            r.namespace,
            r.name,
            word(r.state or "?", style.color),
            ",".join(r.drivers) or ",".join(sorted({d.driver for d in r.devices})),
            _healthy(r),
            ",".join(str(n) for n in sorted({n for d in r.devices for n in d.numa_nodes if n >= 0})),
            _pods(r, r.namespace),
        ]
        if style.wide:
            row += [
                ",".join(f"{d.pool}/{d.device}" + share(d.share_id) for d in r.devices),
                ",".join(d.health or "?" for d in r.devices),
                r.uid or "",
                ",".join(n for d in r.devices for n in d.cdi_devices),
            ]
        out.append(row)
    return grid(headers, out, style)


def cdi_table(view: CdiView, style: TableStyle) -> str:
    """The names in use, resolved (status, PCI function and NUMA node of the device nodes, users); then the
    spec dirs. ``wide`` adds the device nodes, the spec, env and mounts."""
    headers = ["name", "status", "pci", "numa", "used-by"]
    if style.wide:
        headers += ["device-nodes", "spec", "env", "mounts"]
    out = []
    for n in view.names:
        row: list[object] = [
            n.name,
            word(n.status, style.color),
            ",".join(dict.fromkeys(d.pci for d in n.device_nodes if d.pci)),
            ",".join(dict.fromkeys(str(d.numa_node) for d in n.device_nodes if d.numa_node is not None)),
            ",".join(u.claim or u.resource or "" for u in n.used_by),
        ]
        if style.wide:
            row += [
                ",".join(d.host_path for d in n.device_nodes),
                n.spec or ",".join(n.conflicting),
                ",".join(n.env),
                ",".join(m.host_path for m in n.mounts),
            ]
        out.append(row)
    text = grid(headers, out, style, cut=(0, 4))  # NAME (a claim's carry its UID), USED-BY: cut in their middle
    if style.headers:
        bad = [s for s in view.specs if s.error]
        summary = f"spec dirs: {', '.join(escape(d) for d in view.dirs)} ({len(view.specs)} specs"
        summary += f", {paint(f'{len(bad)} invalid', 'red', style.color)})" if bad else ")"
        text += ("\n" if text else "") + summary + "\n"
        if kinds := unjudged_kinds(view):
            text += (
                f"no spec of kind {', '.join(escape(k) for k in kinds)} in these dirs: the runtime may read others,\n"
                "so doctor does not count those names as errors (--cdi-dirs to look there)\n"
            )
    return text


def dra_checkpoint_lines(section: DraCheckpointSection | None, style: TableStyle) -> str:
    """The ``dra`` part of ``devctl checkpoint``: its file, format and checksum, then its claims."""
    if section is None:
        return ""
    path, fmt, ok = section.path, section.format, section.checksum_ok
    if fmt is None:
        if not style.headers:
            return ""
        if section.error is not None:  # the warning line says why; here only that it was not read
            return f"dra_manager_state: {paint('unreadable', 'red', style.color)} ({escape(path)})\n"
        return f"dra_manager_state: absent ({escape(path)})\n"
    said = {True: "checksum ok", False: "checksum MISMATCH", None: "checksum not checked"}[ok]
    checksum = paint(said, "red", style.color and ok is False)
    if not style.headers:
        return claims_table(section.claims, style)
    start = f"dra_manager_state: format {escape(fmt)}, "
    # The path cut in its middle, its file name whole, so that the line fits WIDTH (-o wide: whole).
    shown = escape(path) if style.wide else cut_path(escape(path), WIDTH - len(start) - len(said) - 3)
    return f"{start}{checksum} ({shown})\n" + claims_table(section.claims, style)
