"""``devctl fit``: the kubelet's admission decision predicted on this node, the use-case the faces call.

``predict_fit(paths, timeout, pod, ...)`` reads every input at once under the command's deadline — the kubelet's
configuration (``node.kubeletconfig``), the machine's CPUs and NUMA nodes (``node.machine``), and through
``collect`` the plugins' devices with health and topology, the checkpoint, pod-resources, the managers' state
files and the pod log dirs (names of holders) — then asks the plugins that offer ``GetPreferredAllocation``
(read-only; never ``Allocate``) within what is left of the deadline, applies the "what if" overrides, and runs
``analyze.admission``'s ``admit`` and ``fits_with``. Every failure is a ``SourceError`` in the answer; a verdict
that rests on an input that could not be read is ``admit: None`` with the reason in ``message``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from devctl.analyze.admission.admit import Admission, ContainerAdmission, FitChange, admit
from devctl.analyze.admission.devices import DeviceChoice
from devctl.analyze.admission.fits import fits_with
from devctl.analyze.admission.hints import PolicyError
from devctl.base.errors import DevctlError, ErrorKind
from devctl.base.waits import within
from devctl.core.admission_inputs import REQUESTED_UNKNOWN, BuiltInputs, build_inputs, requested_resources
from devctl.core.collect import collect
from devctl.model import (
    CHECKPOINT,
    IDENTITIES,
    KUBELET_STATE,
    PLUGINS,
    POD_RESOURCES,
    NodePaths,
    NodeSnapshot,
    SourceError,
)
from devctl.model.machine import KubeletPolicy, MachineTopology, PodRequest, TopologyHint

__all__ = [
    "FIT_SOURCES",
    "FOLLOWED_VERSION",
    "FitAnswer",
    "FitContainer",
    "FitDevices",
    "FitHint",
    "FitInputError",
    "FitPolicy",
    "FitProviderHints",
    "WhatIf",
    "answer_of",
    "predict_fit",
    "read_pod",
]

FIT_SOURCES = frozenset({PLUGINS, CHECKPOINT, POD_RESOURCES, KUBELET_STATE, IDENTITIES})
FOLLOWED_VERSION = "1.32"  # the kubelet whose code the model follows when the node's own version is not known
_MACHINE = "machine"
_PREFERRED = "preferred-allocation"


class FitInputError(DevctlError):
    """The pod asked about cannot be read: a bad word, a manifest that is not a Pod or over the bound (exit 2)."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.MALFORMED):
        super().__init__(message)
        self.message = message
        self.kind = kind


def read_pod(words: Sequence[str], manifest: str | None, timeout: float | None = None) -> PodRequest:
    """The pod from ``NAME=QUANTITY`` words or a Pod manifest (``-``: stdin), not both; FitInputError otherwise."""
    from devctl.analyze.admission.request import RequestError, pod_request, request_from_words
    from devctl.node.podmanifest import ManifestError, read_pod_manifest

    if manifest is not None and words:
        raise FitInputError("give either REQUEST words or -f POD.yaml, not both")
    try:
        if manifest is not None:
            return pod_request(read_pod_manifest(manifest, timeout=timeout))  # stdin must end within timeout
        return request_from_words(words)
    except ManifestError as err:
        raise FitInputError(str(err), err.kind) from None
    except RequestError as err:
        where = f"{manifest}: " if manifest is not None else ""
        raise FitInputError(f"{where}{err}") from None


@dataclass(frozen=True)
class WhatIf:
    """``--policy``, ``--scope``, ``--cpu-policy``, ``--memory-policy``: ``None`` keeps the node's own."""

    topology: str | None = None
    scope: str | None = None
    cpu: str | None = None
    memory: str | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.topology, self.scope, self.cpu, self.memory))

    def covers_policies(self) -> bool:
        """Every policy a verdict depends on is given, so the node's configuration is not needed for them."""
        return None not in (self.topology, self.cpu, self.memory)


@dataclass(frozen=True)
class FitHint:
    numa_nodes: tuple[int, ...] | None  # None: any NUMA node (the kubelet's nil mask)
    preferred: bool


@dataclass(frozen=True)
class FitProviderHints:
    provider: str  # devices | cpu | memory
    resource: str
    hints: tuple[FitHint, ...] | None  # None: the provider has no preference


