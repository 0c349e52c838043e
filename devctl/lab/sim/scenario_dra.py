"""The ``dra:`` section of a scenario: DRA drivers the simulator runs, and the claims it prepares for pods.

The simulator plays the scheduler's part: a claim names its driver, its
devices and the pod (and container) that holds it, and the in-process driver
is told that allocation. The format (docs/dra.md, "The scenario's dra: section")::

    dra:
      drivers:
        - name: gpu.example.com
          pool: sim-node                # default: the node name, sim-node
          devices:                      # or count: N (named <first label>-0 …) with numa: [...]
            - {name: gpu-0, numa: 0}
            - {name: gpu-1, numa: 1, health: Unhealthy}
          health_stream: true           # offer DRAResourceHealth
          health_timeout: 30            # health_check_timeout_seconds sent with each device
          versions: [v1, v1beta1]       # DRA API versions offered, in order
      claims:
        - {namespace: ml, name: train-gpu, driver: gpu.example.com, devices: [gpu-0], pod: ml/train-2, container: main}
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devctl.base.errors import DevctlError
from devctl.lab.plugin.dra import DRA_LABELS, UNKNOWN, DraDevice, DraSpec
from devctl.model import HEALTHY, UNHEALTHY

NODE_NAME = "sim-node"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CLAIM_UID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "claims.sim.devctl.invalid")
MAX_DEVICES = 4096


class DraScenarioError(DevctlError, ValueError):
    """A bad ``dra:`` field; the message names its path."""


@dataclass(frozen=True)
class ClaimSpec:
    """A ResourceClaim allocated on this node, held by one pod's container."""

    namespace: str
    name: str
    uid: str
    driver: str
    devices: tuple[str, ...]
    pod: tuple[str, str]  # namespace, name
    container: str


@dataclass(frozen=True)
class DraScenario:
    drivers: tuple[DraSpec, ...] = ()
    claims: tuple[ClaimSpec, ...] = ()

    def driver(self, name: str) -> DraSpec | None:
        return next((d for d in self.drivers if d.driver == name), None)

    def claim(self, uid: str) -> ClaimSpec | None:
        return next((c for c in self.claims if c.uid == uid), None)


def claim_uid(namespace: str, name: str) -> str:
    """The UID a claim gets when the scenario names none: stable across runs."""
    return str(uuid.uuid5(_CLAIM_UID_NAMESPACE, f"{namespace}/{name}"))


