"""The PCI function behind each device: address, vendor and model, bound driver.

What an nvidia-smi or SR-IOV user looks for beside a device ID. The device
plugin API carries no PCI address, so it is found where the node says it:

- an ID that is a PCI address (SR-IOV VFs are listed by theirs);
- the device nodes of a CDI name handed out for the device (a DRA claim's
  CDI IDs; a device plugin's ``cdi_devices`` named after the device ID, as
  ``nvidia.com/gpu=GPU-0``), traced through ``/sys/dev/char`` by node/cdi;

- what else the physical view (analyze/physical) joins it to: NVIDIA's
  time-slicing replicas ``<id>::<n>`` to the GPU ``<id>`` leads to, and an
  allocation's device node host paths (``host_nodes``: traced by stat on a
  live node, core/physical);

then named from the host's PCI devices (sysfs, with udev's or the PCI IDs
database's names). A device none of these lead to has no function: ``null``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from devctl.analyze.cdi import resolver
from devctl.analyze.physical import physical_view
from devctl.analyze.rows import DeviceRow
from devctl.model import NodeSnapshot, PciDevice
from devctl.model.pci import normalize_pci_address


@dataclass(frozen=True)
class PciFunction:
    address: str  # 0000:3b:00.0, as sysfs spells it
    vendor_id: str | None = None  # 0x10de; None when sysfs does not list the function
    device_id: str | None = None
    vendor: str | None = None  # names: udev's, or the PCI IDs database's; None when neither knows
    device: str | None = None
    driver: str | None = None  # the kernel driver bound to it (None: none, or unknown)


def _function(address: str, known: dict[str, PciDevice]) -> PciFunction:
    d = known.get(address)
    if d is None:
        return PciFunction(address)
    return PciFunction(address, d.vendor_id or None, d.device_id or None, d.vendor_name, d.device_name, d.driver)


def cdi_addresses(snapshot: NodeSnapshot) -> dict[tuple[str, str], str]:
    """(resource or driver, device ID) -> PCI address, from the CDI names handed out for each device."""
    cdi = resolver(snapshot)
    out: dict[tuple[str, str], str] = {}

    def traced(key: tuple[str, str], names: Iterable[str]) -> None:
        for name in names:
            pci = next((n.pci for n in cdi.resolve(name).device_nodes if n.pci), None)
            if pci is not None:
                out.setdefault(key, pci)
                return

    for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
        for d in c.devices:
            traced((d.driver, f"{d.pool}/{d.device}"), d.cdi_devices)
    for e in snapshot.checkpoint.entries if snapshot.checkpoint else ():
        names = e.allocation.cdi_devices if e.allocation else ()
        for ids in e.device_ids.values():
            for i in ids:
                traced((e.resource, i), [n for n in names if n.rpartition("=")[2] == i])
    return out


# (resource or driver, device ID) -> the PCI function the physical view leads it to.
PhysicalJoin = Mapping[tuple[str, str], str]


def physical_join(snapshot: NodeSnapshot, host_nodes: Mapping[str, str | None] | None = None) -> PhysicalJoin:
    """Where the physical view leads each logical device (``physical_view``'s join, without the view)."""
    view = physical_view(snapshot, host_nodes)
    return {(d.resource, d.id): p.pci for p in view.devices for d in p.logical}


def with_hardware(
    rows: Iterable[DeviceRow],
    snapshot: NodeSnapshot,
    host_nodes: Mapping[str, str | None] | None = None,
    join: Callable[[], PhysicalJoin] | None = None,
) -> tuple[DeviceRow, ...]:
    """``rows`` with ``pci`` set where the node leads from a device to its PCI function.

    A row that neither a CDI name nor its ID places is led by the physical view's join, made once and only
    then: by ``join`` when given (a caller that keeps one across refreshes of the same node), else here.
    """
    known = {d.address: d for d in snapshot.topology.pci_devices} if snapshot.topology else {}
    via_cdi = cdi_addresses(snapshot)
    physical: PhysicalJoin | None = None
    out = []
    for row in rows:
        address = via_cdi.get((row.resource, row.id)) or normalize_pci_address(row.id)
        if address is None:
            if physical is None:
                physical = join() if join is not None else physical_join(snapshot, host_nodes)
            address = physical.get((row.resource, row.id))
        out.append(replace(row, pci=_function(address, known)) if address else row)
    return tuple(out)
