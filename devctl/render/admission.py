"""``devctl fit``'s table for people: the verdict, the policies, each container, the hints, what would fit.

Within 80 columns (a longer line is wrapped at spaces, its rest indented); every string from outside devctl
(resource names, device IDs, container and pod names, file paths, messages quoting them) passes ``escape`` first.
"""

from __future__ import annotations

from collections.abc import Sequence

from devctl.base.escape import escape
from devctl.base.units import format_bytes, format_cpulist
from devctl.core.admission import FitAnswer, FitContainer, FitDevices, FitHint, FitProviderHints

WIDTH = 80


def _wrap(line: str, width: int = WIDTH) -> list[str]:
    """A line within ``width`` columns: wrapped at spaces, continued under its own indent plus four."""
    if len(line) <= width:
        return [line]
    import textwrap

    indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line[:width]]


def verdict_line(answer: FitAnswer) -> str:
    if answer.admit is None:
        return "UNKNOWN: " + escape(answer.message.removeprefix("unknown: "))
    if answer.admit:
        return "ADMIT"
    return f"REJECT: {escape(answer.reason or '')}: {escape(answer.message)}"


def policy_line(answer: FitAnswer) -> str:
    p = answer.policy
    what_if = f" (what if: {', '.join(p.what_if)})" if p.what_if else ""
    follows = f"kubelet {escape(p.version)}" if p.version else f"kubelet {p.follows} (node's version unknown)"
    reserved = f", reserved CPUs {format_cpulist(p.reserved_cpus)}" if p.reserved_cpus else ""
    return (
        f"policy: topology {escape(p.topology)}, scope {escape(p.scope)}, cpu {escape(p.cpu)}, "
        f"memory {escape(p.memory)}{reserved}{what_if}; from {escape(p.source)}; follows {follows}"
    )


def _amount(resource: str, value: int) -> str:
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == "memory" or resource.startswith(("hugepages-", "ephemeral-storage")):
        return format_bytes(value)
    return str(value)


def _amounts(values: dict[str, int] | None) -> str:
    if values is None:
        return "unknown"
    return ", ".join(f"{escape(r)} {_amount(r, v)}" for r, v in sorted(values.items())) or "none"


def resources_line(answer: FitAnswer) -> str:
    """What the resource fit compared against: ``node: allocatable cpu 30, memory 127.9Gi; pods request unknown``."""
    return f"node: allocatable {_amounts(answer.allocatable)}; running pods request {_amounts(answer.requested)}"


def nodes_text(nodes: Sequence[int] | None) -> str:
    return "any" if nodes is None else ",".join(map(str, nodes)) if nodes else "-"


def hint_text(hint: FitHint | None) -> str:
    """``0*`` a preferred hint on NUMA node 0, ``0,1`` a hint that is not preferred, ``any`` the nil mask."""
    if hint is None:
        return "-"
    return nodes_text(hint.numa_nodes) + ("*" if hint.preferred else "")


def devices_text(d: FitDevices) -> str:
    name = escape(d.resource)
    if d.ids is not None:
        return f"{name}: {', '.join(escape(i) for i in d.ids)} (NUMA {nodes_text(d.numa_nodes)})"
    if d.per_node is not None:
        parts = [
            f"any {n} of NUMA {node}" if node != "-1" else f"any {n} without NUMA" for node, n in d.per_node.items()
        ]
        return f"{name}: " + " + ".join(parts)
    return f"{name}: any {d.count} of NUMA {nodes_text(d.numa_nodes)}"


def _provider_text(h: FitProviderHints) -> str:
    label = h.provider if h.provider == h.resource else f"{h.provider} {escape(h.resource)}"
    if h.hints is None:
        return f"{label}: no preference"
    if not h.hints:
        return f"{label}: none fits"
    return f"{label}: " + " ".join(hint_text(x) for x in h.hints)


def container_lines(c: FitContainer) -> list[str]:
    kind = " (sidecar)" if c.restartable else " (init)" if c.init else ""
    lines = [f"container {escape(c.name)}{kind}: affinity {hint_text(c.affinity)}"]
    lines.extend(f"  devices  {devices_text(d)}" for d in c.devices)
    if c.cpu_ids:
        lines.append(f"  cpus     {format_cpulist(c.cpu_ids)} (exclusive)")
    if c.memory_numa_nodes:
        lines.append(f"  memory   NUMA {nodes_text(c.memory_numa_nodes)}")
    if c.hints:
        lines.append("  hints    " + "; ".join(_provider_text(h) for h in c.hints))
    return lines


def fit_table(answer: FitAnswer, width: int = WIDTH) -> str:
    """The whole answer as lines of at most ``width`` columns (``*``: a preferred hint); the TUI gives its own."""
    lines = [verdict_line(answer), policy_line(answer), resources_line(answer)]
    for c in answer.containers:
        lines.extend(container_lines(c))
    if answer.choice_open:
        lines.append("the kubelet picks among equal devices at random: which IDs is open, as shown")
    lines.extend(f"note: {escape(n)}" for n in answer.notes)
    if answer.fits_with:
        lines.append("fits with:")
        lines.extend(f"  {escape(f.change)}: {escape(f.why)}" for f in answer.fits_with)
    elif answer.admit is False:
        lines.append("fits with: no single change found")  # said, so its absence is not read as an oversight
    return "".join(part + "\n" for line in lines for part in _wrap(line, width))
