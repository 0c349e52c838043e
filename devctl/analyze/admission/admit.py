"""The kubelet's admission of one pod, predicted: the topology manager's flow over its three hint providers.

As kubelet v1.32 ``topologymanager/scope*.go`` runs it: providers in the order device manager, CPU manager,
memory manager; with policy ``none`` no hints, only ``Allocate`` (scope "none"); scope ``container``: for each
container, init containers first, hints, merge, then ``Allocate`` on every provider; scope ``pod``: one merge for
the pod, its affinity for every container. A regular init container's devices and CPUs are reused by the
containers after it; a restartable one (a sidecar) keeps them. Reasons and messages are the kubelet's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from devctl.analyze.admission import cpus as cpu_policy
from devctl.analyze.admission import devices as dev
from devctl.analyze.admission.hints import NONE, NumaInfo, ProviderHints, check_policy, merge
from devctl.analyze.admission.inputs import AdmissionInputs
from devctl.analyze.admission.masks import MaskSpace
from devctl.analyze.admission.memory import (
    STATIC,
    MemoryAllocationError,
    allocate_memory,
    memory_hints,
    memory_requests,
)
from devctl.analyze.admission.providers import CpuProvider, NoCpuPolicy, StaticCpuPolicy
from devctl.base.errors import DevctlError
from devctl.model.machine import ContainerRequest, KubeletPolicy, PodRequest, TopologyHint

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"


@dataclass(frozen=True)
class ProviderHintList:
    """One provider's hints for one resource; ``hints`` ``None``: no preference."""

    provider: str  # "devices" | "cpu" | "memory"
    resource: str
    hints: tuple[TopologyHint, ...] | None


