"""Physical devices (``devctl hw``): which logical devices are one PCI function, and who holds each (issue 33).

A logical device is a device plugin's device ID, a DRA device (``<pool>/<device>`` of a driver) or a CDI
name in use that neither of those accounts for. Each is joined to the PCI function it is on by, in order
of strength:

1. the device nodes it is given: the CDI names handed out for it (its claim's, or its allocation's named
   after its ID, or ``<resource>=<id>`` in a spec) and its allocation's device specs' host paths, each
   traced major:minor → ``<sysfs>/dev/char`` → PCI function (node/cdi traces the specs' nodes; a host path
   leads where a spec's node of that host path leads, or where the caller's ``host_nodes`` say). Nodes that
   lead to no function (``/dev/nvidiactl``, ``nvidia-caps``) are passed over, so a MIG device lands on its
   parent GPU through ``/dev/nvidia<N>``; nodes leading to several functions decide nothing;
2. an ID that is a PCI address (SR-IOV VFs are listed by theirs);
3. NVIDIA's time-slicing replicas ``<id>::<n>``: every replica is the GPU that any replica of ``<id>``, or
   ``<id>`` itself, leads to.

What leads nowhere is ``unresolved``, with the reason. A function that a logical device leads to but sysfs
does not list is ``gone``; when sysfs listed no function at all (unreadable, empty) nothing is gone: the
devices' physical side is unknown. Pure: model values in, values out. Bounded: at most ``MAX_FUNCTIONS`` physical
devices and ``MAX_LOGICAL`` logical devices are joined; ``omitted`` says what was left out.

Findings (``findings``), for doctor:

- ``physical-shared`` (info): two or more pods share one physical device through replicas; names the pods.
- ``physical-replicas-in-container`` (warning): one container holds two or more replicas of one physical
  device among the 2+ devices of a resource it asked for: it asked for several devices and got one.
- ``physical-gone`` (error): a logical device leads to a PCI function sysfs no longer lists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from devctl.analyze.cdi import Resolver, names_in_use, resolver
from devctl.analyze.inventory import devices_view
from devctl.analyze.pcie import LISTED_CLASSES
from devctl.model import Finding, NodeSnapshot, Severity
from devctl.model.allocations import device_nodes
from devctl.model.pci import normalize_pci_address
from devctl.model.pcie import PciClass, PciTree, pci_class_of
from devctl.model.serial import json_field

MAX_FUNCTIONS = 512
MAX_LOGICAL = 10_000
REPLICA = re.compile(r"(.+)::(\d+)")  # NVIDIA time-slicing: <id>::<n>

DEVICE_PLUGIN, DRA, CDI = "device-plugin", "dra", "cdi"


@dataclass(frozen=True)
class PhysicalHolder:
    namespace: str
    pod: str
    container: str | None = None  # None: a CDI name's user, known by pod only


@dataclass(frozen=True)
class LogicalDevice:
    kind: str  # device-plugin | dra | cdi
    resource: str  # the resource; a DRA driver; a CDI name's kind (vendor.com/class)
    id: str  # the device ID; <pool>/<device> for DRA; the CDI device name
    holders: tuple[PhysicalHolder, ...] | None = ()  # None: who holds it is unknown (pod-resources unread)


@dataclass(frozen=True)
class PhysicalDevice:
    """One PCI function and the logical devices on it; the names are None when sysfs does not list it."""

    pci: str
    class_: str | None = json_field("class")
    vendor_id: str | None = None
    device_id: str | None = None
    vendor: str | None = None
    model: str | None = None
    numa_node: int | None = None  # sysfs' (-1 when it says so); None when unlisted or unreadable
    logical: tuple[LogicalDevice, ...] = ()


@dataclass(frozen=True)
class Unresolved:
    logical: LogicalDevice
    reason: str

    def line(self) -> str:
        return f"{self.logical.resource} {self.logical.id}: {self.reason}"


@dataclass(frozen=True)
class PhysicalView:
    devices: tuple[PhysicalDevice, ...]
    unresolved: tuple[Unresolved, ...] = ()
    gone: tuple[str, ...] = ()  # addresses logical devices lead to that sysfs does not list
    sysfs_read: bool = False  # the host's PCI functions were read (else nothing can be said gone)
    omitted: tuple[str, ...] = field(default=())  # one line per bound reached


def _base(device_id: str) -> str:
    m = REPLICA.fullmatch(device_id)
    return m.group(1) if m else device_id


class _Tracer:
    """The node's leads from a logical device to PCI functions: CDI names, allocation host paths."""

    def __init__(self, snapshot: NodeSnapshot, host_nodes: Mapping[str, str | None] | None):
        self.cdi: Resolver = resolver(snapshot)
        self.host: dict[str, str | None] = {}
        for spec in snapshot.cdi.specs if snapshot.cdi else ():
            if spec.error is None:
                for edits in (spec.edits, *(d.edits for d in spec.devices)):
                    for n in edits.device_nodes:
                        if n.pci or n.major is not None:
                            self.host.setdefault(n.host_path, n.pci)
        self.host.update(host_nodes or {})
        self.paths = device_nodes(snapshot.checkpoint)
        self.names: dict[tuple[str, str], list[str]] = {}
        for e in snapshot.checkpoint.entries if snapshot.checkpoint else ():
            given = e.allocation.cdi_devices if e.allocation else ()
            ids = [i for ids in e.device_ids.values() for i in ids]
            by_part: dict[str, list[str]] = {}
            for name in given:
                by_part.setdefault(name.rpartition("=")[2], []).append(name)
            for i in ids:
                mine = given if len(ids) == 1 else by_part.get(i) or by_part.get(_base(i), [])
                self.names.setdefault((e.resource, i), []).extend(mine)
        for c in snapshot.dra_checkpoint.claims if snapshot.dra_checkpoint else ():
            for d in c.devices:
                self.names.setdefault((d.driver, f"{d.pool}/{d.device}"), []).extend(d.cdi_devices)
        for p in snapshot.pods or ():
            for ctr in p.containers:
                for dr in ctr.dynamic_resources:
                    for cd in dr.devices:
                        self.names.setdefault((cd.driver, f"{cd.pool}/{cd.device}"), []).extend(cd.cdi_devices)

    def of_names(self, names: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for name in dict.fromkeys(names):
            out.update(n.pci for n in self.cdi.device_nodes(name) or () if n.pci)
        return out

    def strong(self, d: LogicalDevice) -> tuple[str | None, str]:
        """The function ``d`` leads to by its nodes or its ID, or None and why not."""
        if d.kind == CDI:
            names = [f"{d.resource}={d.id}"]
        else:
            names = self.names.get((d.resource, d.id), [])
            if d.kind == DEVICE_PLUGIN:
                names = [*names, f"{d.resource}={d.id}", f"{d.resource}={_base(d.id)}"]
        found = self.of_names(names)
        if len(found) == 1:
            return found.pop(), ""
        if found:
            return None, f"its CDI devices lead to {len(found)} PCI functions ({', '.join(sorted(found)[:3])})"
        # A request's device specs belong to every device of it: they decide only when they lead to one function.
        paths = self.paths.get((d.resource, d.id), ()) if d.kind == DEVICE_PLUGIN else ()
        found = {p for p in (self.host.get(h) for h in paths) if p}
        if len(found) == 1:
            return found.pop(), ""
        address = normalize_pci_address(d.id.rpartition("/")[2] if d.kind == DRA else d.id)
        if address:
            return address, ""
        if found:
            return None, f"its device nodes lead to {len(found)} PCI functions ({', '.join(sorted(found)[:3])})"
        return None, "no device node, CDI device or PCI address of it leads to a PCI function"


class _Holder(Protocol):
    @property
    def namespace(self) -> str: ...
    @property
    def pod(self) -> str: ...
    @property
    def container(self) -> str: ...


def _holders(allocated: Iterable[_Holder] | None) -> tuple[PhysicalHolder, ...] | None:
    if allocated is None:
        return None
    return tuple(PhysicalHolder(h.namespace, h.pod, h.container) for h in allocated)


def _logical(snapshot: NodeSnapshot, tracer: _Tracer) -> list[LogicalDevice]:
    out = [LogicalDevice(r.kind, r.resource, r.id, _holders(r.allocated_to)) for r in devices_view(snapshot)]
    consumed = {n for names in tracer.names.values() for n in names}
    consumed.update(f"{d.resource}={d.id}" for d in out)
    consumed.update(f"{d.resource}={_base(d.id)}" for d in out)
    for name, uses in names_in_use(snapshot).items():
        if name in consumed:
            continue
        kind, _, device = name.partition("=")
        pods = dict.fromkeys(u.pod for u in uses if u.pod)
        holders = tuple(PhysicalHolder(*p.partition("/")[::2]) for p in pods)
        out.append(LogicalDevice(CDI, kind, device, holders))
    return out


def _replicas(devices: list[LogicalDevice], at: dict[int, str], why: dict[int, str], tracer: _Tracer) -> None:
    """Each unresolved replica to the one function its siblings (or its bare ID) lead to."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, d in enumerate(devices):
        m = REPLICA.fullmatch(d.id) if d.kind == DEVICE_PLUGIN else None
        if m:
            groups.setdefault((d.kind, d.resource, m.group(1)), []).append(i)
    for (kind, resource, base), members in groups.items():
        if all(i in at for i in members):
            continue
        found = {at[i] for i in members if i in at}
        if not found:
            address, _ = tracer.strong(LogicalDevice(kind, resource, base))
            found = {address} if address else set()
        for i in members:
            if i in at:
                continue
            if len(found) == 1:
                at[i] = next(iter(found))
                why.pop(i, None)
            elif found:
                why[i] = f"replicas of {base} lead to {len(found)} PCI functions"
            else:
                why[i] = f"a replica of {base}: neither {base} nor another replica of it leads to a PCI function"


def _known(snapshot: NodeSnapshot, tree: PciTree | None) -> dict[str, PhysicalDevice] | None:
    """What sysfs says of each PCI function (``tree``'s when given, else the snapshot's topology's), by address;
    None when no function was read (an unreadable or empty tree): then nothing can be said gone."""
    if tree is not None:
        known = {
            f.address: PhysicalDevice(
                f.address,
                class_=f.pci_class.value if f.class_id else None,  # None: its class could not be read
                vendor_id=f.vendor_id or None,
                device_id=f.device_id or None,
                vendor=f.vendor,
                model=f.model,
                numa_node=f.numa_node,  # None where unreadable, -1 as the kernel says it
            )
            for f in tree.functions
        }
    else:
        known = {
            d.address: PhysicalDevice(
                d.address,
                class_=pci_class_of(d.class_id).value if d.class_id else None,
                vendor_id=d.vendor_id or None,
                device_id=d.device_id or None,
                vendor=d.vendor_name,
                model=d.device_name,
                numa_node=d.numa_node,
            )
            for d in (snapshot.topology.pci_devices if snapshot.topology else ())
        }
    return known or None


def physical_view(
    snapshot: NodeSnapshot, host_nodes: Mapping[str, str | None] | None = None, functions: PciTree | None = None
) -> PhysicalView:
    """Every physical device with the logical devices on it; the unresolved apart, with the reason.

    ``host_nodes`` maps device node host paths to the PCI function each leads to (None: none), for the
    allocations' nodes no CDI spec names (node/ can trace them; the view reads nothing itself).
    ``functions``: the PCI tree read on a live node (unreadable class and NUMA node are unknown there);
    else the snapshot's topology. No function read at all: ``sysfs_read`` False and nothing ``gone``.
    """
    known = _known(snapshot, functions)
    tracer = _Tracer(snapshot, host_nodes)
    devices = _logical(snapshot, tracer)
    omitted: list[str] = []
    if len(devices) > MAX_LOGICAL:
        omitted.append(f"{len(devices) - MAX_LOGICAL} logical devices left out (at most {MAX_LOGICAL} are joined)")
        devices = devices[:MAX_LOGICAL]
    at: dict[int, str] = {}
    why: dict[int, str] = {}
    for i, d in enumerate(devices):
        address, reason = tracer.strong(d)
        if address:
            at[i] = address
        else:
            why[i] = reason
    _replicas(devices, at, why, tracer)
    on: dict[str, list[LogicalDevice]] = {}
    for i in sorted(at):
        on.setdefault(at[i], []).append(devices[i])
    for f in known.values() if known else ():
        if f.class_ is None or PciClass(f.class_) in LISTED_CLASSES:  # unknown class: it may be a GPU
            on.setdefault(f.pci, [])
    addresses = sorted(on)
    if len(addresses) > MAX_FUNCTIONS:
        omitted.append(f"{len(addresses) - MAX_FUNCTIONS} PCI functions left out (at most {MAX_FUNCTIONS} are shown)")
        addresses = addresses[:MAX_FUNCTIONS]
    gone = tuple(a for a in addresses if known is not None and a not in known and on[a])
    return PhysicalView(
        devices=tuple(replace((known or {}).get(a) or PhysicalDevice(a), logical=tuple(on[a])) for a in addresses),
        unresolved=tuple(Unresolved(devices[i], why[i]) for i in sorted(why)),
        gone=gone,
        sysfs_read=known is not None,
        omitted=tuple(omitted),
    )


def _pod(h: PhysicalHolder) -> str:
    return f"{h.namespace}/{h.pod}"


def _shared(p: PhysicalDevice) -> Finding | None:
    pods = dict.fromkeys(_pod(h) for d in p.logical if REPLICA.fullmatch(d.id) for h in d.holders or ())
    if len(pods) < 2:
        return None
    names = ", ".join(list(pods)[:8]) + (f" and {len(pods) - 8} more" if len(pods) > 8 else "")
    return Finding(
        Severity.INFO,
        "physical-shared",
        p.pci,
        f"{len(pods)} pods share the physical device {p.pci} through replicas: {names}",
        "time-slicing gives no memory or fault isolation between them; use MIG or whole devices where that matters",
    )


def _doubled(p: PhysicalDevice) -> list[Finding]:
    held: dict[tuple[str, str, str, str], list[str]] = {}
    for d in p.logical:
        if d.kind == DEVICE_PLUGIN and REPLICA.fullmatch(d.id):
            for h in d.holders or ():
                held.setdefault((h.namespace, h.pod, h.container or "", d.resource), []).append(d.id)
    out = []
    for (ns, pod, container, resource), ids in held.items():
        if len(ids) < 2:
            continue
        out.append(
            Finding(
                Severity.WARNING,
                "physical-replicas-in-container",
                f"{ns}/{pod}/{container}",
                f"container {container} of {ns}/{pod} asked for several {resource} and holds {len(ids)} replicas "
                f"of one physical device {p.pci}: {', '.join(ids[:4])}",
                "it gets one device's compute, not several; set the plugin's failRequestsGreaterThanOne "
                "(or renameByDefault) so that such requests fail instead",
            )
        )
    return out


def findings(view: PhysicalView) -> list[Finding]:
    """Doctor's findings on the physical view: shared through replicas, doubled in a container, gone."""
    out: list[Finding] = []
    for p in view.devices:
        shared = _shared(p)
        if shared is not None:
            out.append(shared)
        out.extend(_doubled(p))
    gone = set(view.gone)
    for p in view.devices:
        if p.pci not in gone:
            continue
        for d in p.logical:
            out.append(
                Finding(
                    Severity.ERROR,
                    "physical-gone",
                    f"{d.resource}/{d.id}",
                    f"{d.resource} {d.id} is on the PCI function {p.pci}, which sysfs no longer lists",
                    "the device fell off the bus or was removed: check the kernel log (devctl events) and reseat, "
                    "reset or replace it; the plugin should mark it unhealthy",
                )
            )
    return out
