"""Tables for people, the way kubectl and crictl print them.

Upper-case headers, left-aligned columns, ``<none>`` for an empty cell, ``wide``
for more columns, no headers on request. Every function returns the text to
print (ending in a newline, or empty when there are no rows): printing and the
"No resources found." notice are the caller's.

Every cell passes ``devctl.base.escape.escape`` in ``grid`` (a coloured word has
been escaped by ``paint``), and so does every string from the node in the lines
around a table: a device ID cannot add a row or drive the terminal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from devctl.analyze import CAPACITY_NOTE
from devctl.base.escape import escape
from devctl.base.units import UNKNOWN_COUNT, format_bytes, format_count, format_cpulist
from devctl.model import (
    HEALTHY,
    ContainerDevices,
    ContainerMemory,
    ContainerResources,
    Finding,
    PluginOptions,
    PodResources,
    SocketStatus,
    SourceError,
)
from devctl.render.style import NONE, Styled, paint, word

if TYPE_CHECKING:  # the views' modules load with the command that shows them (devctl.analyze imports lazily)
    from devctl.analyze import CheckpointView, DeviceRow, PluginsView, ResourceRow, TopologyView

# kubectl's columns: left-aligned, three spaces between them, nothing else
# (k8s.io/cli-runtime/pkg/printers/tabwriter.go: padding 3).
_GAP = "   "

# The colour codes of devctl.render.style.paint: they take no room on the screen. (Data cannot hold an ESC:
# escape() has spelled it out.)
_SGR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class TableStyle:
    wide: bool = False
    headers: bool = True
    color: bool = False


# The width every default table fits: an SSH user's terminal. ``-o wide`` is never cut.
WIDTH = 80
# What marks a cut value: one character on the screen.
ELLIPSIS = "\u2026"
# A cut column keeps at least this many characters (and its header): enough of an ID to match it.
MIN_CUT = 8


def cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by ``…``: the head and the tail (the larger part,
    where IDs and generated pod names differ) stay, so a person can still match it against ``-o wide``."""
    if len(text) <= width:
        return text
    if width < 2:
        return ELLIPSIS[:width]
    keep = width - 1
    head = keep // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


def cut_path(text: str, width: int) -> str:
    """A path in ``width`` characters with its file name whole (``/var/…/kubelet_internal_checkpoint``)."""
    if len(text) <= width:
        return text
    head, sep, name = text.rpartition("/")
    room = width - len(name) - len(sep) - 1
    if not sep or room < 1:
        return cut_middle(text, width)
    return head[:room] + ELLIPSIS + sep + name


def _fit(columns: list[list[str]], cut: Sequence[int], width: int, headers: bool) -> set[int]:
    """Cut the cells of the columns ``cut`` (``cut_middle``), widest column first, until the table is at most
    ``width`` characters wide or each is down to its header or MIN_CUT; the columns cut, in place.

    Only the columns named are cut: a health word, a state, a count or a CPU list never is.
    """
    widths = [max(len(_SGR.sub("", c)) if "\x1b" in c else len(c) for c in column) for column in columns]
    over = sum(widths) + len(_GAP) * (len(widths) - 1) - width
    if over <= 0:
        return set()
    floor = {i: max(MIN_CUT, len(columns[i][0]) if headers else 0) for i in cut}
    target = _shrunk({i: widths[i] for i in cut}, floor, over)
    done = set()
    for i in cut:
        if target[i] < widths[i]:
            w = target[i]
            columns[i] = [c if len(c) <= w else cut_middle(c, w) for c in columns[i]]
            done.add(i)
    return done


