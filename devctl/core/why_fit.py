"""``devctl why``'s own reads beside the snapshot: ``fit`` replayed for the pod, and the node's history of its devices.

``read_admission_state`` reads the machine (sysfs) and the kubelet's configuration as ``devctl fit`` does, each
in a thread under the deadline; ``replay`` runs ``core.admission``'s model over the snapshot ``why`` already
read, with the pod's own devices and exclusive CPUs taken out of the node's state first (``analyze.why_fit``:
a pod that holds devices would otherwise not fit against itself). GetPreferredAllocation is not asked: the
device choice stays open, which changes no verdict. ``read_history`` is the journal's and the kernel log's
events of the last day (``core.history``), in a thread under the deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta, timezone

from devctl.analyze.why_fit import without_pod
from devctl.base.waits import within
from devctl.core.admission import FitAnswer, WhatIf, apply_what_if, predict
from devctl.core.admission_inputs import build_inputs
from devctl.model import ErrorKind, NodePaths, NodeSnapshot, SourceError
from devctl.model.history import NodeEvent
from devctl.model.machine import KubeletPolicy, MachineTopology, PodRequest

HISTORY_SPAN = timedelta(hours=24)
MACHINE = "machine"
KUBELET_CONFIG = "kubelet-config"
HISTORY = "history"


async def read_admission_state(
    paths: NodePaths, timeout: float
) -> tuple[MachineTopology | None, KubeletPolicy, list[SourceError]]:
    """The machine and the kubelet's admission settings, read at once, each within ``timeout``."""
    from devctl.node.kubeletconfig import read_kubelet_policy
    from devctl.node.machine import read_machine_source

    errors: list[SourceError] = []
    machine_task = within(asyncio.to_thread(read_machine_source, paths.sysfs), timeout)
    policy_task = within(asyncio.to_thread(read_kubelet_policy, paths, None), timeout)
    machine_read, policy_read = await asyncio.gather(machine_task, policy_task, return_exceptions=True)
    machine = None
    if isinstance(machine_read, BaseException):
        errors.append(_failed(MACHINE, paths.sysfs, machine_read, timeout))
    else:
        machine, failed = machine_read
        errors += [failed] if failed is not None else []
    policy = KubeletPolicy()
    if isinstance(policy_read, BaseException):
        errors.append(_failed(KUBELET_CONFIG, "the kubelet's configuration", policy_read, timeout))
    else:
        policy, more = policy_read
        errors += more
    return machine, policy, errors


def _failed(source: str, what: str, err: BaseException, timeout: float) -> SourceError:
    if isinstance(err, asyncio.TimeoutError):
        return SourceError(source, f"{what}: not read within {timeout:g} s", ErrorKind.TIMEOUT)
    if isinstance(err, OSError):
        return SourceError(source, f"{what}: {err.strerror or err}", ErrorKind.of_oserror(err))
    if isinstance(err, Exception):
        return SourceError(source, f"{what}: {err}", ErrorKind.OTHER)
    raise err


def replay(
    pod: PodRequest,
    snapshot: NodeSnapshot,
    machine: MachineTopology | None,
    policy: KubeletPolicy,
    errors: list[SourceError],
    uid: str | None,
) -> FitAnswer:
    """Would the kubelet admit ``pod`` on this node now, its own holdings (devices, exclusive CPUs) freed."""
    if machine is None:
        why = next((e.message for e in errors if e.source == MACHINE), "the machine's CPUs could not be read")
        base = predict(pod, build_inputs(pod, snapshot, MachineTopology(), policy), WhatIf(), errors)
        return dataclasses.replace(base, admit=None, reason=None, message=f"unknown: {why}")
    policy = apply_what_if(policy, machine, WhatIf())
    built = build_inputs(pod, snapshot, machine, policy)
    own = next((p for p in snapshot.pods or () if (p.namespace, p.name) == (pod.namespace, pod.name)), None)
    cpus = [cpu for c in own.containers for cpu in c.cpu_ids] if own is not None else []
    inputs = without_pod(built.inputs, pod.namespace, pod.name, uid, cpus)
    return predict(pod, dataclasses.replace(built, inputs=inputs), WhatIf(), errors)


def _events(paths: NodePaths, now: datetime) -> tuple[tuple[NodeEvent, ...], tuple[SourceError, ...]]:
    from devctl.core.history import read_events

    answer = read_events(paths, since=now - HISTORY_SPAN, until=now)
    # No journal and no kernel log is nothing to say, not a failure; a journal or kernel log that fails is one.
    return answer.events, tuple(e for e in answer.errors if e.kind != ErrorKind.MISSING)


async def read_history(paths: NodePaths, timeout: float) -> tuple[tuple[NodeEvent, ...], tuple[SourceError, ...]]:
    """The journal's and the kernel log's events of the last day, in time order; failures as ``SourceError``s."""
    try:
        return await within(asyncio.to_thread(_events, paths, datetime.now(timezone.utc)), timeout)
    except asyncio.TimeoutError:
        return (), (SourceError(HISTORY, f"the journal was not read within {timeout:g} s", ErrorKind.TIMEOUT),)
