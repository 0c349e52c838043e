"""``devctl why POD``: one verdict for a pod that does not run as it should, with the evidence it rests on.

Pure: decides over a ``NodeSnapshot`` and the pod's own inputs (``WhyInputs``: its CRI states, the
kubelet's log lines about it, the Pods API probe, an optional ``fit`` replay), in a fixed order, the
first that holds wins: not-on-node, cdi-unresolvable, dra-driver-missing, claim-not-prepared,
plugin-missing, device-unhealthy, container-error, admission-rejected, running, unknown. Each hint is a
command a person can run as printed, with the pod's real namespace and name (shell-quoted). The runtime's
word outranks the kubelet's log: a pod whose containers all run is never admission-rejected on log lines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from devctl.analyze.cdi import UNRESOLVABLE, resolver
from devctl.analyze.claim_state import device_health as dra_health
from devctl.analyze.claim_state import live_drivers
from devctl.analyze.pods import device_health
from devctl.analyze.why_history import addresses, device_events, event_what, iso_time, story_line
from devctl.model import HEALTHY, NodeSnapshot, PodResources, SourceError
from devctl.model.history import NodeEvent
from devctl.model.runtime import LogLine, PodRuntimeState

CODES = (
    "not-on-node",
    "cdi-unresolvable",
    "dra-driver-missing",
    "claim-not-prepared",
    "plugin-missing",
    "device-unhealthy",
    "container-error",
    "admission-rejected",
    "running",
    "unknown",
)
_CDI_WORDS = re.compile(r"unresolvable CDI devices?|CDI device injection failed|failed to inject CDI", re.IGNORECASE)
_CDI_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+=[\w.:-]+")
_REJECTED = re.compile(r"UnexpectedAdmissionError|TopologyAffinityError|SMTAlignmentError|OutOf[\w./-]+")
_ADMISSION = re.compile(rf"{_REJECTED.pattern}|Predicate\w* failed")
_WAITING = re.compile(
    r"CreateContainerError|CreateContainerConfigError|RunContainerError|CrashLoopBackOff|ImagePullBackOff|ErrImagePull"
)


class FitAnswer(Protocol):
    """What ``why`` needs of a ``fit`` replay (devctl.analyze.admission's answer): admitted or not, and why."""

    @property
    def admit(self) -> bool | None: ...  # None: unknown (``message`` says why)

    @property
    def reason(self) -> str | None: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str | None = None


@dataclass(frozen=True)
class Evidence:
    source: str  # cri, kubelet-log, journal, pod-resources, checkpoint, dra-checkpoint, dra, cdi, plugins, fit
    time: str | None
    what: str


@dataclass(frozen=True)
class WhyAnswer:
    pod: PodRef
    code: str
    verdict: str
    evidence: tuple[Evidence, ...] = ()
    hint: str = ""
    errors: tuple[SourceError, ...] = ()


@dataclass(frozen=True)
class WhyInputs:
    """The pod's own sources beside the snapshot; None: not read (its failure is in ``errors``)."""

    runtime: PodRuntimeState | None = None
    kubelet_lines: tuple[LogLine, ...] = ()
    log_source: str = "kubelet-log"  # "journal" when the lines came from journalctl
    logged: bool = False  # a <pod-logs>/<ns>_<name>_<uid> directory exists
    fit: FitAnswer | None = None
    fit_note: str | None = None  # why fit was not replayed ("requests unknown: fit not replayed")
    history: tuple[NodeEvent, ...] = ()  # the journal's and kernel log's events of the last day, in time order
    node_name: str | None = None
    errors: tuple[SourceError, ...] = ()


@dataclass(frozen=True)
class _Ctx:
    pod: PodRef
    snap: NodeSnapshot
    extra: WhyInputs
    held: PodResources | None

    def cmd(self, *words: str) -> str:
        return " ".join(shlex.quote(w) for w in words)

    def kubectl(self, verb: str, *more: str) -> str:
        return self.cmd("kubectl", "-n", self.pod.namespace, verb, "pod", self.pod.name, *more)

    def journal(self) -> str:
        key = self.pod.uid or f"{self.pod.namespace}/{self.pod.name}"
        return f"journalctl -u kubelet | grep {shlex.quote(key)}"


_Found = tuple[str, tuple[Evidence, ...], str] | None  # verdict, evidence, hint


def _uid(pod: PodRef, snap: NodeSnapshot, extra: WhyInputs) -> str | None:
    if pod.uid:
        return pod.uid
    if extra.runtime is not None and extra.runtime.sandboxes:
        return extra.runtime.sandboxes[0].uid or None
    for ident in snap.pod_identities:
        if (ident.namespace, ident.name) == (pod.namespace, pod.name):
            return ident.uid
    return None


def _held(pod: PodRef, snap: NodeSnapshot) -> PodResources | None:
    return next((p for p in snap.pods or () if (p.namespace, p.name) == (pod.namespace, pod.name)), None)


def _not_on_node(c: _Ctx) -> _Found:
    uid = c.pod.uid
    in_checkpoint = (
        uid is not None and c.snap.checkpoint is not None and any(e.pod_uid == uid for e in c.snap.checkpoint.entries)
    )
    seen = (
        c.held is not None
        or (c.extra.runtime is not None and bool(c.extra.runtime.sandboxes))
        or in_checkpoint
        or c.extra.logged
        or bool(c.extra.kubelet_lines)
        or uid is not None
    )
    if seen or (c.extra.runtime is None and c.snap.pods is None):
        return None  # seen, or nothing that could say it was read
    where = "kubectl get pods -A -o wide --field-selector " + shlex.quote(f"metadata.name={c.pod.name}")
    ev = Evidence("node", c.snap.taken_at, "no sandbox in the CRI, no pod-resources entry, no checkpoint entry, no log")
    return f"{c.pod.namespace}/{c.pod.name} is not on this node", (ev,), where


def _cdi_names(c: _Ctx) -> list[tuple[str, str]]:
    """(CDI name, who uses it) for every name the pod's claims and devices use."""
    names: list[tuple[str, str]] = []
    for container in c.held.containers if c.held else ():
        for dr in container.dynamic_resources:
            names += [(n, f"claim {dr.claim_name}") for d in dr.devices for n in d.cdi_devices]
    uid = c.pod.uid
    for e in c.snap.checkpoint.entries if c.snap.checkpoint and uid else ():
        if e.pod_uid == uid and e.allocation is not None:
            names += [(n, f"{e.resource} of {e.container}") for n in e.allocation.cdi_devices]
    return names


def _logged(c: _Ctx, ln: LogLine) -> Evidence:
    return Evidence(c.extra.log_source, log_time(ln.time, c.snap.taken_at), ln.text)


def _cdi(c: _Ctx) -> _Found:
    ev: list[Evidence] = []
    for s in c.extra.runtime.containers if c.extra.runtime else ():
        if _CDI_WORDS.search(s.message) or _CDI_WORDS.search(s.reason):
            ev.append(Evidence("cri", s.created_at, f"container {s.name}: {s.reason}: {s.message}"))
    ev += [_logged(c, ln) for ln in c.extra.kubelet_lines if _CDI_WORDS.search(ln.text)]
    if c.snap.cdi is not None and not _all_running(c):  # a running container's names were resolved when made
        r = resolver(c.snap)
        for name, user in _cdi_names(c):
            if r.resolve(name).status == UNRESOLVABLE:
                ev.append(
                    Evidence("cdi", None, f"{name} ({user}): no CDI spec on the node defines it")
                )  # since when: unknown
    if not ev:
        return None
    names = sorted({n for e in ev for n in _CDI_NAME.findall(e.what)})
    shown = ", ".join(names[:3]) or "a CDI device"
    return f"the runtime cannot resolve {shown}: the CDI spec is missing", tuple(ev), "devctl cdi"


def _all_running(c: _Ctx) -> bool:
    """Whether the runtime says the pod's newest sandbox is ready with every container of it running."""
    rt = c.extra.runtime
    if rt is None or not rt.sandboxes or rt.sandboxes[0].state != "ready":
        return False
    mine = [s for s in rt.containers if s.sandbox_id == rt.sandboxes[0].id]
    return bool(mine) and all(s.state == "running" for s in mine)


def _claims_of(c: _Ctx) -> list[tuple[str, str, tuple[str, ...], int]]:
    """(claim namespace, name, drivers, devices) of the DRA checkpoint's claims for this pod."""
    if c.snap.dra_checkpoint is None or c.pod.uid is None:
        return []
    return [
        (cl.namespace, cl.name, cl.drivers, len(cl.devices))
        for cl in c.snap.dra_checkpoint.claims
        if c.pod.uid in cl.pod_uids
    ]


def _drivers_used(c: _Ctx) -> dict[str, str]:
    """driver -> a claim of the pod that uses it."""
    used = {d: f"{ns}/{name}" for ns, name, drivers, _ in _claims_of(c) for d in drivers}
    for container in c.held.containers if c.held else ():
        for dr in container.dynamic_resources:
            used.update({d.driver: f"{dr.claim_namespace}/{dr.claim_name}" for d in dr.devices})
    return used


def _dra_driver(c: _Ctx) -> _Found:
    if c.snap.plugins_incomplete or any(e.source in ("plugins", "plugins-dir") for e in c.snap.errors):
        return None  # not known which drivers are registered
    live = live_drivers(c.snap)
    missing = {d: claim for d, claim in _drivers_used(c).items() if not live.get(d, False)}
    if not missing:
        return None
    ev = tuple(
        Evidence("dra", c.snap.taken_at, f"claim {claim}: driver {d} is not registered on this node")
        for d, claim in sorted(missing.items())
    )
    driver = sorted(missing)[0]
    node = c.extra.node_name
    hint = (
        c.cmd("kubectl", "get", "pods", "-A", "-o", "wide", "--field-selector", f"spec.nodeName={node}")
        + f" | grep {shlex.quote(driver.split('.')[0])}"
        if node
        else "devctl plugins"
    )
    return f"DRA driver {driver} is not registered: its claims cannot be prepared", ev, hint


def _claim_prepared(c: _Ctx) -> _Found:
    ev = [
        Evidence(
            "dra-checkpoint", c.snap.taken_at, f"claim {ns}/{name}: in the kubelet's checkpoint, no device prepared"
        )
        for ns, name, _, devices in _claims_of(c)
        if devices == 0
    ]
    if c.snap.dra_checkpoint is not None and c.held is not None:
        known = {(cl.namespace, cl.name) for cl in c.snap.dra_checkpoint.claims}
        for container in c.held.containers:
            for dr in container.dynamic_resources:
                if (dr.claim_namespace, dr.claim_name) not in known:
                    what = f"claim {dr.claim_namespace}/{dr.claim_name} of {container.name}: not in dra_manager_state"
                    ev.append(Evidence("dra-checkpoint", c.snap.taken_at, what))
    if not ev:
        return None
    return "a DRA claim of the pod is not prepared on this node", tuple(ev), c.journal()


def _resources_held(c: _Ctx) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for container in c.held.containers if c.held else ():
        for d in container.devices:
            out.setdefault(d.resource, set()).update(d.ids)
    for e in c.snap.checkpoint.entries if c.snap.checkpoint and c.pod.uid else ():
        if e.pod_uid == c.pod.uid:
            out.setdefault(e.resource, set()).update(i for ids in e.device_ids.values() for i in ids)
    return out


def _plugin_missing(c: _Ctx) -> _Found:
    if c.snap.plugins_incomplete or any(e.source == "plugins-dir" for e in c.snap.errors):
        return None
    served = {p.resource for p in c.snap.plugins if p.resource}
    missing = sorted(r for r in _resources_held(c) if r not in served)
    if not missing:
        return None
    ev = tuple(Evidence("plugins", c.snap.taken_at, f"{r}: held by the pod, no plugin serves it") for r in missing)
    return f"no device plugin serves {missing[0]}", ev, "devctl plugins"


def _unhealthy(c: _Ctx) -> _Found:
    health = device_health(c.snap)
    sick = [
        (r, i)
        for r, ids in sorted(_resources_held(c).items())
        for i in sorted(ids)
        if health.get(r, {}).get(i, HEALTHY) not in (HEALTHY, "Unknown")
    ]
    ev = [Evidence("plugins", c.snap.taken_at, f"{r} {i}: {health[r][i]}") for r, i in sick]
    dra = dra_health(c.snap)
    for container in c.held.containers if c.held else ():
        for dr in container.dynamic_resources:
            for d in dr.devices:
                h = dra.get((d.driver, d.pool, d.device))
                if h is not None and h.health == "Unhealthy":
                    what = f"claim {dr.claim_name}: {d.driver} {d.pool}/{d.device}: Unhealthy {h.message}".rstrip()
                    ev.append(Evidence("dra", c.snap.taken_at, what))
                    sick.append((d.driver, f"{d.pool}/{d.device}"))
    if not ev:
        return None
    line = f"a device the pod holds is unhealthy ({ev[0].what.split(':')[0]})"
    told = story_line(c.extra.history, *sick[0], _now(c.snap)) if c.extra.history else None
    if told is not None:
        line += f". {sick[0][1]}: {told}"  # the journal's story: since when, and what came just before
    return line, tuple(ev), c.kubectl("delete")


def _now(snap: NodeSnapshot) -> datetime:
    return datetime.fromisoformat(snap.taken_at.replace("Z", "+00:00"))


def _devices_of(c: _Ctx) -> list[tuple[str, str]]:
    """(resource or DRA driver, device ID or <pool>/<device>) of every device the pod holds."""
    keys = [(r, i) for r, ids in sorted(_resources_held(c).items()) for i in sorted(ids)]
    for container in c.held.containers if c.held else ():
        for dr in container.dynamic_resources:
            keys += [(d.driver, f"{d.pool}/{d.device}") for d in dr.devices]
    return keys


def _history(c: _Ctx) -> tuple[Evidence, ...]:
    """The last events of the devices the pod holds (by ID and PCI address), newest last."""
    keys = _devices_of(c) if c.extra.history else []
    if not keys:
        return ()
    found = device_events(c.extra.history, keys, addresses(c.snap, keys))
    return tuple(Evidence(e.source.value, iso_time(e.time), event_what(e)) for e in found)


def _container_error(c: _Ctx) -> _Found:
    ev: list[Evidence] = []
    first: tuple[str, str] | None = None
    for s in c.extra.runtime.containers if c.extra.runtime else ():
        if s.reason and s.state != "running" and not (s.state == "exited" and s.exit_code == 0):
            ev.append(Evidence("cri", s.created_at, f"container {s.name}: {s.reason}: {s.message}".rstrip(": ")))
            first = first or (s.name, s.reason)
    lines = [ln for ln in c.extra.kubelet_lines if _WAITING.search(ln.text)]
    ev += [_logged(c, ln) for ln in lines]
    if not ev:
        return None
    if first is None:
        m = _WAITING.search(lines[0].text)
        first = ("?", m.group(0) if m else "error")
    name, reason = first
    hint = c.kubectl("describe")
    if reason == "CrashLoopBackOff" and name != "?":
        hint = c.cmd("kubectl", "-n", c.pod.namespace, "logs", c.pod.name, "-c", name, "--previous")
    return f"container {name}: {reason}", tuple(ev), hint


def _unallocated(c: _Ctx) -> bool:
    """No device, claim, exclusive CPU or memory held and no sandbox: how a pod turned away at admission looks."""
    if _devices_of(c) or _claims_of(c):
        return False
    if c.held is not None and any(k.cpu_ids or k.memory for k in c.held.containers):
        return False
    return c.extra.runtime is None or not c.extra.runtime.sandboxes


def _fit_evidence(c: _Ctx, logged: bool) -> Evidence | None:
    """The replay's line: used when the node's own sources say the pod failed admission, or it holds nothing."""
    fit = c.extra.fit
    if not logged and not _unallocated(c):
        return None  # a running pod's admission was decided long ago: a replay now proves nothing about it
    if fit is None:
        return Evidence("fit", c.snap.taken_at, c.extra.fit_note) if logged and c.extra.fit_note else None
    if fit.admit is None:
        return Evidence("fit", c.snap.taken_at, f"replayed now: {fit.message}") if logged else None
    if fit.admit:
        return Evidence("fit", c.snap.taken_at, "replayed now: admitted (the node changed since)") if logged else None
    return Evidence("fit", c.snap.taken_at, f"replayed now: {fit.reason or 'rejected'}: {fit.message}")


def _admission(c: _Ctx) -> _Found:
    if _all_running(c):
        return None  # the runtime runs it: log lines (an earlier pod of that name) cannot say it was turned away
    lines = [ln for ln in c.extra.kubelet_lines if _ADMISSION.search(ln.text)]
    ev = [_logged(c, ln) for ln in lines]
    reason = None
    if lines:
        m = _REJECTED.search(lines[-1].text) or _ADMISSION.search(lines[-1].text)
        reason = m.group(0) if m else None
    replay = _fit_evidence(c, bool(lines))
    if replay is not None:
        ev.append(replay)
        fit = c.extra.fit
        reason = reason or (fit.reason if fit is not None and fit.admit is False else None)
    if not ev:
        return None
    hint = c.kubectl("get", "-o", "yaml") + " | devctl fit -f -"
    if reason == "UnexpectedAdmissionError":
        hint = c.kubectl("delete")  # a pod the kubelet rejected stays Failed: only a new pod is admitted again
    said = "" if lines else " (fit replayed on the node now)"
    return f"the kubelet rejected the pod at admission: {reason or 'rejected'}{said}", tuple(ev), hint


def _running(c: _Ctx) -> _Found:
    if not _all_running(c) or c.extra.runtime is None:
        return None
    rt = c.extra.runtime
    mine = [s for s in rt.containers if s.sandbox_id == rt.sandboxes[0].id]
    ev = tuple(Evidence("cri", s.created_at, f"container {s.name}: running") for s in mine)
    return f"{c.pod.namespace}/{c.pod.name} runs: nothing wrong found", ev, c.cmd("devctl", "get", _key(c.pod))


def _key(pod: PodRef) -> str:
    return f"{pod.namespace}/{pod.name}"


_CHECKS: tuple[tuple[str, Callable[[_Ctx], _Found]], ...] = (
    ("not-on-node", _not_on_node),
    ("cdi-unresolvable", _cdi),
    ("dra-driver-missing", _dra_driver),
    ("claim-not-prepared", _claim_prepared),
    ("plugin-missing", _plugin_missing),
    ("device-unhealthy", _unhealthy),
    ("container-error", _container_error),
    ("admission-rejected", _admission),
    ("running", _running),
)


_KLOG_TIME = re.compile(r"^(\d\d)-(\d\d) (\d\d:\d\d:\d\d)$")
_ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")


def log_time(time: str | None, now: str) -> str | None:
    """A log line's time as devctl's ISO 8601 UTC: a klog ``12-03 14:35:02`` (no year) takes the year of ``now``
    (the year before when that would put it more than a day after ``now``); both klog and journalctl's short-iso
    are read as UTC (the node's zone is not known to devctl); None when the line said none."""
    if time is not None and _ISO_SECONDS.match(time):
        return time + "Z"
    m = _KLOG_TIME.match(time or "")
    if m is None:
        return None
    t, at = _sort_key(now), None
    for year in (t.year, t.year - 1) if t is not None else ():
        at = _sort_key(f"{year}-{m.group(1)}-{m.group(2)}T{m.group(3)}Z")
        if at is not None and t is not None and (at - t).total_seconds() <= 86400:
            return at.strftime("%Y-%m-%dT%H:%M:%SZ")  # not more than a day after now: this year's
    return None


def _sort_key(time: str | None) -> datetime | None:
    if not time:
        return None
    try:
        t = datetime.fromisoformat(time.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def _in_time_order(evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """Oldest first; evidence of unknown time last, each group in the order found."""
    known = [(t, i, e) for i, e in enumerate(evidence) if (t := _sort_key(e.time)) is not None]
    unknown = [e for e in evidence if _sort_key(e.time) is None]
    return (*(e for _, _, e in sorted(known, key=lambda k: (k[0], k[1]))), *unknown)


def verdict(pod: PodRef, snapshot: NodeSnapshot, extra: WhyInputs) -> WhyAnswer:
    """The first of the checks, in ``CODES``' order, that holds for the pod; ``unknown`` when none does."""
    pod = PodRef(pod.namespace, pod.name, _uid(pod, snapshot, extra))
    ctx = _Ctx(pod, snapshot, extra, _held(pod, snapshot))
    errors = (*snapshot.errors, *extra.errors)
    for code, check in _CHECKS:
        found = check(ctx)
        if found is not None:
            line, evidence, hint = found
            more = _history(ctx) if code != "not-on-node" else ()
            return WhyAnswer(pod, code, line, _in_time_order((*evidence, *more)), hint, errors)
    why = "nothing the node shows explains it" if extra.runtime is not None else "the runtime could not be read"
    return WhyAnswer(pod, "unknown", f"{_key(pod)}: {why}", _history(ctx), "devctl doctor", errors)
