"""The DRA claims of the node: the rows of ``devctl claims`` (devctl.analyze.claims), one per claim.

The rows are made in the rebuild thread from ``claims_view``; nothing here
derives a state of its own. Enter on a claim opens its devices in full:
health and the driver's message, NUMA nodes, and each CDI name as the runtime
resolves it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from devctl.analyze.cdi import Resolver
from devctl.analyze.claim_state import CHECKPOINTED, DRIVER_MISSING, PREPARED, STALE
from devctl.analyze.claims import ClaimDeviceRow, ClaimRow
from devctl.base.escape import escape
from devctl.base.units import UNKNOWN_COUNT, format_numa
from devctl.tui.widgets.table import Column, Row, RowSet, RowTable

# At 80 columns the health and the device names stay whole: the driver gives way first, then the pods and
# the claim's name; HEALTH is never cut (its floor is its cap).
COLUMNS = (
    Column("CLAIM", 36, min_width=12, give=1),
    Column("STATE", 14),
    Column("DRIVER", 24, min_width=6, give=3),
    Column("DEVICES", 48, min_width=12),
    Column("HEALTH", 40, min_width=40),
    Column("NUMA", 6),
    Column("PODS", 40, min_width=4, give=2),
)

_TONES = {PREPARED: "", CHECKPOINTED: "dim", STALE: "warn", DRIVER_MISSING: "bad"}


def claim_key(row: ClaimRow) -> str:
    return f"{row.namespace}/{row.name}"


def pods_text(row: ClaimRow) -> str:
    return ",".join(f"{p.namespace}/{p.name}" if p.name else (p.uid or UNKNOWN_COUNT) for p in row.pods) or "-"


def devices_text(row: ClaimRow) -> str:
    """``pool/device`` each; when every device of the claim is in one pool, its devices' names alone (``gpu-2,gpu-3``):
    the pool is in the claim's detail (Enter) and the Devices view, and the names fit 80 columns beside their health."""
    if len({d.pool for d in row.devices}) == 1:
        return ",".join(d.device for d in row.devices)
    return ",".join(f"{d.pool}/{d.device}" for d in row.devices) or "-"


def claim_row(r: ClaimRow) -> Row:
    """The cells of ``devctl claims`` (namespace and name as one ``ns/name``, as holders are written)."""
    health = [d.health or UNKNOWN_COUNT for d in r.devices]
    tone = _TONES.get(r.state or "", "warn")
    if tone == "" and any(h != "Healthy" for h in health):
        tone = "bad"
    cells = (
        claim_key(r),
        r.state or UNKNOWN_COUNT,  # pod-resources unread: the state is not guessed
        ",".join(r.drivers) or ",".join(sorted({d.driver for d in r.devices})) or "-",
        devices_text(r),
        ",".join(health) or "-",
        format_numa(sorted({n for d in r.devices for n in d.numa_nodes})),
        pods_text(r),
    )
    return Row(claim_key(r), cells, tone)


def claim_rows(rows: tuple[ClaimRow, ...]) -> list[Row]:
    return [claim_row(r) for r in rows]


def device_lines(out: Text, d: ClaimDeviceRow, cdi: Resolver, indent: str = "  ") -> None:
    """One claim device: health with the driver's message, NUMA, and each CDI name resolved as the runtime would."""
    numa = format_numa(d.numa_nodes)
    health = d.health or "no health stream"
    tone = "bold red" if d.health not in (None, "Healthy") else ""
    share = "" if d.share_id is None else f"  share {d.share_id}"
    out.append(escape(f"{indent}{d.driver} {d.pool}/{d.device}{share}  {health}  (NUMA {numa})") + "\n", tone)
    if d.health_message:
        out.append(escape(f"{indent}  health: {d.health_message}") + "\n", tone)
    if d.requests:
        out.append(escape(f"{indent}  requests {', '.join(d.requests)}") + "\n", "dim")
    for name in d.cdi_devices:
        resolved = cdi.resolve(name)
        if resolved.status == "resolved":
            out.append(escape(f"{indent}  cdi {name}") + "\n")
            out.append(escape(f"{indent}    spec   {resolved.spec}") + "\n", "dim")
        elif resolved.status == "conflict":
            out.append(escape(f"{indent}  cdi {name}: CONFLICT, defined at the same priority by") + "\n", "bold red")
            for spec in resolved.conflicting:
                out.append(escape(f"{indent}    spec   {spec}") + "\n", "bold red")
        else:
            out.append(escape(f"{indent}  cdi {name}: UNRESOLVABLE, no spec defines it") + "\n", "bold red")
        for node in resolved.device_nodes:
            where = [f"PCI {node.pci}"] if node.pci else []
            where += [f"NUMA {node.numa_node}"] if node.numa_node is not None else []
            paths = node.host_path if node.host_path == node.path else f"{node.host_path} -> {node.path}"
            out.append(escape(f"{indent}    device {paths}" + (f" ({', '.join(where)})" if where else "")) + "\n")
        for m in resolved.mounts:
            out.append(escape(f"{indent}    mount  {m.host_path} -> {m.container_path}") + "\n")
        for env in resolved.env:
            out.append(escape(f"{indent}    env    {env}") + "\n")
        for net in resolved.net_devices:
            out.append(escape(f"{indent}    netdev {net}") + "\n")
    if not d.cdi_devices:
        out.append(f"{indent}  no CDI names\n", "dim")


def claim_text(r: ClaimRow, cdi: Resolver) -> Text:
    """A claim in full: state, UID, pods, then each device with its health message and CDI resolution."""
    out = Text()
    out.append(escape(claim_key(r)) + "\n", "bold")
    state = r.state or "unknown (pod-resources unread)"
    out.append(escape(f"state {state} · UID {r.uid or 'not in dra_manager_state'}") + "\n")
    out.append(escape(f"pods {pods_text(r)}") + "\n")
    out.append("\nDevices\n", "bold underline")
    for d in r.devices:
        device_lines(out, d, cdi)
    if not r.devices:
        out.append("  none\n", "dim")
    return out


class ClaimsPane(Vertical):
    """One row per DRA claim; Enter opens it."""

    DEFAULT_CSS = """
    ClaimsPane #claims-legend { color: $text-muted; height: auto; }
    """

    LEGEND = "checkpointed: its pod is here, unused · stale: no pod here · Enter: devices, CDI"

    def compose(self) -> ComposeResult:
        yield RowTable(COLUMNS, empty="no DRA claims on this node", id="claims-table")
        yield Static(self.LEGEND, id="claims-legend", markup=False)

    @property
    def table(self) -> RowTable:
        return self.query_one(RowTable)

    def show(self, rows: RowSet) -> None:
        self.table.set_rows(rows)
