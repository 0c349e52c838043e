"""The ``why`` use-case: every source about one pod, read concurrently, each under its own deadline; then the verdict.

The node's snapshot (pod-resources, plugins and DRA drivers, both checkpoints, CDI, identities, the node
name) through ``collect``; beside it the pod's CRI states, the Pods API probe and the kubelet's log lines.
A source that hangs or fails is a ``SourceError`` in the answer's ``errors``; the others still answer
within the deadline. Where the kubelet log comes from: ``--kubelet-log FILE``; else
``<root>/var/log/kubelet.log`` when it exists (the simulated node writes one there); else, on the node
itself (root ``/``), ``journalctl -u kubelet`` when present; else none, said in ``errors``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from dataclasses import dataclass

from devctl.analyze.why import FitAnswer, PodRef, WhyAnswer, WhyInputs, verdict
from devctl.analyze.why_fit import REQUESTS_UNKNOWN
from devctl.base.waits import within
from devctl.core.collect import collect
from devctl.core.why_fit import read_admission_state, read_history, replay
from devctl.model import (
    CDI,
    CHECKPOINT,
    DRA_CHECKPOINT,
    IDENTITIES,
    KUBELET_STATE,
    NODE_NAME,
    PLUGINS,
    POD_RESOURCES,
    ErrorKind,
    NodePaths,
    NodeSnapshot,
    SourceError,
)
from devctl.model.machine import KubeletPolicy, MachineTopology, PodRequest
from devctl.model.runtime import LogLine, PodRuntimeState
from devctl.node import kubeletlog
from devctl.node.connect import RpcFailure
from devctl.node.cri_states import pod_states
from devctl.node.files import FileReadError
from devctl.node.podlogs import logged_uid
from devctl.node.podsapi import probe

SOURCES = frozenset({POD_RESOURCES, PLUGINS, CHECKPOINT, DRA_CHECKPOINT, CDI, IDENTITIES, NODE_NAME})
CRI = "cri"
KUBELET_LOG = "kubelet-log"
JOURNAL = "journal"
PODS_API = "pods-api"
SIM_KUBELET_LOG = "var/log/kubelet.log"  # under --root


@dataclass(frozen=True)
class WhyRequest:
    namespace: str
    name: str
    kubelet_log: str | None = None  # --kubelet-log FILE
    fit: FitAnswer | None = None  # a fit replay made by the caller (the hook for devctl fit's answer)
    pod: PodRequest | None = None  # the pod's requests (-f POD.yaml): fit is replayed for them
    pod_note: str | None = None  # why there are none (a manifest whose resources cannot be read)


def manifest_pod(path: str, timeout: float | None = None) -> tuple[str | None, str]:
    """(namespace or None, name) of the Pod manifest at ``path`` (``-``: stdin); raises ManifestError (one line)."""
    namespace, name, _, _ = manifest_pod_request(path, timeout)
    return namespace, name


def manifest_pod_request(
    path: str, timeout: float | None = None
) -> tuple[str | None, str, PodRequest | None, str | None]:
    """(namespace or None, name, requests, why no requests) of the Pod manifest at ``path`` (``-``: stdin), read
    once; raises ManifestError (one line) for a file that is not a Pod. Requests that cannot be read (a bad
    quantity) are not a usage error here: ``why`` still answers, saying fit was not replayed and why."""
    from devctl.analyze.admission.request import RequestError, pod_request
    from devctl.node.podmanifest import ManifestError, read_pod_manifest

    manifest = read_pod_manifest(path, timeout=timeout)  # stdin within the command's deadline
    meta = manifest.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ManifestError(f"{path}: the Pod has no metadata.name")
    namespace = meta.get("namespace")
    try:
        request, note = pod_request(manifest), None
    except RequestError as err:
        request, note = None, f"requests unreadable ({err}): fit not replayed"
    return (namespace if isinstance(namespace, str) and namespace else None), meta["name"], request, note


def kubelet_log_file(paths: NodePaths, given: str | None) -> str | None:
    """The log file to read: ``given``, else ``<root>/var/log/kubelet.log`` when it exists, else None."""
    if given:
        return given
    default = os.path.join(paths.root or "/", SIM_KUBELET_LOG)
    return default if os.path.isfile(default) else None


async def _runtime(
    paths: NodePaths, timeout: float, req: WhyRequest, errors: list[SourceError]
) -> PodRuntimeState | None:
    if not paths.runtime_endpoint:
        errors.append(SourceError(CRI, "no CRI endpoint found (--runtime-endpoint)", ErrorKind.MISSING))
        return None
    try:
        return await within(pod_states(paths.runtime_endpoint, timeout, req.namespace, req.name), timeout)
    except RpcFailure as e:
        errors.append(SourceError(CRI, e.message, e.kind))
    except asyncio.TimeoutError:
        errors.append(SourceError(CRI, f"{paths.runtime_endpoint}: no answer within {timeout:g}s", ErrorKind.TIMEOUT))
    except OSError as e:
        errors.append(SourceError(CRI, f"{paths.runtime_endpoint}: {e.strerror or e}", ErrorKind.of_oserror(e)))
    return None


async def _log(
    paths: NodePaths, timeout: float, req: WhyRequest, needles: tuple[str, ...], errors: list[SourceError]
) -> tuple[tuple[LogLine, ...], str]:
    path = kubelet_log_file(paths, req.kubelet_log)
    if path is not None:
        try:
            return await within(asyncio.to_thread(kubeletlog.file_lines, path, needles), timeout), KUBELET_LOG
        except FileReadError as e:
            errors.append(SourceError(KUBELET_LOG, str(e), e.kind))
        except asyncio.TimeoutError:
            errors.append(SourceError(KUBELET_LOG, f"{path}: not read within {timeout:g}s", ErrorKind.TIMEOUT))
        return (), KUBELET_LOG
    if (paths.root or "/") != "/" or kubeletlog.journalctl() is None:
        errors.append(
            SourceError(KUBELET_LOG, "no kubelet log (--kubelet-log FILE) and no journalctl", ErrorKind.MISSING)
        )
        return (), KUBELET_LOG
    try:
        return await kubeletlog.journal_lines(needles, timeout), JOURNAL
    except asyncio.TimeoutError:
        errors.append(SourceError(JOURNAL, f"journalctl -u kubelet: no end within {timeout:g}s", ErrorKind.TIMEOUT))
    except OSError as e:
        errors.append(SourceError(JOURNAL, f"journalctl -u kubelet: {e.strerror or e}", ErrorKind.of_oserror(e)))
    return (), JOURNAL


async def _pods_api(paths: NodePaths, timeout: float, errors: list[SourceError]) -> None:
    found = await probe(paths.kubelet_dir, timeout)
    if found.path is None and found.present:  # a socket there that does not answer; none there: the API is off
        errors.append(
            SourceError(PODS_API, f"not served: no listener at {' or '.join(found.present)}", ErrorKind.STALE)
        )
    elif found.path is not None:
        errors.append(
            SourceError(
                PODS_API, f"{found.path}: served; devctl does not read the Pods API yet", ErrorKind.UNIMPLEMENTED
            )
        )


async def _admission_state(
    paths: NodePaths, timeout: float, req: WhyRequest
) -> tuple[MachineTopology | None, KubeletPolicy, list[SourceError]]:
    if req.pod is None or req.fit is not None:
        return None, KubeletPolicy(), []
    return await read_admission_state(paths, timeout)


def _fit(
    req: WhyRequest,
    snap: NodeSnapshot,
    state: tuple[MachineTopology | None, KubeletPolicy, list[SourceError]],
    uid: str | None,
) -> tuple[FitAnswer | None, str | None]:
    """The replay (the caller's, else one of ``req.pod``'s requests), or why there is none."""
    if req.fit is not None:
        return req.fit, None
    if req.pod is None:
        return None, req.pod_note or REQUESTS_UNKNOWN
    machine, policy, errors = state
    pod = dataclasses.replace(req.pod, namespace=req.namespace, name=req.name)
    return replay(pod, snap, machine, policy, [*snap.errors, *errors], uid), None


async def why(paths: NodePaths, timeout: float, req: WhyRequest, snapshot: NodeSnapshot | None = None) -> WhyAnswer:
    """The verdict for ``req``'s pod: the sources read concurrently (``snapshot`` when given: ``--from``)."""
    errors: list[SourceError] = []
    uid = logged_uid(paths.pod_logs, req.namespace, req.name)
    needles = (f"{req.namespace}/{req.name}", *((uid,) if uid else ()))
    want = SOURCES | {KUBELET_STATE} if req.pod is not None else SOURCES
    snap_task = collect(paths, timeout, want=want) if snapshot is None else _given(snapshot)
    snap, runtime, (lines, log_source), _, state, (history, history_errors) = await asyncio.gather(
        snap_task,
        _runtime(paths, timeout, req, errors),
        _log(paths, timeout, req, needles, errors),
        _pods_api(paths, timeout, errors),
        _admission_state(paths, timeout, req),
        read_history(paths, timeout),
    )
    fit, fit_note = _fit(req, snap, state, uid)
    extra = WhyInputs(
        runtime=runtime,
        kubelet_lines=lines,
        log_source=log_source,
        logged=uid is not None,
        fit=fit,
        fit_note=fit_note,
        history=history,
        node_name=snap.node_name,
        errors=(*errors, *history_errors),
    )
    return verdict(PodRef(req.namespace, req.name, uid), snap, extra)


async def _given(snapshot: NodeSnapshot) -> NodeSnapshot:
    return snapshot
