"""The TUI's answers to questions (issues 31 and 32): `:fit REQUEST`, `:why POD`, the journal's history.

No widgets here: each function reads through the core's use-cases (never ``devctl.node``) and returns the
text ``devctl fit`` / ``devctl why`` print (``render.admission``, ``render.why``) or model values for the
event log. They block (a loop of their own), so the screen calls them in a thread worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from devctl.analyze.history import story
from devctl.base.errors import DevctlError
from devctl.base.escape import escape
from devctl.base.waits import within
from devctl.model import HEALTHY, NodePaths
from devctl.model.history import EventSource, NodeEvent
from devctl.tui.state import LogLine

HISTORY_SINCE = timedelta(hours=24)  # what the Events view shows of the journal when it opens
HISTORY_MAX = 5000  # at most this many of its newest events (the log's own bound, widgets.events.MAX_LINES)
TIMELINE_MAX = 200  # a device's own timeline: its newest events
SLACK = 5.0  # seconds beyond the command's timeout before a question is given up as hung

# What `:fit` takes besides REQUEST words, as devctl fit's "what if" options.
_WHAT_IF = {
    "--policy": ("none", "best-effort", "restricted", "single-numa-node"),
    "--scope": ("container", "pod"),
    "--cpu-policy": ("none", "static"),
    "--memory-policy": ("None", "Static"),
}
_BAD_KINDS = ("xid", "aer", "fallen-off-bus")

# A question asked of the node (its paths, the command's timeout, the columns to fill), run in a thread:
# the text to show.
Job = Callable[[NodePaths, float, int], str]


class AnswerInputError(DevctlError):
    """`:fit` or `:why` words that cannot be asked: one line for a toast."""


def _what_if(words: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    request: list[str] = []
    given: dict[str, str] = {}
    rest = list(words)
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name not in _WHAT_IF:
            if word.startswith("-"):
                raise AnswerInputError(
                    f"fit: {word}: not an option here (--policy, --scope, --cpu-policy, --memory-policy)"
                )
            request.append(word)
            continue
        if not eq:
            if not rest:
                raise AnswerInputError(f"fit: {name} needs a value")
            value = rest.pop(0)
        allowed = {v.lower(): v for v in _WHAT_IF[name]}
        if value.lower() not in allowed:
            raise AnswerInputError(f"fit: {name} {value}: one of {', '.join(_WHAT_IF[name])}")
        given[name] = allowed[value.lower()]
    return request, given


def fit_job(words: Sequence[str]) -> Job:
    """`:fit nvidia.com/gpu=2 cpu=8 [--policy P] ...`: the question, checked now; AnswerInputError for bad words."""
    from devctl.core.admission import FitInputError, WhatIf, read_pod

    request, given = _what_if(words)
    if not request:
        raise AnswerInputError("fit: name what the pod asks for, e.g. :fit nvidia.com/gpu=2 cpu=8")
    try:
        pod = read_pod(request, None)
    except FitInputError as err:
        raise AnswerInputError(f"fit: {err.message}") from None
    what_if = WhatIf(
        given.get("--policy"), given.get("--scope"), given.get("--cpu-policy"), given.get("--memory-policy")
    )

    def job(paths: NodePaths, timeout: float, width: int) -> str:
        from devctl.core.admission import predict_fit
        from devctl.render.admission import fit_table
        from devctl.render.table import warnings

        answer = asyncio.run(within(predict_fit(paths, timeout, pod, what_if=what_if), timeout + SLACK))
        return fit_table(answer, width) + warnings(answer.errors)  # what devctl fit prints on stdout, then on stderr

    return job


def why_target(words: Sequence[str]) -> tuple[str, str]:
    """`:why ns/pod` or `:why pod` (namespace ``default``, as devctl why without -n)."""
    if len(words) != 1 or not words[0].strip("/"):
        raise AnswerInputError("why: name one pod, e.g. :why ml/train-0")
    namespace, slash, name = words[0].partition("/")
    if not slash:
        return "default", namespace
    if not namespace or not name or "/" in name:
        raise AnswerInputError(f"why: {words[0]}: not NAMESPACE/NAME")
    return namespace, name


def why_job(words: Sequence[str]) -> Job:
    """`:why POD`: the question, checked now; AnswerInputError for bad words."""
    namespace, name = why_target(words)

    def job(paths: NodePaths, timeout: float, width: int) -> str:
        from devctl.core.why import WhyRequest, why
        from devctl.render.why import why_table

        answer = asyncio.run(within(why(paths, timeout, WhyRequest(namespace, name)), timeout + SLACK))
        return why_table(answer, width)

    return job


# --- the journal's history ----------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    """The journal's events of the last 24 h (and the kernel log's), oldest first, and lines about the read."""

    events: tuple[NodeEvent, ...] = ()
    notices: tuple[str, ...] = ()  # a torn tail, records lost, a journal that could not be read
    journal_found: bool = False


def read_history(paths: NodePaths, now: datetime, timeout: float, journal: str | None = None) -> History:
    """What ``devctl events --since 24h`` shows, the newest HISTORY_MAX of it (no journal: the kernel log's), its
    live kernel lines joined to their device and holders as ``events`` joins them. Runs its own loop: call it
    from a worker thread."""
    import asyncio

    from devctl.core.history import read_events_live

    answer = asyncio.run(read_events_live(paths, timeout=timeout, journal=journal, since=now - HISTORY_SINCE))
    notices = list(answer.notices)  # without a journal only the kernel log's lines, and no notice of it
    notices += [e.message for e in answer.errors]
    return History(answer.events[-HISTORY_MAX:], tuple(notices), answer.journal_found)


def new_events(before: History | None, now: History) -> list[NodeEvent]:
    """The events of ``now`` (a re-read, on `r`) that ``before`` (the read shown) did not hold, in its order.

    A journal record never changes once written and a kernel line is its time, address and words: the same
    event read again is equal, and only what came since is added to the view.
    """
    if before is None:
        return list(now.events)
    seen = set(before.events)
    return [e for e in now.events if e not in seen]


def _resource(event: NodeEvent) -> str:
    """The RESOURCE cell: a kernel (or udev) line's driver is who wrote it (``nvidia``), not a resource; a
    DRA driver shows when the line was joined to one of its devices (``<pool>/<device>``)."""
    if event.source in (EventSource.KERNEL, EventSource.UDEV):
        return event.resource or (event.driver or "" if event.device and "/" in event.device else "")
    return event.resource or event.driver or ""


def _holders(event: NodeEvent) -> str:
    return ", ".join(f"{h.namespace}/{h.pod}" for h in dict.fromkeys(event.holders))


def _tone(event: NodeEvent) -> str:
    if event.source == EventSource.KERNEL and event.kind in _BAD_KINDS:
        return "bad"
    if event.kind == "health":
        return "ok" if event.health == HEALTHY else "bad"
    return ""


def history_line(event: NodeEvent) -> LogLine:
    """One journal event as a line of the event log: its source first in the detail, its PCI address and holders."""
    what = event.what if event.count == 1 else f"{event.what} (x{event.count})"
    # A kernel line shows its PCI address (12 columns), its device (a GPU's UUID, 40) in the detail: at 80
    # columns a long ID would squeeze the EVENT column out of the log.
    device = event.pci if event.source == EventSource.KERNEL and event.pci else event.device
    parts = [f"{event.source}: {what}"]
    if event.pci and event.pci != device:
        parts.append(event.pci)
    elif event.device and event.device != device:
        parts.append(event.device)
    if event.holders:
        parts.append(f"held by {_holders(event)}")
    elif event.holders_known is False:
        parts.append("held by ? (not known then)")
    return LogLine(
        event.time,
        event.kind,
        _resource(event),
        device or event.pci or "",
        " · ".join(parts),
        _tone(event),
    )


def history_notice(now: datetime, text: str) -> LogLine:
    return LogLine(now, "journal", detail=text, tone="warn")


def _is_device(event: NodeEvent, resource: str, device: str) -> bool:
    if resource not in (event.resource, event.driver) or event.device is None:
        return False
    return event.device == device or event.device.rpartition("/")[2] == device


def device_events(events: Sequence[NodeEvent], resource: str, device: str) -> list[NodeEvent]:
    """The events of one device: its own, and the kernel's (or udev's) on its PCI address; journal order."""
    pcis = {e.pci for e in events if e.pci and _is_device(e, resource, device)}
    return [e for e in events if _is_device(e, resource, device) or (e.pci is not None and e.pci in pcis)]


def device_timeline(
    events: Sequence[NodeEvent], resource: str, device: str, now: datetime, *, unhealthy: bool | None
) -> str | None:
    """A device's own timeline as lines (newest last), the story line first when it is unhealthy; None when empty."""
    mine = device_events(events, resource, device)
    if not mine:
        return None
    lines = [f"Timeline of {escape(device)} ({escape(resource)}) from the journal, newest last"]
    told = story(events, resource, device, now, unhealthy=unhealthy).line if unhealthy else None
    if told:
        lines.append(f"  {escape(told)}")
    if len(mine) > TIMELINE_MAX:
        lines.append(f"  … {len(mine) - TIMELINE_MAX} older events (devctl events {escape(device)})")
    for e in mine[-TIMELINE_MAX:]:
        what = e.what if e.count == 1 else f"{e.what} (x{e.count})"
        held = f" · held by {_holders(e)}" if e.holders else ""
        lines.append(f"  {e.time:%m-%d %H:%M:%S} {e.source!s:<7} {escape(what)}{escape(held)}")
    return "\n".join(lines) + "\n"