def _shrunk(target: dict[int, int], floor: dict[int, int], over: int) -> dict[int, int]:
    """The widths after ``over`` characters are taken one at a time from the widest column above its floor (of
    equals the last: a pod's name outlasts its namespace), computed a level at a time: a 2 MB ID is one step,
    not two million."""
    target = dict(target)
    while over > 0:
        shrinkable = [i for i in target if target[i] > floor[i]]
        if not shrinkable:
            break
        top = max(target[i] for i in shrinkable)
        level = [i for i in shrinkable if target[i] == top]
        # Down to the next column's width, or to the highest floor among these, whichever comes first.
        below = max([target[i] for i in shrinkable if target[i] < top] + [floor[i] for i in level])
        if over >= len(level) * (top - below):
            for i in level:
                target[i] = below
            over -= len(level) * (top - below)
            continue
        rounds, extra = divmod(over, len(level))
        for n, i in enumerate(sorted(level, reverse=True)):  # each round takes from the last column first
            target[i] = top - rounds - (1 if n < extra else 0)
        over = 0
    return target


def _cell(value: object) -> str:
    if type(value) is str:  # most cells: one check
        return escape(value) if value else NONE
    if type(value) is Styled:
        return value or NONE
    if value is None or value == "" or value == () or value == []:
        return NONE
    if isinstance(value, Styled):
        return value
    return escape(str(value))


def _cells(column: Sequence[object]) -> list[str]:
    """Each value's cell (``_cell``, stripped): a column of plain strings is checked in one pass.

    A column of strings that holds nothing ``escape`` would change (one
    ``isprintable`` over the column's text, in C) needs no escape call per cell.
    """
    if set(map(type, column)) == {str}:
        text = "".join(column)  # type: ignore[arg-type]  # all str, checked above
        if text.isprintable() and "\\" not in text:
            return [v.strip() if v else NONE for v in column]  # type: ignore[attr-defined]
    return [_cell(v).strip() for v in column]


def grid(headers: Sequence[str], rows: Iterable[Sequence[object]], style: TableStyle, cut: Sequence[int] = ()) -> str:
    """Rows under upper-case headers, three spaces apart as kubectl prints them; '' when there are none.

    Written here, not by tabulate: a 50,000-pod table took seconds in tabulate's general machinery. The
    text is what tabulate prints for the same rows (tests/test_render.py compares them): cells stripped
    of surrounding whitespace, each column as wide as its widest cell, colour codes taking no room. A
    non-ASCII cell goes to tabulate (_tabulated), whose width for it (wcwidth's, when installed) is the
    one the tables have always had. Cells are made a column at a time (``_cells``).

    ``cut``: the columns whose values may be cut in their middle (``_fit``) so that a table that is not
    ``wide`` fits WIDTH characters; ``-o wide`` keeps every value whole.
    """
    rows = list(rows)
    if not rows:
        return ""
    if len({len(row) for row in rows}) != 1 or (style.headers and len(headers) != len(rows[0])):
        # tabulate fills a short row with empty cells
        body = [[_cell(v).strip() for v in row] for row in rows]
        if style.headers:
            body.insert(0, [h.upper() for h in headers])
        return _tabulated(body)
    columns = [_cells(column) for column in zip(*rows, strict=True)]
    if style.headers:
        for header, column in zip(headers, columns, strict=True):
            column.insert(0, header.upper())
    fitted = _fit(columns, cut, WIDTH, style.headers) if cut and not style.wide else set()
    widths = []
    coloured = False
    for i, column in enumerate(columns):
        text = "".join(column)
        if not text.isascii() and not (i in fitted and text.replace(ELLIPSIS, "").isascii()):
            return _tabulated([list(row) for row in zip(*columns, strict=True)])
        if "\x1b" in text:
            coloured = True
            widths.append(max(len(_SGR.sub("", c)) for c in column))
        else:
            widths.append(max(map(len, column)))
    table = zip(*columns, strict=True)
    if coloured:  # each cell padded by its visible width
        last = len(widths) - 1
        lines = (
            _GAP.join(c if i == last else c + " " * (widths[i] - len(_SGR.sub("", c))) for i, c in enumerate(row))
            for row in table
        )
    else:  # one format per table, one C call per row
        line = _GAP.join([f"{{:<{w}}}" for w in widths[:-1]] + ["{}"]).format
        lines = (line(*row) for row in table)
    return "\n".join([line.rstrip() for line in lines]) + "\n"


