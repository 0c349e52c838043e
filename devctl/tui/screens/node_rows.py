"""The main screen's views by name (keys, titles, what `:` takes) and the rows it shows, made off the event loop."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from devctl.analyze import DeviceRow
from devctl.analyze.cdi import Resolver, resolver
from devctl.analyze.claims import ClaimRow, claims_view
from devctl.model import Finding
from devctl.tui.state import NodeView
from devctl.tui.widgets import claims, devices, pods, resources
from devctl.tui.widgets.table import Row, RowSet, row_set

VIEWS = ("resources", "devices", "pods", "numa", "events", "claims")
TITLES = {
    "resources": "1 Resources",
    "devices": "2 Devices",
    "pods": "3 Pods",
    "numa": "4 NUMA",
    "events": "5 Events",
    "claims": "6 Claims",
}
CONTROL_ACTIONS = {"toggle_health", "add_device", "remove_device"}
# What `:` takes for each view, k9s-style: its name, the CLI command that shows it, short forms.
VIEW_NAMES = {
    **{v: v for v in VIEWS},
    **{"res": "resources", "ls": "resources", "resource": "resources"},
    **{"dev": "devices", "device": "devices", "po": "pods", "pod": "pods"},
    **{"topo": "numa", "ev": "events", "event": "events", "watch": "events"},
    **{"claim": "claims", "cl": "claims", "dra": "claims", "doctor": "resources"},
}


@dataclass(frozen=True)
class Presented:
    """The rows of every table for one view of the node, made in the rebuild thread."""

    resources: RowSet
    devices: dict[str, RowSet]
    pods: RowSet
    claims: RowSet
    claim_rows: dict[str, ClaimRow]  # by ``ns/name``, for Enter
    cdi: Resolver  # CDI names as the runtime resolves them, for a claim's detail


class Presenter:
    """Formats every row off the event loop: 10,000 devices take longer to format than a key may wait.

    Called only from the rebuild thread, one rebuild at a time; it remembers
    the device rows it made, so that the next rebuild formats only what changed.
    """

    def __init__(self) -> None:
        self._made: dict[DeviceRow, Row] = {}

    def __call__(self, view: NodeView) -> Presented:
        made: dict[DeviceRow, Row] = {}
        for rows in view.devices.values():
            for d in rows:
                if (row := self._made.get(d)) is not None:
                    made[d] = row
        self._made = made
        claimed = claims_view(view.snapshot)
        return Presented(
            resources=row_set(resources.COLUMNS, resources.resource_rows(view)),
            devices={name: row_set(devices.COLUMNS, devices.device_rows(view, name, made)) for name in view.devices},
            pods=row_set(pods.COLUMNS, pods.pod_rows(view)),
            claims=row_set(claims.COLUMNS, claims.claim_rows(claimed)),
            claim_rows={claims.claim_key(c): c for c in claimed},
            cdi=resolver(view.snapshot),
        )


class Diagnosed(Message):
    """Doctor's findings on one view, made in a thread, with the rows of their table."""

    def __init__(self, view: NodeView, findings: tuple[Finding, ...], rows: RowSet, seconds: float) -> None:
        super().__init__()
        self.view = view
        self.findings = findings
        self.rows = rows
        self.seconds = seconds