@dataclass(frozen=True)
class FitDevices:
    """One resource's devices for a container: ``ids`` None when the kubelet's choice among them is open."""

    resource: str
    ids: tuple[str, ...] | None
    numa_nodes: tuple[int, ...]
    count: int
    per_node: dict[str, int] | None  # NUMA node -> devices from it ("-1": no node); None when open too
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class FitContainer:
    name: str
    init: bool
    affinity: FitHint | None
    hints: tuple[FitProviderHints, ...] = ()
    devices: tuple[FitDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory_numa_nodes: tuple[int, ...] = ()
    restartable: bool = False


@dataclass(frozen=True)
class FitPolicy:
    topology: str
    scope: str
    options: dict[str, str]
    cpu: str
    cpu_options: dict[str, str]
    memory: str
    reserved_cpus: tuple[int, ...]
    source: str
    version: str | None  # the node's kubelet version, when its binary's path says it
    follows: str  # the kubelet version whose behaviour the prediction follows
    what_if: tuple[str, ...] = ()  # the settings the command line changed


@dataclass(frozen=True)
class FitAnswer:
    """cli.md's ``fit`` answer; ``admit`` None: unknown (``message`` says why)."""

    admit: bool | None
    reason: str | None
    message: str
    policy: FitPolicy
    containers: tuple[FitContainer, ...] = ()
    fits_with: tuple[FitChange, ...] = ()
    choice_open: bool = False
    notes: tuple[str, ...] = ()
    errors: tuple[SourceError, ...] = ()
    # The resource fit's inputs (an extension of cli.md's answer): the node's allocatable, cpu in millicores and
    # memory in bytes (None: unknown), and what the running pods request (None: unknown, never 0).
    allocatable: dict[str, int] | None = None
    requested: dict[str, int] | None = None


def _hint(hint: TopologyHint | None) -> FitHint | None:
    if hint is None:
        return None
    nodes = None if hint.numa_nodes is None else tuple(sorted(hint.numa_nodes))
    return FitHint(nodes, hint.preferred)


def _devices(choice: DeviceChoice) -> FitDevices:
    per_node = None if choice.per_node is None else {str(k): v for k, v in sorted(choice.per_node.items())}
    return FitDevices(choice.resource, choice.ids, choice.numa_nodes, choice.count, per_node, choice.candidates)


def _container(c: ContainerAdmission, restartable: bool) -> FitContainer:
    hints = tuple(
        FitProviderHints(h.provider, h.resource, None if h.hints is None else tuple(_hint(x) for x in h.hints))  # type: ignore[misc]
        for h in c.hints
    )
    return FitContainer(
        c.name,
        c.init,
        _hint(c.affinity),
        hints,
        tuple(_devices(d) for d in c.devices),
        tuple(c.cpu_ids),
        tuple(c.memory_numa_nodes),
        restartable,
    )


def _policy(policy: KubeletPolicy, what_if: WhatIf) -> FitPolicy:
    changed = [
        f"{name}={value}"
        for name, value in (
            ("topologyManagerPolicy", what_if.topology),
            ("topologyManagerScope", what_if.scope),
            ("cpuManagerPolicy", what_if.cpu),
            ("memoryManagerPolicy", what_if.memory),
        )
        if value is not None
    ]
    return FitPolicy(
        policy.topology,
        policy.scope,
        dict(policy.options),
        policy.cpu,
        dict(policy.cpu_options),
        policy.memory,
        tuple(policy.reserved_cpus),
        policy.source,
        policy.version,
        policy.version or FOLLOWED_VERSION,
        tuple(changed),
    )


def answer_of(
    pod: PodRequest,
    result: Admission,
    changes: Sequence[FitChange],
    what_if: WhatIf = WhatIf(),
    notes: Sequence[str] = (),
    errors: Sequence[SourceError] = (),
) -> FitAnswer:
    """The model's decision as the answer a face shows."""
    restartable = {c.name: c.restartable for c in pod.containers}
    if pod.qos != "Guaranteed" and (result.policy.cpu == "static" or result.policy.memory == "Static"):
        # why cpu and memory say "no preference": the static policies take Guaranteed pods only
        notes = (*notes, f"QoS {pod.qos} (not Guaranteed): no exclusive CPUs or pinned memory, no NUMA preference")
    return FitAnswer(
        result.admit,
        result.reason,
        result.message,
        _policy(result.policy, what_if),
        tuple(_container(c, restartable.get(c.name, False)) for c in result.containers),
        tuple(changes),
        result.open_choice,
        tuple(notes),
        tuple(errors),
    )


def apply_what_if(policy: KubeletPolicy, machine: MachineTopology, what_if: WhatIf) -> KubeletPolicy:
    """The policy with the command line's changes; the static policy's reserved CPUs from the reserved quantity
    when ``reservedSystemCPUs`` is not set (the lowest-numbered cores first, as the kubelet takes them)."""
    changed = dataclasses.replace(
        policy,
        topology=what_if.topology or policy.topology,
        scope=what_if.scope or policy.scope,
        cpu=what_if.cpu or policy.cpu,
        memory=what_if.memory or policy.memory,
    )
    if changed.cpu == "static" and not changed.reserved_cpus and changed.reserved_cpu_quantity_milli > 0:
        count = -(-changed.reserved_cpu_quantity_milli // 1000)
        order = sorted(machine.cpus, key=lambda c: (c.socket, c.core, c.id))
        changed = dataclasses.replace(changed, reserved_cpus=tuple(sorted(c.id for c in order[:count])))
    return changed


# The model's per-resource line that the inputs' REQUESTED_UNKNOWN already says for every resource.
_SAID_ONCE = "did not count other pods' requests (unknown)"


def _notes(built: BuiltInputs, result: Admission | None) -> tuple[str, ...]:
    """The inputs' notes, then the model's (``Admission.notes``), each once."""
    said = REQUESTED_UNKNOWN in built.notes
    model = () if result is None else result.notes
    more = (n for n in model if not (said and n.endswith(_SAID_ONCE)))
    return tuple(dict.fromkeys((*built.notes, *more)))


def _known(values: Mapping[str, int] | None) -> dict[str, int] | None:
    return None if values is None else dict(values)


def predict(pod: PodRequest, built: BuiltInputs, what_if: WhatIf, errors: Sequence[SourceError]) -> FitAnswer:
    """The verdict from built inputs (no I/O): ``admit`` and ``fits_with``, or unknown with why."""
    allocatable, requested = _known(built.inputs.allocatable), _known(built.inputs.requested)
    try:
        result = admit(pod, built.inputs)
    except PolicyError as err:
        policy = _policy(built.inputs.policy, what_if)
        notes = _notes(built, None)
        answer = FitAnswer(None, None, f"unknown: {err}", policy, notes=notes, errors=tuple(errors))
        return dataclasses.replace(answer, allocatable=allocatable, requested=requested)
    notes = _notes(built, result)
    if built.unknown:
        message = "unknown: " + "; ".join(built.unknown)
        shown = answer_of(pod, result, (), what_if, notes, errors)
        shown = dataclasses.replace(shown, admit=None, reason=None, message=message)
        return dataclasses.replace(shown, allocatable=allocatable, requested=requested)
    changes = fits_with(pod, built.inputs, result)
    answer = answer_of(pod, result, changes, what_if, notes, errors)
    return dataclasses.replace(answer, allocatable=allocatable, requested=requested)


T = TypeVar("T")


async def _thread_read(what: str, timeout: float, call: Callable[[], T]) -> T | SourceError:
    """``call()`` in a thread within ``timeout``; a ``timeout`` SourceError naming ``what`` after it."""
    try:
        return await within(asyncio.to_thread(call), max(timeout, 0.001))
    except asyncio.TimeoutError:
        return SourceError(what, f"{what}: not read within {timeout:g} s", ErrorKind.TIMEOUT)


async def _preferred(
    built: BuiltInputs, pod: PodRequest, timeout: float
) -> tuple[dict[str, tuple[str, ...]], list[SourceError]]:
    """``GetPreferredAllocation`` of each requested resource whose plugin offers it, all at once, within ``timeout``:
    the plugin's ranking of the free healthy devices. A plugin that does not answer leaves the choice open."""
    from devctl.node.connect import RpcFailure
    from devctl.node.deviceplugin import DevicePluginClient

    inputs = built.inputs
    wanted = {r: built.sockets[r] for r in requested_resources(pod) if r in built.sockets}
    sizes = {r: max(c.requests.get(r, 0) for c in pod.containers) for r in wanted}

    async def ask(resource: str, socket: str) -> tuple[str, tuple[str, ...] | SourceError]:
        free = sorted(d.id for d in inputs.devices[resource] if d.healthy and d.id not in inputs.allocated(resource))
        if len(free) <= sizes[resource]:
            return resource, ()
        try:
            async with DevicePluginClient(socket, timeout) as client:
                got = await within(client.preferred(free, (), sizes[resource]), max(timeout, 0.001))
                return resource, got
        except asyncio.TimeoutError:
            message = f"{socket} GetPreferredAllocation: no answer within {timeout:g} s: the choice is left open"
            return resource, SourceError(_PREFERRED, message, ErrorKind.TIMEOUT, resource)
        except RpcFailure as err:
            return resource, SourceError(_PREFERRED, f"{err}: the choice is left open", ErrorKind.OTHER, resource)

    answers = await asyncio.gather(*(ask(r, s) for r, s in wanted.items()))
    preferred = {r: a for r, a in answers if isinstance(a, tuple) and a}
    errors = [a for _, a in answers if isinstance(a, SourceError)]
    return preferred, errors


async def read_inputs(
    paths: NodePaths, timeout: float, config_file: str | None
) -> tuple[NodeSnapshot, MachineTopology | None, KubeletPolicy, list[SourceError]]:
    """Everything at once: collect's sources, the machine, the kubelet's configuration (each within ``timeout``)."""
    from devctl.node.kubeletconfig import read_kubelet_policy
    from devctl.node.machine import read_machine_source

    snapshot, machine_read, policy_read = await asyncio.gather(
        collect(paths, timeout, want=FIT_SOURCES),
        _thread_read(_MACHINE, timeout, lambda: read_machine_source(paths.sysfs)),
        _thread_read("kubelet-config", timeout, lambda: read_kubelet_policy(paths, config_file)),
    )
    errors = list(snapshot.errors)
    machine: MachineTopology | None = None
    if isinstance(machine_read, SourceError):
        errors.append(machine_read)
    else:
        machine, machine_error = machine_read
        if machine_error is not None:
            errors.append(machine_error)
    policy = KubeletPolicy()
    if isinstance(policy_read, SourceError):
        errors.append(policy_read)
    else:
        policy, more = policy_read
        errors.extend(more)
    return snapshot, machine, policy, errors


def _config_unknown(policy: KubeletPolicy, errors: Sequence[SourceError], what_if: WhatIf) -> str | None:
    """Why the node's policies are unknown (no configuration found or read), unless the flags give them all."""
    if policy.source != "defaults" or what_if.covers_policies():
        return None
    failed = [e for e in errors if e.source in ("kubelet-config",) and e.kind in (ErrorKind.MISSING, ErrorKind.TIMEOUT)]
    if not failed:
        failed = [e for e in errors if e.source == "kubelet-config" and e.kind == ErrorKind.WRONG_API]
    if not failed:
        return None
    return (
        f"the kubelet's configuration is unknown ({failed[0].message}); --kubelet-config FILE names it, or "
        "--policy, --cpu-policy and --memory-policy give the policies"
    )


async def predict_fit(
    paths: NodePaths,
    timeout: float,
    pod: PodRequest,
    *,
    what_if: WhatIf = WhatIf(),
    config_file: str | None = None,
    preferred: bool = True,
) -> FitAnswer:
    """Would the kubelet on this node admit ``pod`` now, and with what (see the module's docstring)."""
    start = time.monotonic()
    snapshot, machine, policy, errors = await read_inputs(paths, timeout, config_file)
    if machine is None:
        fallback = _policy(apply_what_if(policy, MachineTopology(), what_if), what_if)
        why = next((e.message for e in errors if e.source == _MACHINE), "the machine's CPUs could not be read")
        return FitAnswer(None, None, f"unknown: {why}", fallback, errors=tuple(errors))
    policy = apply_what_if(policy, machine, what_if)
    built = build_inputs(pod, snapshot, machine, policy)
    if preferred and built.sockets:
        left = max(timeout - (time.monotonic() - start), 0.001)
        ranked, more = await _preferred(built, pod, min(timeout, left))
        errors.extend(more)
        built = dataclasses.replace(built, inputs=dataclasses.replace(built.inputs, preferred=ranked))
    config_unknown = _config_unknown(policy, errors, what_if)
    if config_unknown is not None:
        built = dataclasses.replace(built, unknown=(config_unknown, *built.unknown))
    return predict(pod, built, what_if, errors)