def _tabulated(body: list[list[str]]) -> str:
    """``body`` laid out by tabulate with kubectl's gaps: for cells whose width only tabulate knows."""
    from tabulate import DataRow, TableFormat, tabulate

    kubectl = TableFormat(None, None, None, None, DataRow("", _GAP, ""), DataRow("", _GAP, ""), 0, None)
    text = tabulate(body, tablefmt=kubectl, disable_numparse=True, stralign="left")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _numa(nodes: Iterable[int]) -> str:
    """NUMA nodes as ``0,1``; '' (``<none>`` in the table) when none is known, never -1 or ``-``."""
    return ",".join(str(n) for n in nodes if n >= 0)


def short_name(resource: str) -> str:
    """``nvidia.com/gpu`` -> ``gpu``, as the TUI's narrow columns write it; a DRA driver stays whole."""
    return resource.rsplit("/", 1)[-1]


def some(items: Sequence[str], shown: int = 2) -> str:
    """The first ``shown`` items and how many more, as kubectl abbreviates a list: ``GPU-0,GPU-1 +2``."""
    more = len(items) - shown
    return ",".join(items[:shown]) + (f" +{more}" if more > 0 else "")


def _flag(on: bool | None) -> str:
    return "" if on is None else ("yes" if on else "no")


def _options(o: PluginOptions | None) -> tuple[str, str]:
    if o is None:
        return "", ""
    return _flag(o.pre_start_required), _flag(o.get_preferred_allocation_available)


def names(items: Iterable[str]) -> str:
    """``-q``: one name per line (escaped: a newline in a name must not make two)."""
    return "".join(f"{escape(n)}\n" for n in items)


def warnings(errors: Iterable[SourceError], color: bool = False) -> str:
    """Source errors as ``warning: <source>: <message>`` lines, for stderr."""
    return "".join(f"{paint('warning', 'yellow', color)}: {escape(e.source)}: {escape(e.message)}\n" for e in errors)


# --- ls -------------------------------------------------------------------------------------


# ls's counts under the TUI's short headers, so that the table fits 80 columns:
# CAP capacity, ALLOC allocatable (healthy), USED allocated (held), FREE, BAD unhealthy.
RESOURCE_COUNTS = ["cap", "alloc", "used", "free", "bad"]


def resources_table(rows: Sequence[ResourceRow], style: TableStyle) -> str:
    headers = ["name", "status", *RESOURCE_COUNTS]
    if style.wide:
        headers += ["numa", "pre-start", "preferred", "socket"]
    out = []
    for r in rows:
        row: list[object] = [
            r.name,
            word(r.status, style.color),
            format_count(r.capacity, r.capacity_min),
            format_count(r.allocatable),
            format_count(r.allocated),
            format_count(r.free),
            paint(format_count(r.unhealthy), "red", style.color and bool(r.unhealthy)),
        ]
        if style.wide:
            row += [_numa(r.numa_nodes), *_options(r.options), r.socket]
        out.append(row)
    text = grid(headers, out, style)
    if text and style.headers and any(r.capacity is None and r.capacity_min for r in rows):
        text += f"\n{CAPACITY_NOTE}\n"
    return text


# --- devices ----------------------------------------------------------------------------------