@dataclass(frozen=True)
class ContainerAdmission:
    """One container's part of the answer (cli.md ``fit``: ``containers[]``)."""

    name: str
    init: bool
    affinity: TopologyHint | None
    hints: tuple[ProviderHintList, ...] = ()
    devices: tuple[dev.DeviceChoice, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory_numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class FitChange:
    """One change that would admit the pod (cli.md ``fits_with[]``)."""

    change: str
    why: str


@dataclass(frozen=True)
class Admission:
    """The predicted decision: ``reason`` ``None`` when admitted; ``containers`` as far as admission got."""

    admit: bool
    reason: str | None
    message: str
    policy: KubeletPolicy
    containers: tuple[ContainerAdmission, ...]
    fits_with: tuple[FitChange, ...] = ()
    open_choice: bool = False  # some device IDs are the kubelet's random pick
    notes: tuple[str, ...] = ()  # what the prediction could not check (the node's allocatable unknown)


class _Rejected(DevctlError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _unexpected(message: str) -> _Rejected:
    return _Rejected(UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {message}, which is unexpected")


@dataclass
class _State:
    """What the managers hold while one pod is admitted."""

    inputs: AdmissionInputs
    pod: PodRequest
    cpu: CpuProvider
    allocated: dict[str, frozenset[str]] = field(default_factory=dict)
    reuse: dict[str, frozenset[str]] = field(default_factory=dict)
    cpu_free: frozenset[int] = frozenset()
    cpu_reuse: frozenset[int] = frozenset()
    memory_free: dict[int, dict[str, int]] = field(default_factory=dict)
    open_choice: bool = False
    space: MaskSpace | None = None  # the machine's NUMA masks, shared by the three providers' hints

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.inputs.machine.numa_nodes

    def held(self, resource: str, container: str | None) -> frozenset[str]:
        return frozenset(
            i
            for h in self.inputs.held
            if h.resource == resource and self.pod.uid and h.pod_uid == self.pod.uid
            if container is None or h.container == container
            for i in h.ids
        )

    def memory_capacity(self) -> dict[int, dict[str, int]]:
        reserved = self.inputs.policy.reserved_memory
        out: dict[int, dict[str, int]] = {}
        for node in self.nodes:
            cap = dict(self.memory_free.get(node, {}))
            total = self.inputs.machine.memory.get(node)
            if total is not None:
                cap["memory"] = max(total - reserved.get(node, {}).get("memory", 0), cap.get("memory", 0))
            out[node] = cap
        return out


def _pod_amount(containers: Sequence[ContainerRequest], resource: str) -> int:
    """``PodLimits`` for one resource: max(long-running sum, each init container plus the sidecars before it)."""
    init_peak = sidecars = apps = 0
    for c in containers:
        n = c.requests.get(resource, 0)
        if not c.init:
            apps += n
        elif c.restartable:
            sidecars += n
        else:
            init_peak = max(init_peak, sidecars + n)
    return max(init_peak, apps + sidecars)


def _device_requests(state: _State, container: ContainerRequest | None) -> dict[str, int]:
    registered = state.inputs.devices.keys()
    if container is not None:
        return dev.container_device_requests(container.requests, registered)
    names = {r for c in state.pod.containers for r in c.requests}
    amounts = {r: _pod_amount(state.pod.containers, r) for r in names}
    return dev.container_device_requests(amounts, registered)


def _hints(state: _State, container: ContainerRequest | None) -> tuple[list[ProviderHints], list[ProviderHintList]]:
    """Every provider's hints for one container (``None``: for the pod), in the kubelet's order."""
    name = container.name if container is not None else None
    device_hints: dict[str, list[TopologyHint] | None] = {}
    for resource, count in _device_requests(state, container).items():
        device_hints[resource] = dev.resource_hints(
            state.inputs.devices[resource],
            state.nodes,
            state.allocated.get(resource, frozenset()),
            count,
            reusable=state.reuse.get(resource, frozenset()) if container is not None else frozenset(),
            held=state.held(resource, name),
            space=state.space,
        )
    qos = state.pod.qos
    if container is not None:
        count = cpu_policy.exclusive_cpus(container, qos)
        cpu = state.cpu.hints(count, state.cpu_free, state.cpu_reuse)
        memory = memory_requests([container], qos)
    else:
        count = cpu_policy.pod_exclusive_cpus(state.pod.containers, qos)
        cpu = state.cpu.hints(count, state.cpu_free, frozenset())
        memory = {r: _pod_amount(state.pod.containers, r) for r in memory_requests(state.pod.containers, qos)}
    mem = None
    if state.inputs.policy.memory == STATIC and state.inputs.free_memory is not None:
        mem = memory_hints(state.nodes, state.memory_free, state.memory_capacity(), memory, space=state.space)
    shown = [ProviderHintList("devices", r, None if h is None else tuple(h)) for r, h in device_hints.items()]
    shown.append(ProviderHintList("cpu", "cpu", None if cpu is None else tuple(cpu)))
    shown.append(ProviderHintList("memory", "memory", None if mem is None else tuple(mem)))
    providers: list[ProviderHints] = [device_hints, {"cpu": cpu} if cpu is not None else None]
    providers.append({"memory": mem} if mem is not None else None)
    return providers, shown


def _allocate(state: _State, container: ContainerRequest, affinity: TopologyHint | None) -> ContainerAdmission:
    """``allocateAlignedResources``: devices, then CPUs, then memory; a failure is the pod's rejection."""
    mask = affinity.numa_nodes if affinity is not None else None
    choices = []
    for resource, count in _device_requests(state, container).items():
        try:
            choice = dev.allocate_devices(
                resource,
                state.inputs.devices[resource],
                state.allocated.get(resource, frozenset()),
                count,
                mask,
                reusable=state.reuse.get(resource, frozenset()),
                held=state.held(resource, container.name),
                preferred=state.inputs.preferred.get(resource),
            )
        except dev.DeviceAllocationError as err:
            raise _unexpected(err.message) from None
        state.open_choice |= choice.open
        taken = frozenset(choice.chosen)
        state.allocated[resource] = state.allocated.get(resource, frozenset()) | taken
        reuse = state.reuse.get(resource, frozenset())
        state.reuse[resource] = reuse | taken if container.init and not container.restartable else reuse - taken
        choices.append(choice)
    count = cpu_policy.exclusive_cpus(container, state.pod.qos)
    cpu_ids: tuple[int, ...] = ()
    if count and state.cpu.static:
        try:
            cpu_ids = state.cpu.allocate(count, state.cpu_free, mask, state.cpu_reuse)
        except Exception as err:  # the provider's typed refusal: reason and message
            reason = getattr(err, "reason", UNEXPECTED_ADMISSION_ERROR)
            message = getattr(err, "message", str(err))
            raise (
                _unexpected(message) if reason == UNEXPECTED_ADMISSION_ERROR else _Rejected(reason, message)
            ) from None
        taken_cpus = frozenset(cpu_ids)
        state.cpu_free -= taken_cpus
        keep = container.init and not container.restartable
        state.cpu_reuse = state.cpu_reuse | taken_cpus if keep else state.cpu_reuse - taken_cpus
    memory_nodes = _allocate_memory(state, container, mask)
    return ContainerAdmission(container.name, container.init, affinity, (), tuple(choices), cpu_ids, memory_nodes)


def _allocate_memory(state: _State, container: ContainerRequest, mask: frozenset[int] | None) -> tuple[int, ...]:
    requests = memory_requests([container], state.pod.qos)
    if state.inputs.policy.memory != STATIC or state.inputs.free_memory is None or not requests:
        return ()
    try:
        nodes = allocate_memory(state.nodes, state.memory_free, requests, mask)
    except MemoryAllocationError as err:
        raise _unexpected(err.message) from None
    if not (container.init and not container.restartable):
        for resource, amount in requests.items():
            for node in nodes:
                have = state.memory_free.setdefault(node, {}).get(resource, 0)
                used = min(have, amount)
                state.memory_free[node][resource] = have - used
                amount -= used
    return nodes


def _state(pod: PodRequest, inputs: AdmissionInputs, cpu: CpuProvider | None) -> _State:
    policy = inputs.policy
    reserved = frozenset(policy.reserved_cpus)
    space = MaskSpace(inputs.machine.numa_nodes)  # built as far as asked: nothing for policy none
    if cpu is None:
        static = policy.cpu == "static"
        cpu = StaticCpuPolicy(inputs.machine, policy.cpu_options, reserved, space=space) if static else NoCpuPolicy()
    free = inputs.free_cpus
    if free is None:
        free = frozenset(c.id for c in inputs.machine.cpus) - reserved
    allocated = {r: inputs.allocated(r) for r in inputs.devices}
    memory = {n: dict(v) for n, v in (inputs.free_memory or {}).items()}
    return _State(inputs, pod, cpu, allocated, {}, free, frozenset(), memory, space=space)


def admit(pod: PodRequest, inputs: AdmissionInputs, cpu: CpuProvider | None = None) -> Admission:
    """Would the kubelet admit ``pod`` now, and with what. ``cpu`` replaces the CPU manager (tests, what-ifs);
    by default it follows ``inputs.policy.cpu``. Raises ``hints.PolicyError`` for settings the kubelet refuses."""
    policy = inputs.policy
    check_policy(policy.topology, len(inputs.machine.numa_nodes), policy.options)
    state = _state(pod, inputs, cpu)
    info = NumaInfo(inputs.machine.numa_nodes, inputs.machine.distances)
    done: list[ContainerAdmission] = []
    try:
        if policy.topology == NONE:
            for container in pod.containers:
                done.append(_allocate(state, container, None))
        elif policy.scope == "pod":
            providers, shown = _hints(state, None)
            best, ok = merge(policy.topology, providers, info, policy.options)
            if not ok:
                done = [ContainerAdmission(c.name, c.init, best, tuple(shown)) for c in pod.containers]
                raise _Rejected(TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
            for container in pod.containers:
                got = _allocate(state, container, best)
                done.append(_with_hints(got, shown))
        else:
            for container in pod.containers:
                providers, shown = _hints(state, container)
                best, ok = merge(policy.topology, providers, info, policy.options)
                if not ok:
                    done.append(ContainerAdmission(container.name, container.init, best, tuple(shown)))
                    raise _Rejected(TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)
                done.append(_with_hints(_allocate(state, container, best), shown))
    except _Rejected as rejected:
        return Admission(False, rejected.reason, rejected.message, policy, tuple(done), (), state.open_choice)
    missing, notes = _out_of(pod, inputs)
    if missing is not None:
        reason, message = f"OutOf{missing[0]}", missing[1]
        return Admission(False, reason, message, policy, tuple(done), (), state.open_choice, notes)
    return Admission(True, None, "", policy, tuple(done), (), state.open_choice, notes)


def _with_hints(got: ContainerAdmission, shown: Sequence[ProviderHintList]) -> ContainerAdmission:
    return ContainerAdmission(
        got.name, got.init, got.affinity, tuple(shown), got.devices, got.cpu_ids, got.memory_numa_nodes
    )


_FIT_ORDER = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def _capacity(resource: str, inputs: AdmissionInputs) -> tuple[int | None, bool]:
    """The node's allocatable of ``resource`` (exact: True), else the machine's CPUs or memory as an upper bound
    (False), else (None, False): unknown."""
    if inputs.allocatable is not None and resource in inputs.allocatable:
        return inputs.allocatable[resource], True
    machine = inputs.machine
    if resource == "cpu" and machine.cpus:
        return 1000 * len(machine.cpus), False
    nodes = machine.numa_nodes
    if resource == "memory" and nodes and all(n in machine.memory for n in nodes):
        return sum(machine.memory[n] for n in nodes), False
    return None, False


def _out_of(pod: PodRequest, inputs: AdmissionInputs) -> tuple[tuple[str, str] | None, tuple[str, ...]]:
    """The resource-fit admit handler (kubelet v1.32 ``lifecycle/predicate.go`` over the scheduler's
    ``noderesources`` ``fitsRequest``): the pod's requests (``PodRequests``: init peaks and sidecars counted)
    against the node's allocatable less what its pods request, cpu, then memory, then ephemeral storage, then
    the rest; the first short one is the reason ``OutOf<resource>``. An extended resource no plugin ever
    registered has capacity 0; a registered one is the device manager's. Also returns notes for what could not
    be checked (allocatable unknown: the machine's CPUs and memory are an upper bound; other pods' use unknown)."""
    names = {r for c in pod.containers for r, n in c.requests.items() if n > 0}
    notes: list[str] = []
    for resource in sorted(names, key=lambda r: (_FIT_ORDER.get(r, 3), r)):
        amount = _pod_amount(pod.containers, resource)
        extended = "/" in resource and not resource.startswith("hugepages-")
        if amount <= 0 or (extended and resource in inputs.devices):
            continue
        capacity, exact = _capacity(resource, inputs)
        if capacity is None and extended:
            capacity, exact = 0, True
        if capacity is None:
            notes.append(f"the resource-fit check for {resource} was not made: the node's allocatable is unknown")
            continue
        used = None if inputs.requested is None else inputs.requested.get(resource, 0)
        if extended and inputs.allocatable is None:
            used = 0  # nothing can hold what no plugin registered
        if amount > capacity - (used or 0):
            shown = "?" if used is None else str(used)
            return (
                resource,
                (
                    f"Node didn't have enough resource: {resource}, requested: {amount}, used: {shown}, "
                    f"capacity: {capacity}"
                ),
            ), tuple(notes)
        if not exact:
            notes.append(
                f"the resource-fit check for {resource} was made against the machine's capacity ({capacity}): "
                "the node's allocatable is unknown"
            )
        elif used is None:
            notes.append(f"the resource-fit check for {resource} did not count other pods' requests (unknown)")
    return None, tuple(notes)