def no_unknown(data: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in data:
        if key not in known:
            raise DraScenarioError(f"{where}: unknown field {key!r} (known: {', '.join(known)})")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DraScenarioError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise DraScenarioError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, low: int = 0, high: int = 2**31 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DraScenarioError(f"{where}: expected an integer from {low} to {high}, got {value!r}")
    return value


def _numa(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (_int(value, where, 0, 1023),)
    return tuple(_int(v, where, 0, 1023) for v in _list(value, where))


def parse_dra(value: Any, pods: Mapping[tuple[str, str], Sequence[str]]) -> DraScenario:
    """The ``dra:`` section; ``pods`` maps each scenario pod (namespace, name) to its container names."""
    if value is None:
        return DraScenario()
    entry = _mapping(value, "dra")
    no_unknown(entry, ("drivers", "claims"), "dra")
    drivers: list[DraSpec] = []
    for i, item in enumerate(_list(entry.get("drivers") or [], "dra.drivers")):
        spec = _driver(item, f"dra.drivers[{i}]")
        if any(d.driver == spec.driver for d in drivers):
            raise DraScenarioError(f"dra.drivers[{i}].name: {spec.driver} is listed twice")
        drivers.append(spec)
    scenario = DraScenario(drivers=tuple(drivers))
    claims: list[ClaimSpec] = []
    taken: dict[tuple[str, str], str] = {}
    for i, item in enumerate(_list(entry.get("claims") or [], "dra.claims")):
        claim = _claim(item, f"dra.claims[{i}]", scenario, pods)
        if any((c.namespace, c.name) == (claim.namespace, claim.name) or c.uid == claim.uid for c in claims):
            raise DraScenarioError(f"dra.claims[{i}]: claim {claim.namespace}/{claim.name} is listed twice")
        for d in claim.devices:
            key = (claim.driver, d)
            if key in taken:
                raise DraScenarioError(
                    f"dra.claims[{i}].devices: {claim.driver} {d} is already allocated to {taken[key]}"
                )
            taken[key] = f"{claim.namespace}/{claim.name}"
        claims.append(claim)
    return DraScenario(drivers=tuple(drivers), claims=tuple(claims))


def _driver(value: Any, where: str) -> DraSpec:
    entry = _mapping(value, where)
    no_unknown(
        entry, ("name", "pool", "devices", "count", "numa", "health_stream", "health_timeout", "versions"), where
    )
    name = str(entry.get("name") or "")
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 63:
        raise DraScenarioError(f"{where}.name: {name!r} is not a driver name like gpu.example.com")
    pool = str(entry.get("pool") or NODE_NAME)
    if "/" in pool:
        raise DraScenarioError(f"{where}.pool: {pool!r} holds '/'")
    if "devices" in entry and "count" in entry:
        raise DraScenarioError(f"{where}: give devices or count, not both")
    devices: list[DraDevice] = []
    if "count" in entry:
        count = _int(entry["count"], f"{where}.count", 0, MAX_DEVICES)
        numa = [_numa(n, f"{where}.numa") for n in _list(entry.get("numa") or [], f"{where}.numa")]
        base = name.split(".", 1)[0]
        devices = [DraDevice(f"{base}-{i}", numa[i] if i < len(numa) else ()) for i in range(count)]
    for j, d in enumerate(_list(entry.get("devices") or [], f"{where}.devices")):
        dwhere = f"{where}.devices[{j}]"
        d = _mapping(d, dwhere)
        no_unknown(d, ("name", "numa", "health"), dwhere)
        dname = str(d.get("name") or "")
        if not dname or "/" in dname:
            raise DraScenarioError(f"{dwhere}.name: {dname!r} is empty or holds '/'")
        health = str(d.get("health", HEALTHY))
        if health not in (HEALTHY, UNHEALTHY, UNKNOWN):
            raise DraScenarioError(f"{dwhere}.health: {health!r} is not {HEALTHY}, {UNHEALTHY} or {UNKNOWN}")
        devices.append(DraDevice(dname, _numa(d.get("numa"), f"{dwhere}.numa"), health))
    if len({d.name for d in devices}) != len(devices):
        raise DraScenarioError(f"{where}.devices: device names must be unique")
    health_stream = entry.get("health_stream", True)
    if not isinstance(health_stream, bool):
        raise DraScenarioError(f"{where}.health_stream: expected true or false, got {health_stream!r}")
    versions = tuple(str(v) for v in _list(entry.get("versions") or list(DRA_LABELS), f"{where}.versions"))
    if not versions or any(v not in DRA_LABELS for v in versions):
        raise DraScenarioError(f"{where}.versions: expected some of {', '.join(DRA_LABELS)}, got {list(versions)}")
    return DraSpec(
        driver=name,
        pool=pool,
        devices=tuple(devices),
        versions=versions,
        health=health_stream,
        health_timeout=_int(entry.get("health_timeout", 30), f"{where}.health_timeout", 1, 86400),
    )


def _claim(value: Any, where: str, scenario: DraScenario, pods: Mapping[tuple[str, str], Sequence[str]]) -> ClaimSpec:
    entry = _mapping(value, where)
    no_unknown(entry, ("namespace", "name", "uid", "driver", "devices", "pod", "container"), where)
    pod_text = str(entry.get("pod") or "")
    pod_ns, sep, pod_name = pod_text.partition("/")
    if not sep or (pod_ns, pod_name) not in pods:
        raise DraScenarioError(f"{where}.pod: {pod_text!r} is not a pod of the scenario (namespace/name)")
    namespace = str(entry.get("namespace") or pod_ns)
    if namespace != pod_ns:
        raise DraScenarioError(f"{where}.namespace: a claim is in its pod's namespace ({pod_ns}), not {namespace}")
    name = str(entry.get("name") or "")
    if not _DNS_SUBDOMAIN.match(name):
        raise DraScenarioError(f"{where}.name: {name!r} is not a DNS subdomain")
    containers = pods[(pod_ns, pod_name)]
    container = str(entry.get("container") or containers[0])
    if container not in containers:
        raise DraScenarioError(f"{where}.container: pod {pod_text} has no container {container!r}")
    driver = str(entry.get("driver") or "")
    spec = scenario.driver(driver)
    if spec is None:
        raise DraScenarioError(f"{where}.driver: no driver of dra.drivers is named {driver!r}")
    devices = tuple(str(d) for d in _list(entry.get("devices") or [], f"{where}.devices"))
    known = {d.name for d in spec.devices}
    if not devices or (unknown := [d for d in devices if d not in known]):
        raise DraScenarioError(
            f"{where}.devices: {driver} has no device {unknown[0]!r}"
            if devices
            else f"{where}.devices: a claim needs a device"
        )
    return ClaimSpec(
        namespace=namespace,
        name=name,
        uid=str(entry.get("uid") or claim_uid(namespace, name)),
        driver=driver,
        devices=devices,
        pod=(pod_ns, pod_name),
        container=container,
    )