def devices_table(
    rows: Sequence[DeviceRow],
    style: TableStyle,
    procs: dict[tuple[str, str], int] | None = None,
    procs_asked: bool = False,
) -> str:
    """RESOURCE ID HEALTH NUMA ALLOCATED-TO, which fits 80 columns; ``wide`` adds the state, the PCI function
    (address, vendor, model, bound driver) and, when ``procs_asked``, PROCS: processes holding each device open
    (``?`` when ``procs`` is None, or does not count the device: none of its nodes is known).

    The state is the health and the holders in one word, so the narrow table leaves it to ``wide``.
    """
    with_procs = style.wide and procs_asked
    headers = ["resource", "id", "health", "numa", "allocated-to"]
    if style.wide:
        headers += ["state", "pci", "vendor", "model", "driver"] + (["procs"] if with_procs else [])
    out = []
    for d in rows:
        if d.allocated_to is None:
            holders = UNKNOWN_COUNT  # pod-resources could not be read: who holds it is unknown
        elif style.wide:
            holders = ",".join(f"{h.namespace}/{h.pod}/{h.container}" for h in d.allocated_to)
        else:
            holders = ",".join(dict.fromkeys(f"{h.namespace}/{h.pod}" for h in d.allocated_to))
        row: list[object] = [d.resource, d.id, word(d.health, style.color), _numa(d.numa_nodes), holders]
        if style.wide:
            pci = d.pci
            row += [word(d.state or UNKNOWN_COUNT, style.color)]
            if pci is None:
                row += ["", "", "", ""]
            else:
                row += [pci.address, pci.vendor or pci.vendor_id, pci.device or pci.device_id, pci.driver]
            if with_procs:
                row.append(UNKNOWN_COUNT if procs is None else procs.get((d.resource, d.id), UNKNOWN_COUNT))
        out.append(row)
    return grid(headers, out, style, cut=(0, 1, 4))  # RESOURCE, ID, ALLOCATED-TO; never HEALTH or NUMA


# --- pods and get ------------------------------------------------------------------------------


def _memory(memory: Iterable[ContainerMemory]) -> str:
    totals: dict[str, int] = {}
    for m in memory:
        totals[m.type] = totals.get(m.type, 0) + m.size
    return " ".join(f"{t}={format_bytes(n)}" for t, n in totals.items())


# Each device plugin device's health: resource -> device ID -> Healthy, Unhealthy, Missing or Unknown.
Health = Mapping[str, Mapping[str, str]]


def _devices(c: ContainerResources, wide: bool, health: Health | None = None) -> str:
    """Each resource's devices: IDs under full names when wide (a device that is not Healthy with its health
    beside it, ``GPU-5(Unhealthy)``), else counts under short names (DRA drivers too)."""
    if wide:
        known = health or {}

        def ids(d: ContainerDevices) -> str:
            of = known.get(d.resource, {})
            return ",".join(i if of.get(i, HEALTHY) == HEALTHY else f"{i}({of[i]})" for i in d.ids)

        return " ".join(f"{d.resource}={ids(d)}" for d in c.devices)
    devices = c.devices
    if len(devices) == 1 and not c.dynamic_resources:  # most containers: one resource, no claims
        (d,) = devices
        return f"{short_name(d.resource)}={len(d.ids)}"
    counts: dict[str, int] = {}
    for d in devices:
        name = short_name(d.resource)
        counts[name] = counts.get(name, 0) + len(d.ids)
    for r in c.dynamic_resources:
        for dev in r.devices:
            counts[dev.driver] = counts.get(dev.driver, 0) + 1
    return " ".join(f"{name}={n}" for name, n in counts.items())


def healthy_of(c: ContainerResources, health: Health | None) -> tuple[int | None, int]:
    """How many of the container's devices (device plugins' and DRA claims') are Healthy, and of how many;
    None when the health of any is unknown (its plugin or driver did not say): unknown, never 0."""
    total = 0
    healthy = 0
    unknown = False
    for d in c.devices:
        of = health.get(d.resource) if health is not None else None
        for i in d.ids:
            total += 1
            h = of.get(i) if of is not None else None
            if h is None or h == "Unknown":
                unknown = True
            elif h == HEALTHY:
                healthy += 1
    for r in c.dynamic_resources:
        for dev in r.devices:
            total += 1
            if dev.health is None:
                unknown = True
            elif dev.health == HEALTHY:
                healthy += 1
    return (None if unknown else healthy), total


def _healthy_cell(c: ContainerResources, health: Health | None, color: bool) -> object:
    """``3/4`` (healthy of all, as claims' HEALTHY), ``?/4`` when any health is unknown, ``<none>`` for no device."""
    healthy, total = healthy_of(c, health)
    if not total:
        return ""
    if healthy is None:
        return paint(f"?/{total}", "yellow", color)
    return paint(f"{healthy}/{total}", "red" if healthy < total else "green", color)


