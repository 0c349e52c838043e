"""One container in full: what pod-resources says it holds, and what it was really given.

The checkpoint keeps each Allocate reply the kubelet got for the container
(``AllocResp``): env vars, mounts, device nodes, annotations and CDI devices,
which is what the runtime actually put in the container
(pkg/kubelet/cm/devicemanager/pod_devices.go, deviceRunContainerOptions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from devctl.analyze.cdi import Resolver, resolver
from devctl.analyze.claims import ClaimRow, claims_view
from devctl.analyze.holders import HolderRow, container_holders
from devctl.base.escape import escape
from devctl.base.units import UNKNOWN_COUNT, format_bytes, format_cpulist, format_numa
from devctl.model import HEALTHY, Allocation
from devctl.tui.state import ContainerDetail, NodeView
from devctl.tui.widgets.claims import device_lines
from devctl.tui.widgets.pods import alignment_text


def _line(out: Text, text: str, style: str = "") -> None:
    """One line of the view: ``text`` names what plugins and the kubelet wrote, so it goes in escaped."""
    out.append(escape(text) + "\n", style)


def _heading(out: Text, text: str) -> None:
    out.append(f"\n{text}\n", "bold underline")


def _allocation(out: Text, a: Allocation) -> None:
    if not (a.envs or a.mounts or a.devices or a.annotations or a.cdi_devices):
        _line(out, "    (empty reply: the plugin gave nothing beyond the device IDs)", "dim")
    for k, v in a.envs.items():
        _line(out, f"    env     {k}={v}")
    for m in a.mounts:
        _line(out, f"    mount   {m.host_path} -> {m.container_path}{' (ro)' if m.read_only else ''}")
    for d in a.devices:
        _line(out, f"    device  {d.host_path} -> {d.container_path} ({d.permissions or '-'})")
    for k, v in a.annotations.items():
        _line(out, f"    annot.  {k}={v}")
    for name in a.cdi_devices:
        _line(out, f"    cdi     {name}")


def _holders(out: Text, rows: tuple[HolderRow, ...]) -> None:
    """The processes of this container holding device nodes open (``devctl who``)."""
    _heading(out, "Processes holding devices (/proc, CRI)")
    if not rows:
        _line(out, "  none of its processes holds a device node open", "dim")
    for pid, path in dict.fromkeys((r.pid, r.path) for r in rows):
        r = next(x for x in rows if (x.pid, x.path) == (pid, path))
        devices = ", ".join(dict.fromkeys(x.device for x in rows if (x.pid, x.path) == (pid, path)))
        given = "" if r.allocated else "  NOT GIVEN to this container"
        _line(
            out, f"  pid {pid} {r.command}: {path} ({r.resource} {devices}){given}", "" if r.allocated else "bold red"
        )


def detail_text(
    d: ContainerDetail,
    holders: tuple[HolderRow, ...] | None = None,
    claims: Sequence[tuple[ClaimRow, Resolver]] = (),
    health: Mapping[str, Mapping[str, str]] | None = None,
) -> Text:
    """The container as a person reads it: identity, holdings, its claims' devices, alignment, the decoded allocation.

    ``claims`` are the container's DRA claims as ``devctl claims`` shows them,
    each with the CDI resolver that reads their names; ``health`` each
    device plugin device's health by resource and ID (``devctl devices``).
    """
    c = d.container
    out = Text()
    out.append(escape(f"{d.pod.namespace}/{d.pod.name}"), "bold")
    _line(out, f"  container {c.name}", "bold")
    _line(out, f"pod UID {d.pod_uid or 'unknown'}", "dim")

    _heading(out, "Holds (pod-resources)")
    for dev in c.devices:
        numa = format_numa(dev.numa_nodes)
        _line(out, f"  {dev.resource}: {', '.join(dev.ids)}  (NUMA {numa})")
        known = (health or {}).get(dev.resource, {})
        words = [known.get(i) or UNKNOWN_COUNT for i in dev.ids]  # a device no plugin lists: unknown, not healthy
        _line(
            out,
            "    health: " + ", ".join(f"{i} {w}" for i, w in zip(dev.ids, words, strict=True)),
            "" if all(w == HEALTHY for w in words) else "bold red",
        )
    if not c.devices:
        _line(out, "  no devices", "dim")
    _line(out, f"  exclusive CPUs: {format_cpulist(c.cpu_ids) or 'none (shared pool)'}")
    for m in c.memory:
        numa = format_numa(m.numa_nodes)
        _line(out, f"  {m.type}: {format_bytes(m.size)}  (NUMA {numa})")
    for claim in c.dynamic_resources:
        _line(out, f"  DRA claim {claim.claim_namespace}/{claim.claim_name}")
        for cd in claim.devices:
            cdi = f"  CDI {', '.join(cd.cdi_devices)}" if cd.cdi_devices else ""
            share = "" if cd.share_id is None else f" share {cd.share_id}"
            _line(out, f"    {cd.driver} pool {cd.pool} device {cd.device}{share}{cdi}")
    if claims:
        _heading(out, "DRA claims: device health and CDI as the runtime resolves it")
        for row, specs in claims:
            _line(out, f"  {row.namespace}/{row.name}  {row.state or 'state unknown'}", "bold")
            for device in row.devices:
                device_lines(out, device, specs, indent="    ")

    if d.alignment is not None:
        verdict = alignment_text(d.alignment)
        tone = "bold red" if d.alignment.aligned is False else ""
        _heading(out, "NUMA alignment")
        out.append(f"  {verdict}", tone)
        out.append(
            f"  (devices {list(d.alignment.device_numa)}, CPUs {list(d.alignment.cpu_numa)}, "
            f"memory {list(d.alignment.memory_numa)})\n"
        )

    _heading(out, "Given at Allocate (device manager checkpoint)")
    if not d.entries:
        _line(out, "  no checkpoint entry for this container", "dim")
    for e in d.entries:
        ids = ", ".join(f"{i} (NUMA {n})" for n, group in sorted(e.device_ids.items()) for i in group)
        _line(out, f"  {e.resource}: {ids}", "bold")
        if e.allocation is not None:
            _allocation(out, e.allocation)
        else:
            _line(out, f"    AllocResp could not be decoded: {e.allocation_error or 'unknown reason'}", "bold red")
    if holders is not None:
        _holders(out, holders)
    return out


class ContainerScreen(ModalScreen[None]):
    """Opened from the pods (or devices) view; follows the live view while open."""

    DEFAULT_CSS = """
    ContainerScreen { align: center middle; }
    ContainerScreen > VerticalScroll {
        width: 100%; max-width: 110; height: 100%; max-height: 40;
        border: round $accent; background: $surface; padding: 0 1;
    }
    ContainerScreen #detail-keys { color: $text-muted; margin-top: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, key: str, view: NodeView, *, timeline: str | None = None) -> None:
        """``timeline``: the device it was opened from, its own events from the journal (escaped by its maker)."""
        super().__init__()
        self.key = key
        self._view = view
        self.timeline = timeline

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="detail", markup=False)
            yield Static("Esc close · ↑ ↓ PgUp PgDn scroll", id="detail-keys", markup=False)

    def on_mount(self) -> None:
        self.show(self._view)
        self.query_one(VerticalScroll).focus()

    def show(self, view: NodeView) -> None:
        self._view = view
        shown = self.query("#detail").results(Static)
        target = next(shown, None)
        if target is None:
            return  # a newer view came while this screen is still being composed: on_mount shows it
        detail = view.container(self.key)
        holders = None
        claims: list[tuple[ClaimRow, Resolver]] = []
        if detail is not None:
            holders = container_holders(view.snapshot, detail.pod.namespace, detail.pod.name, detail.container.name)
            names = [f"{r.claim_namespace}/{r.claim_name}" for r in detail.container.dynamic_resources]
            if names:
                cdi = resolver(view.snapshot)
                claims = [(row, cdi) for row in claims_view(view.snapshot, names=names)]
        health = {name: {d.id: d.health for d in rows} for name, rows in view.devices.items()}
        text = (
            detail_text(detail, holders, claims, health)
            if detail
            else Text(escape(f"{self.key}: the container is gone from pod-resources"))
        )
        if self.timeline:
            text = Text.assemble(Text(self.timeline), "\n", text)
        target.update(text)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
