"""The kubelet's static CPU manager policy: exclusive CPUs, their topology hints, and which CPUs it assigns.

Pure functions over model values, following kubelet v1.32 ``pkg/kubelet/cm/cpumanager/policy_static.go``
(``guaranteedCPUs``, ``podGuaranteedCPUs``, ``generateCPUTopologyHints``, ``Allocate``/``allocateCPUs``, the
reserved set of ``NewStaticPolicy``) and ``policy_options.go``; ``cpu_assign`` holds ``takeByTopology``.

Policy options followed: ``full-pcpus-only`` (SMTAlignmentError), ``distribute-cpus-across-numa``,
``distribute-cpus-across-cores``, ``align-by-socket`` (hints and allocation). The kubelet's validation of option
combinations (and of the feature gates they need) belongs to reading the configuration, not here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from devctl.analyze.admission.cpu_assign import CpuTopology, TakeError, take_distributed, take_packed
from devctl.analyze.admission.masks import MaskSpace, space_for
from devctl.base.errors import DevctlError
from devctl.model import CpuAssignment
from devctl.model.machine import ContainerRequest, MachineTopology, TopologyHint

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_ACROSS_CORES = "distribute-cpus-across-cores"

SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


class CpuAllocationError(DevctlError):
    """The static policy refused or failed an allocation.

    ``reason`` is the admission reason the kubelet reports: ``SMTAlignmentError`` (``message`` is then the
    pod event's message as the kubelet words it), else ``UnexpectedAdmissionError`` with ``message`` the CPU
    manager's own error text (the topology manager words the event "Allocate failed due to <message>, which is
    unexpected").
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def option_on(options: Mapping[str, str], name: str) -> bool:
    """A boolean policy option as the kubelet parses it (Go's ``strconv.ParseBool``); absent is off."""
    return options.get(name, "false").strip() in ("1", "t", "T", "true", "TRUE", "True")


def exclusive_cpus(request: ContainerRequest, qos: str) -> int:
    """``guaranteedCPUs``: a Guaranteed pod's container with an integer CPU request gets that many; else 0."""
    if qos != "Guaranteed":
        return 0
    milli = request.requests.get("cpu", 0)
    if milli <= 0 or milli % 1000:
        return 0
    return milli // 1000


def pod_exclusive_cpus(containers: Iterable[ContainerRequest], qos: str) -> int:
    """``podGuaranteedCPUs`` (scope ``pod``): the larger of the init containers' peak and the long-running sum.

    Restartable init containers (sidecars) add to everything started after them and to the long-running sum.
    """
    by_init = by_sidecars = by_apps = 0
    for container in containers:
        if "cpu" not in container.requests:
            continue
        cpus = exclusive_cpus(container, qos)
        if not container.init:
            by_apps += cpus
        elif container.restartable:
            by_sidecars += cpus
        else:
            by_init = max(by_init, by_sidecars + cpus)
    return max(by_init, by_apps + by_sidecars)


def generate_cpu_hints(
    machine: MachineTopology,
    available: frozenset[int],
    reusable: frozenset[int],
    count: int,
    options: Mapping[str, str],
    *,
    space: MaskSpace | None = None,
) -> list[TopologyHint]:
    """``generateCPUTopologyHints``: every NUMA mask with ``count`` CPUs among the reusable and available ones.

    A mask must hold every reusable CPU. Preferred: the masks as narrow as the narrowest that the machine's CPUs
    (free or not) could satisfy; with ``align-by-socket`` also every mask spanning the fewest sockets.
    Reusable and available CPUs are counted both where both hold one, as the kubelet counts them.
    """
    topo = CpuTopology(machine)
    space = space_for(topo.numa_cpus, space)
    if not space.nodes or any(c not in topo.numa_of for c in reusable):
        return []  # a reusable CPU the machine does not have fits no mask, as its NUMA node is no mask's
    needs = space.bits(topo.numa_of[c] for c in reusable)
    free = space.sums(Counter(topo.numa_of[c] for c in available if c in topo.numa_of))
    # The narrowest width any mask's CPUs (free or not) could hold: the k largest nodes hold the most of any k.
    narrowest, held = len(space.nodes), 0
    for k, size in enumerate(sorted((len(c) for c in topo.numa_cpus.values()), reverse=True), start=1):
        held += size
        if held >= count:
            narrowest = k
            break
    width, base = space.width, len(reusable)
    aligned = _socket_aligned_masks(topo, space, narrowest) if option_on(options, ALIGN_BY_SOCKET) else None
    return space.hints(
        lambda m: m & needs == needs and base + free[m] >= count,
        lambda m: width[m] == narrowest or (aligned is not None and aligned(m)),
    )


def _socket_aligned_masks(topo: CpuTopology, space: MaskSpace, narrowest: int) -> Callable[[int], bool]:
    """``isHintSocketAligned`` for every mask: it spans as few sockets as the narrowest NUMA width needs."""
    per_socket = len(topo.numa_cpus) // len(topo.socket_cpus) if topo.socket_cpus else 0
    if per_socket == 0:
        return lambda m: False
    fewest = (narrowest + per_socket - 1) // per_socket
    order = {s: i for i, s in enumerate(sorted(topo.socket_cpus))}
    sockets: dict[int, int] = {}
    for cpu, numa in topo.numa_of.items():
        sockets[numa] = sockets.get(numa, 0) | 1 << order[topo.socket_of[cpu]]
    spans = space.unions(sockets)
    return lambda m: spans[m].bit_count() == fewest


def cpu_hints(
    machine: MachineTopology,
    available: frozenset[int],
    request: ContainerRequest,
    qos: str,
    options: Mapping[str, str],
    reusable: frozenset[int] = frozenset(),
    *,
    allocated: frozenset[int] | None = None,
) -> list[TopologyHint] | None:
    """``GetTopologyHints`` (scope ``container``): ``None`` is no preference (no exclusive CPUs).

    ``allocated``: the CPUs cpu_manager_state already gives this container (after a kubelet restart); the
    hints are then regenerated from them alone, and a size other than the request is ``[]`` (no hint can be
    satisfied: every policy but ``best-effort`` rejects).
    """
    count = exclusive_cpus(request, qos)
    if count == 0:
        return None
    if allocated is not None:
        if len(allocated) != count:
            return []
        return generate_cpu_hints(machine, allocated, frozenset(), count, options)
    return generate_cpu_hints(machine, available, reusable, count, options)


def _take(topo: CpuTopology, pool: frozenset[int], count: int, options: Mapping[str, str]) -> frozenset[int]:
    """The policy's ``takeByTopology``: packed, or distributed across NUMA nodes, as the options say."""
    spread = option_on(options, DISTRIBUTE_ACROSS_CORES)
    if option_on(options, DISTRIBUTE_ACROSS_NUMA):
        group = topo.per_core if option_on(options, FULL_PCPUS_ONLY) else 1
        return take_distributed(topo, pool, count, group, spread=spread)
    return take_packed(topo, pool, count, spread=spread)


def _aligned(topo: CpuTopology, affinity: frozenset[int], pool: frozenset[int], by_socket: bool) -> frozenset[int]:
    if by_socket:
        sockets = topo.sockets_of_numas(affinity)
        return frozenset(c for c in pool if topo.socket_of[c] in sockets)
    return pool & topo.cpus_in_numas(affinity)


def _smt_check(topo: CpuTopology, available: frozenset[int], count: int, reserved: frozenset[int]) -> None:
    group = topo.per_core
    if group and count % group:
        raise CpuAllocationError(
            SMT_ALIGNMENT_ERROR,
            f"SMT Alignment Error: requested {count} cpus not multiple cpus per core = {group}",
        )
    siblings = frozenset(s for c in reserved if c in topo.core_of for s in topo.core_cpus[topo.core_of[c]])
    physical = len(available - siblings)
    if count > physical:
        raise CpuAllocationError(
            SMT_ALIGNMENT_ERROR,
            "SMT Alignment Error: not enough free physical CPUs: "
            f"available physical CPUs = {physical}, requested CPUs = {count}, CPUs per core = {group}",
        )


def allocate_cpus(
    machine: MachineTopology,
    available: frozenset[int],
    count: int,
    affinity: frozenset[int] | None,
    options: Mapping[str, str],
    *,
    reusable: frozenset[int] = frozenset(),
    reserved: frozenset[int] = frozenset(),
) -> tuple[int, ...]:
    """The static policy's ``Allocate``: ``count`` exclusive CPUs, inside ``affinity``'s NUMA nodes first.

    ``available`` is the shared pool less the reserved CPUs (``shared_pool``); ``reusable`` the CPUs the pod's
    finished init containers held; ``reserved`` is needed by ``full-pcpus-only``, which counts the reserved
    CPUs' core siblings as taken. Returns the CPUs sorted; raises ``CpuAllocationError``.
    """
    topo = CpuTopology(machine)
    if count <= 0:
        return ()
    if option_on(options, FULL_PCPUS_ONLY):
        _smt_check(topo, available, count, reserved)
    pool = available | reusable
    result: frozenset[int] = frozenset()
    try:
        if affinity is not None:
            aligned = _aligned(topo, affinity, pool, option_on(options, ALIGN_BY_SOCKET))
            result = _take(topo, aligned, min(count, len(aligned)), options)
        result |= _take(topo, pool - result, count - len(result), options)
    except TakeError as err:
        raise CpuAllocationError(UNEXPECTED_ADMISSION_ERROR, str(err)) from None
    return tuple(sorted(result))


def reserved_cpus(
    machine: MachineTopology, reserved_milli: int, options: Mapping[str, str] | None = None
) -> tuple[int, ...]:
    """The static policy's reserved set without ``reservedSystemCPUs``: ceil(millis / 1000) CPUs by topology.

    As ``NewStaticPolicy`` takes them: the policy's own ``takeByTopology`` over every CPU (so the low-numbered
    cores' threads: 2 reserved on an 8-CPU HT machine are CPUs 0 and 4). Raises ``CpuAllocationError`` when
    the machine has fewer CPUs (the kubelet then does not start).
    """
    count = -(-max(reserved_milli, 0) // 1000)
    topo = CpuTopology(machine)
    try:
        return tuple(sorted(_take(topo, topo.all, count, options or {})))
    except TakeError as err:
        raise CpuAllocationError(
            UNEXPECTED_ADMISSION_ERROR, f"unable to reserve the required amount of CPUs ({err})"
        ) from None


def shared_pool(
    machine: MachineTopology, reserved: Iterable[int], assignments: Iterable[CpuAssignment]
) -> frozenset[int]:
    """``GetAvailableCPUs``: the CPUs no container holds exclusively, less the reserved ones.

    Built from cpu_manager_state's assignments (``CpuManagerState.assignments``) over the machine's CPUs, so
    a state file's defaultCpuSet that disagrees with its entries does not decide it.
    """
    taken: set[int] = set(reserved)
    for assignment in assignments:
        taken.update(assignment.cpus)
    return frozenset(cpu.id for cpu in machine.cpus) - taken
