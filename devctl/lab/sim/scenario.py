"""Scenario files: a whole simulated node (topology, device plugins, pods) in one YAML document.

The format is docs/scenarios.md; ``scenarios/default.yaml`` shows every field. Everything is checked here, once, so
that the simulator never starts on a node that could not exist: a bad field
becomes a ``ScenarioError`` whose one line names the field.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.units import format_cpulist, parse_cpulist, parse_quantity
from devctl.lab.plugin.spec import PluginSpec, PluginSpecError, numa_node_error, spec_from_mapping
from devctl.lab.sim.kmsg import KernelLine, KernelScenarioError, parse_kernel
from devctl.lab.sim.kubelet_config import CONFIG_FIELDS, DEFAULT_CONFIG, parse_kubelet_config
from devctl.lab.sim.pcietree import PcieError, parse_pcie
from devctl.lab.sim.scenario_dra import DraScenario, DraScenarioError, parse_dra
from devctl.lab.sim.stuck import parse_waiting
from devctl.model import ClaimDevice, ContainerMemory, DynamicResource, Hugepages, NumaNode, PciDevice

# Namespaces and pod names are DNS names (a label and a subdomain): the kubelet's
# log directories <namespace>_<name>_<uid> rely on them never holding "_".
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# Fixed, so that a pod without an explicit uid gets the same UID on every run.
_POD_UID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "sim.devctl.invalid")
API_VERSIONS = ("v1", "v1alpha1")


class ScenarioError(DevctlError, ValueError):
    """A scenario that cannot be simulated; the message is one line naming the bad field."""


@dataclass(frozen=True)
class KubeletOptions:
    """The kubelet's feature switches that change what pod-resources answers."""

    get_enabled: bool = True  # KubeletPodResourcesGet
    api: str = "v1"  # "v1alpha1": an old kubelet that serves only v1alpha1 List
    dynamic_resources: bool = True  # KubeletPodResourcesDynamicResources
    config: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_CONFIG))  # lab/sim/kubelet_config.py


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    requests: dict[str, int] = field(default_factory=dict)  # device plugin resource -> count
    cpus: tuple[int, ...] = ()  # exclusive CPUs (the CPU manager's static policy)
    memory: tuple[ContainerMemory, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()
    waiting: tuple[str, str] | None = None  # (reason, message): stuck before it runs (lab/sim/stuck.py)


@dataclass(frozen=True)
class PodSpec:
    namespace: str
    name: str
    uid: str
    containers: tuple[ContainerSpec, ...] = ()


@dataclass(frozen=True)
class ProcessSpec:
    """A process planted on the simulated node (``processes:``), in a pod's container or outside any pod."""

    command: str
    pod: tuple[str, str] | None = None  # (namespace, name)
    container: str | None = None
    open: str | tuple[str, ...] = "allocated"  # "allocated", "all" (every allocated node), or host paths


@dataclass(frozen=True)
class Scenario:
    numa_nodes: tuple[NumaNode, ...] = ()
    reserved_cpus: tuple[int, ...] = ()
    resources: tuple[PluginSpec, ...] = ()
    pods: tuple[PodSpec, ...] = ()
    pci_devices: tuple[PciDevice, ...] = ()
    kubelet: KubeletOptions = field(default_factory=KubeletOptions)
    dra: DraScenario = field(default_factory=DraScenario)
    processes: tuple[ProcessSpec, ...] = ()
    kernel: tuple[KernelLine, ...] = ()  # the kernel log's lines (lab/sim/kmsg.py)

    @property
    def cpus(self) -> tuple[int, ...]:
        """Every CPU of the node."""
        return tuple(sorted(c for n in self.numa_nodes for c in n.cpus))

    @property
    def allocatable_cpus(self) -> tuple[int, ...]:
        """Every CPU but the reserved ones: what GetAllocatableResources reports."""
        reserved = set(self.reserved_cpus)
        return tuple(c for c in self.cpus if c not in reserved)

    def resource(self, name: str) -> PluginSpec | None:
        return next((r for r in self.resources if r.resource == name), None)


def pod_uid(namespace: str, name: str) -> str:
    """The UID a pod gets when the scenario names none: stable across runs."""
    return str(uuid.uuid5(_POD_UID_NAMESPACE, f"{namespace}/{name}"))


def default_scenario() -> Scenario:
    """The packaged default node: two NUMA nodes, GPUs, SR-IOV VFs, a device without topology, six pods."""
    return parse_scenario(_load_yaml(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text()))


def load_scenario(path: str | Path) -> Scenario:
    """A scenario from a YAML file; every problem, from a missing file to a bad field, is a ScenarioError."""
    from devctl.node.files import FileReadError, read_file

    try:
        text = read_file(str(path)).decode("utf-8")
    except FileReadError as e:
        raise ScenarioError(str(e)) from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a text file") from None
    try:
        return parse_scenario(_load_yaml(text))
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None


def _load_yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ScenarioError(f"not valid YAML: {where}{problem}") from None


_TOP_LEVEL = ("numa_nodes", "reserved_cpus", "resources", "pods", "pci_devices", "pcie", "kubelet", "dra", "processes")


def parse_scenario(data: Mapping[str, Any]) -> Scenario:
    """A scenario from its parsed YAML mapping (see docs/scenarios.md)."""
    if not isinstance(data, Mapping):
        raise ScenarioError("a scenario must be a mapping with numa_nodes, resources and pods")
    _no_unknown(data, (*_TOP_LEVEL, "kernel"), "")  # kernel: the kernel log (lab/sim/kmsg.py)
    numa_nodes = _numa_nodes(data.get("numa_nodes") or ())
    all_cpus = {c for n in numa_nodes for c in n.cpus}
    reserved = _cpus(data.get("reserved_cpus"), "reserved_cpus")
    if stray := set(reserved) - all_cpus:
        raise ScenarioError(f"reserved_cpus: CPUs {format_cpulist(stray)} are on no NUMA node")
    specs = _resources(data.get("resources") or ())
    scenario = Scenario(
        numa_nodes=numa_nodes,
        reserved_cpus=reserved,
        resources=specs,
        pci_devices=_pci_devices(data.get("pci_devices") or (), data.get("pcie")),
        kubelet=_kubelet(data.get("kubelet") or {}, reserved),
    )
    pods = _pods(data.get("pods") or (), scenario)
    try:
        dra = parse_dra(data.get("dra"), {(p.namespace, p.name): [c.name for c in p.containers] for p in pods})
        kernel = parse_kernel(data.get("kernel"))
    except (DraScenarioError, KernelScenarioError) as e:
        raise ScenarioError(str(e)) from None
    return replace(scenario, pods=pods, dra=dra, processes=_processes(data.get("processes") or ()), kernel=kernel)


# --- pieces -------------------------------------------------------------------------


def _no_unknown(data: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in data:
        if key not in known:
            prefix = f"{where}: " if where else ""
            raise ScenarioError(f"{prefix}unknown field {key!r} (known: {', '.join(known)})")


def _list(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _cpus(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(sorted(set(value)))
    try:
        return parse_cpulist(str(value))
    except ValueError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _size(value: Any, where: str) -> int:
    try:
        return parse_quantity(value if isinstance(value, int) else str(value))
    except ValueError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}: expected an integer, got {value!r}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{where}: expected true or false, got {value!r}")
    return value


def _numa_list(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return tuple(_int(v, where) for v in _list(value, where))


def _hugepage_size_kb(value: Any, where: str) -> int:
    size = _size(value, where)
    if size % 1024 or size <= 0:
        raise ScenarioError(f"{where}: a hugepage size must be a whole number of KiB, like 2Mi or 1Gi")
    return size // 1024


def _numa_nodes(value: Any) -> tuple[NumaNode, ...]:
    nodes: list[NumaNode] = []
    seen_cpus: dict[int, int] = {}
    for i, item in enumerate(_list(value, "numa_nodes")):
        where = f"numa_nodes[{i}]"
        entry = _mapping(item, where)
        _no_unknown(entry, ("id", "cpus", "memory", "hugepages"), where)
        if "id" not in entry:
            raise ScenarioError(f"{where}: needs an 'id'")
        node_id = _int(entry["id"], f"{where}.id")
        if (why := numa_node_error(node_id)) is not None:
            raise ScenarioError(f"{where}.id: {why}")
        if any(n.id == node_id for n in nodes):
            raise ScenarioError(f"{where}.id: {node_id} is used twice")
        cpus = _cpus(entry.get("cpus"), f"{where}.cpus")
        for cpu in cpus:
            if cpu in seen_cpus:
                raise ScenarioError(f"{where}.cpus: CPU {cpu} is already on NUMA node {seen_cpus[cpu]}")
            seen_cpus[cpu] = node_id
        pages = []
        for j, hp in enumerate(_list(entry.get("hugepages") or [], f"{where}.hugepages")):
            hwhere = f"{where}.hugepages[{j}]"
            hp = _mapping(hp, hwhere)
            _no_unknown(hp, ("size", "total", "free"), hwhere)
            total = _int(hp.get("total", 0), f"{hwhere}.total")
            free = _int(hp.get("free", total), f"{hwhere}.free")
            if not 0 <= free <= total:
                raise ScenarioError(f"{hwhere}.free: must be between 0 and total ({total})")
            pages.append(Hugepages(size_kb=_hugepage_size_kb(hp.get("size"), f"{hwhere}.size"), total=total, free=free))
        memory = _size(entry["memory"], f"{where}.memory") if entry.get("memory") is not None else 0
        nodes.append(NumaNode(id=node_id, cpus=cpus, memory_bytes=memory, hugepages=tuple(pages)))
    return tuple(sorted(nodes, key=lambda n: n.id))


def _resources(value: Any) -> tuple[PluginSpec, ...]:
    specs: list[PluginSpec] = []
    for i, item in enumerate(_list(value, "resources")):
        where = f"resources[{i}]"
        _no_unknown_in_resource(_mapping(item, where), where)
        try:
            spec = spec_from_mapping(_mapping(item, where))
        except PluginSpecError as e:
            raise ScenarioError(f"{where}: {e}") from None
        if any(s.resource == spec.resource for s in specs):
            raise ScenarioError(f"{where}.name: {spec.resource} is listed twice")
        if any(s.socket == spec.socket for s in specs):
            raise ScenarioError(f"{where}.socket: {spec.socket} is used by another resource")
        if "/" in spec.socket or spec.socket in ("kubelet.sock", "kubelet_internal_checkpoint"):
            raise ScenarioError(f"{where}.socket: {spec.socket!r} must be a plain file name of its own")
        specs.append(spec)
    return tuple(specs)


_RESOURCE_KEYS = ("name", "socket", "devices", "count", "numa", "preferred_allocation", "pre_start", "allocate")
_ALLOCATE_KEYS = {
    "envs": None,
    "annotations": None,
    "cdi_devices": None,
    "mounts": ("container_path", "host_path", "read_only"),
    "devices": ("container_path", "host_path", "permissions"),
}


def _no_unknown_in_resource(entry: Mapping[str, Any], where: str) -> None:
    """A misspelt key of a resource (``pre_star``) is an error naming it, not a silent default."""
    _no_unknown(entry, _RESOURCE_KEYS, where)
    for j, d in enumerate(entry.get("devices") or ()):
        if isinstance(d, Mapping):
            _no_unknown(d, ("id", "numa", "health"), f"{where}.devices[{j}]")
    allocate = entry.get("allocate") or {}
    if isinstance(allocate, Mapping):
        _no_unknown(allocate, tuple(_ALLOCATE_KEYS), f"{where}.allocate")
        for key, known in _ALLOCATE_KEYS.items():
            if known is None:  # a list of strings or a mapping of them: no keys of its own
                continue
            for j, item in enumerate(allocate.get(key) or ()):
                if isinstance(item, Mapping):
                    _no_unknown(item, known, f"{where}.allocate.{key}[{j}]")


def _pci_devices(value: Any, pcie: Any = None) -> tuple[PciDevice, ...]:
    """The flat ``pci_devices:``, then every function of the ``pcie:`` tree (lab/sim/pcietree.py)."""
    try:
        out: list[PciDevice] = list(parse_pcie(pcie))
    except PcieError as e:
        raise ScenarioError(str(e)) from None
    for i, item in enumerate(_list(value, "pci_devices")):
        where = f"pci_devices[{i}]"
        entry = _mapping(item, where)
        _no_unknown(entry, ("address", "numa_node", "vendor", "device", "class", "driver"), where)
        address = str(entry.get("address", "")).lower()
        if not _PCI_ADDRESS.match(address):
            raise ScenarioError(f"{where}.address: {address!r} is not a PCI address like 0000:3b:00.0")
        if any(d.address == address for d in out):
            raise ScenarioError(f"{where}.address: {address} is listed twice")
        driver = entry.get("driver")
        out.append(
            PciDevice(
                address=address,
                numa_node=_int(entry.get("numa_node", -1), f"{where}.numa_node"),
                vendor_id=str(entry.get("vendor", "")),
                device_id=str(entry.get("device", "")),
                class_id=str(entry.get("class", "")),
                driver=str(driver) if driver is not None else None,
            )
        )
    return tuple(out)


def _kubelet(value: Any, reserved: tuple[int, ...] = ()) -> KubeletOptions:
    entry = _mapping(value, "kubelet")
    _no_unknown(entry, ("get_enabled", "api", "dynamic_resources", *CONFIG_FIELDS), "kubelet")
    api = str(entry.get("api", "v1"))
    if api not in API_VERSIONS:
        raise ScenarioError(f"kubelet.api: {api!r} is not one of {', '.join(API_VERSIONS)}")
    get = _bool(entry.get("get_enabled", True), "kubelet.get_enabled")
    dynamic = _bool(entry.get("dynamic_resources", True), "kubelet.dynamic_resources")
    return KubeletOptions(get, api, dynamic, parse_kubelet_config(entry, reserved, ScenarioError))


def parse_pods(value: Any, scenario: Scenario) -> tuple[PodSpec, ...]:
    """Pods in the scenario's ``pods:`` format, checked against the scenario's resources and CPUs (``sim add-pod``)."""
    return _pods(value, scenario)


def _pods(value: Any, scenario: Scenario) -> tuple[PodSpec, ...]:
    pods: list[PodSpec] = []
    taken_cpus: dict[int, str] = {}
    allocatable = set(scenario.allocatable_cpus)
    for i, item in enumerate(_list(value, "pods")):
        where = f"pods[{i}]"
        entry = _mapping(item, where)
        _no_unknown(entry, ("namespace", "name", "uid", "containers"), where)
        namespace = str(entry.get("namespace", "default"))
        if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
            raise ScenarioError(f"{where}.namespace: {namespace!r} is not a DNS label (lower case, digits, '-')")
        name = str(entry.get("name", ""))
        if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
            raise ScenarioError(f"{where}.name: {name!r} is not a DNS subdomain (lower case, digits, '-', '.')")
        if any(p.namespace == namespace and p.name == name for p in pods):
            raise ScenarioError(f"{where}: pod {namespace}/{name} is listed twice")
        uid = str(entry.get("uid") or pod_uid(namespace, name))
        if any(p.uid == uid for p in pods) or "/" in uid or "_" in uid:
            raise ScenarioError(f"{where}.uid: {uid!r} is used twice or holds '/' or '_'")
        containers: list[ContainerSpec] = []
        for j, c in enumerate(_list(entry.get("containers") or [], f"{where}.containers")):
            container = _container(c, f"{where}.containers[{j}]", scenario, namespace)
            if any(x.name == container.name for x in containers):
                raise ScenarioError(f"{where}.containers[{j}].name: {container.name!r} is used twice in the pod")
            cwhere = f"{where}.containers[{j}].cpus"
            if stray := set(container.cpus) - allocatable:
                raise ScenarioError(f"{cwhere}: CPUs {format_cpulist(stray)} are reserved or on no NUMA node")
            for cpu in container.cpus:
                if cpu in taken_cpus:
                    raise ScenarioError(f"{cwhere}: CPU {cpu} is already exclusive to {taken_cpus[cpu]}")
                taken_cpus[cpu] = f"{namespace}/{name}/{container.name}"
            containers.append(container)
        if not containers:
            raise ScenarioError(f"{where}.containers: a pod needs at least one container")
        pods.append(PodSpec(namespace=namespace, name=name, uid=uid, containers=tuple(containers)))
    return tuple(pods)


def _container(value: Any, where: str, scenario: Scenario, namespace: str) -> ContainerSpec:
    entry = _mapping(value, where)
    _no_unknown(entry, ("name", "requests", "cpus", "memory", "dynamic_resources", "waiting"), where)
    name = str(entry.get("name", ""))
    if not _DNS_LABEL.match(name):
        raise ScenarioError(f"{where}.name: {name!r} is not a DNS label (lower case, digits, '-')")
    requests: dict[str, int] = {}
    for resource, count in _mapping(entry.get("requests") or {}, f"{where}.requests").items():
        rwhere = f"{where}.requests.{resource}"
        if scenario.resource(str(resource)) is None:
            raise ScenarioError(f"{rwhere}: no resource of the scenario is named {resource!r}")
        number = _int(count, rwhere)
        if number < 0:
            raise ScenarioError(f"{rwhere}: a request cannot be negative")
        if number:
            requests[str(resource)] = number
    memory = []
    for k, m in enumerate(_list(entry.get("memory") or [], f"{where}.memory")):
        mwhere = f"{where}.memory[{k}]"
        m = _mapping(m, mwhere)
        _no_unknown(m, ("type", "size", "numa"), mwhere)
        if "size" not in m:
            raise ScenarioError(f"{mwhere}: needs a 'size'")
        nodes = _numa_list(m.get("numa"), f"{mwhere}.numa")
        if unknown := [n for n in nodes if all(x.id != n for x in scenario.numa_nodes)]:
            raise ScenarioError(f"{mwhere}.numa: NUMA node {unknown[0]} is not in numa_nodes")
        memory.append(
            ContainerMemory(
                type=str(m.get("type", "memory")), size=_size(m["size"], f"{mwhere}.size"), numa_nodes=nodes
            )
        )
    dr = f"{where}.dynamic_resources"
    claims = [_claim(c, f"{dr}[{k}]", namespace) for k, c in enumerate(_list(entry.get("dynamic_resources") or [], dr))]
    return ContainerSpec(
        name=name,
        requests=requests,
        cpus=_cpus(entry.get("cpus"), f"{where}.cpus"),
        memory=tuple(memory),
        dynamic_resources=tuple(claims),
        waiting=parse_waiting(entry.get("waiting"), f"{where}.waiting", ScenarioError),
    )


def _claim(value: Any, where: str, namespace: str) -> DynamicResource:
    entry = _mapping(value, where)
    _no_unknown(entry, ("claim_name", "claim_namespace", "devices"), where)
    if not entry.get("claim_name"):
        raise ScenarioError(f"{where}: needs a 'claim_name'")
    devices = []
    for i, d in enumerate(_list(entry.get("devices") or [], f"{where}.devices")):
        d = _mapping(d, dwhere := f"{where}.devices[{i}]")
        _no_unknown(d, ("driver", "pool", "device", "cdi_devices"), dwhere)
        for key in ("driver", "pool", "device"):
            if not d.get(key):
                raise ScenarioError(f"{dwhere}: needs a '{key}'")
        cdi = tuple(str(n) for n in _list(d.get("cdi_devices") or [], f"{dwhere}.cdi_devices"))
        devices.append(
            ClaimDevice(driver=str(d["driver"]), pool=str(d["pool"]), device=str(d["device"]), cdi_devices=cdi)
        )
    return DynamicResource(
        claim_name=str(entry["claim_name"]),
        claim_namespace=str(entry.get("claim_namespace") or namespace),
        devices=tuple(devices),
    )


def _processes(value: Any) -> tuple[ProcessSpec, ...]:
    """``processes:`` entries: ``command``, optional ``pod: NS/NAME`` with ``container``, and ``open``."""
    out = []
    for i, item in enumerate(_list(value, "processes")):
        where = f"processes[{i}]"
        p = _mapping(item, where)
        _no_unknown(p, ("command", "pod", "container", "open"), where)
        command = str(p.get("command") or "").strip()
        if not command:
            raise ScenarioError(f"{where}: a process needs a command")
        pod = None
        if p.get("pod") is not None:
            namespace, sep, name = str(p["pod"]).partition("/")
            if not sep or not namespace or not name:
                raise ScenarioError(f"{where}.pod: write it as NAMESPACE/NAME")
            if not p.get("container"):
                raise ScenarioError(f"{where}: a process in a pod needs its container")
            pod = (namespace, name)
        opens = p.get("open", "allocated" if pod is not None else ())
        if isinstance(opens, str):
            if opens not in ("allocated", "all"):
                raise ScenarioError(f"{where}.open: 'allocated', 'all' or a list of device node paths")
        else:
            opens = tuple(str(o) for o in _list(opens, f"{where}.open"))
            if bad := [o for o in opens if not o.startswith("/")]:
                raise ScenarioError(f"{where}.open: {bad[0]} is not an absolute path")
        out.append(ProcessSpec(command, pod, str(p["container"]) if pod else None, opens))
    return tuple(out)