def _claims(c: ContainerResources) -> str:
    return " ".join(
        f"{r.claim_namespace}/{r.claim_name}="
        + ",".join(
            f"{d.driver}/{d.pool}/{d.device}" + ("" if d.share_id is None else f" (share {d.share_id})")
            for d in r.devices
        )
        for r in c.dynamic_resources
    )


def pods_table(pods: Sequence[PodResources], style: TableStyle, health: Health | None = None) -> str:
    """One row per container: its devices (counts by short name; IDs when wide), how many are healthy
    (``health``: each device plugin device's; a DRA device's is its own) and its exclusive CPUs.

    ``wide`` adds the memory the memory manager pinned, the NUMA nodes and the DRA claims.
    """
    headers = ["namespace", "pod", "container", "devices", "healthy", "cpus"]
    if style.wide:
        headers += ["memory", "numa", "claims"]
    out = []
    for p in pods:
        for c in p.containers:
            cpus = format_cpulist(c.cpu_ids) if c.cpu_ids else ""
            row: list[object] = [
                p.namespace,
                p.name,
                c.name,
                _devices(c, style.wide, health),
                _healthy_cell(c, health, style.color),
                cpus,
            ]
            if style.wide:
                numa = sorted(
                    {n for d in c.devices for n in d.numa_nodes} | {n for m in c.memory for n in m.numa_nodes}
                )
                row += [_memory(c.memory), _numa(numa), _claims(c)]
            out.append(row)
    return grid(headers, out, style, cut=(0, 1, 2))  # NAMESPACE, POD, CONTAINER; never DEVICES, HEALTHY or CPUS


# --- topo ----------------------------------------------------------------------------------------


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
            _numa(a.device_numa),
            _numa(a.cpu_numa),
            _numa(a.memory_numa),
        ]
        for a in view.alignment
    ]
    table = grid(["namespace", "pod", "container", "aligned", "device-numa", "cpu-numa", "memory-numa"], aligned, style)
    if table:
        parts.append(table)
    return sep.join(parts)


# --- plugins ----------------------------------------------------------------------------------------


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
            row += [p.kind, p.healthy, *_options(p.options), registry, p.error]
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


# --- checkpoint -------------------------------------------------------------------------------------


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


# --- doctor -----------------------------------------------------------------------------------------

# The colour of each severity on a terminal; the word itself is always printed.
_SEVERITY_COLORS = {"error": "red", "warning": "yellow", "info": "dim"}


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` in lines of at most ``width`` (40 at least), never breaking a word, flag or path."""
    import textwrap

    return textwrap.wrap(
        text,
        max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def findings_table(findings: Sequence[Finding], style: TableStyle, width: int = 80) -> str:
    """One row per finding, SEVERITY CODE SUBJECT, with its message and hint as indented lines under it.

    What to do is the point of doctor, so the hint is always shown; message
    and hint are sentences, so they are wrapped to ``width`` under the row
    rather than stretched across a column. ``wide`` puts both in columns, one
    line per finding, for grep.
    """
    headers = ["severity", "code", "subject"] + (["message", "hint"] if style.wide else [])
    rows = []
    for f in findings:
        row = [paint(f.severity, _SEVERITY_COLORS.get(f.severity, ""), style.color), f.code, f.subject]
        rows.append([*row, f.message, f.hint] if style.wide else row)
    text = grid(headers, rows, style)
    if style.wide or not text:
        return text
    lines = text.splitlines()
    body = lines[1:] if style.headers else lines  # cells are escaped: one line per row
    out = lines[:1] if style.headers else []
    indent = "    "
    for line, f in zip(body, findings, strict=True):
        out.append(line)
        out += _wrap(escape(f.message), width, indent, indent)
        if f.hint:
            hint = _wrap(escape(f.hint), width, indent + "hint: ", indent + "      ")
            hint[0] = hint[0].replace("hint:", paint("hint", "dim", style.color) + ":", 1)
            out += hint
    return "\n".join(out) + "\n"
