"""The simulated node's DRA pieces that are not the kubelet: the scenario's drivers, and claims at admission.

The simulator plays the scheduler's part: each in-process driver learns a
claim's devices from the scenario (``dra.claims``), as a real driver learns
them from the claim's allocation in the API server. Pods with claims have
them prepared before they run; a pod whose claim cannot be prepared does not
run (it is listed in the device manager's ``failed``, as a refused pod is).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, MutableMapping
from typing import Any

from devctl.lab.plugin.dra import ALLOCATIONS_FILE, DraDriver
from devctl.lab.sim.devicemanager import DeviceManager
from devctl.lab.sim.dramanager import DraManager
from devctl.lab.sim.scenario import PodSpec
from devctl.lab.sim.scenario_dra import DraScenario
from devctl.model import NodePaths, PodResources

log = logging.getLogger("devctl.lab.sim")


def allocation_of(dra: DraScenario, driver: str) -> Any:
    """The scheduler's answer for one driver: a claim UID's device names, or None for a claim it never allocated."""

    def allocation(namespace: str, name: str, uid: str) -> tuple[str, ...] | None:
        claim = dra.claim(uid)
        return claim.devices if claim is not None and claim.driver == driver else None

    return allocation


def write_allocations(root: str, dra: DraScenario) -> None:
    """Record the scenario's allocations where ``devctl plugin serve --dra`` on this node finds them."""
    record: dict[str, dict[str, list[str]]] = {}
    for claim in dra.claims:
        record.setdefault(claim.driver, {})[claim.uid] = list(claim.devices)
    path = os.path.join(root, ALLOCATIONS_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)


async def start_drivers(dra: DraScenario, paths: NodePaths, control_dir: str) -> dict[str, DraDriver]:
    """Record the allocations, then start every scenario driver; each registers itself through ``plugins_registry``."""
    write_allocations(paths.root, dra)
    drivers: dict[str, DraDriver] = {}
    try:
        for spec in dra.drivers:
            driver = DraDriver(
                spec,
                paths.kubelet_dir,
                root=paths.root,
                allocation=allocation_of(dra, spec.driver),
                control_dir=control_dir,
            )
            drivers[spec.driver] = driver  # before it starts: a Ctrl-C during its start must still reach stop()
            await driver.start()
    except BaseException:
        await stop_drivers(drivers)
        raise
    return drivers


async def stop_drivers(drivers: MutableMapping[str, DraDriver]) -> None:
    for driver in drivers.values():
        await driver.stop()
    drivers.clear()


async def wait_drivers(manager: DraManager, dra: DraScenario, timeout: float | None) -> None:
    """Wait until every scenario driver is registered with the kubelet's DRA manager."""
    names = [d.driver for d in dra.drivers]
    await manager.wait_until(lambda: all(n in manager.drivers for n in names), timeout)


async def prepare_claims(
    manager: DraManager, pods: Iterable[PodSpec], failed: MutableMapping[Any, str]
) -> list[PodSpec]:
    """Prepare the claims of each pod; the pods that may run (the others go to ``failed`` with the reason)."""
    runnable = []
    for pod in pods:
        error = await manager.prepare_pod(pod)
        if error is not None:
            failed[(pod.namespace, pod.name)] = error
            log.warning("pod %s/%s cannot start: %s", pod.namespace, pod.name, error)
            continue
        runnable.append(pod)
    return runnable


class PodResourcesWithClaims:
    """The device manager's pod-resources view with each container's prepared DRA claims added."""

    def __init__(self, devices: DeviceManager, dra: DraManager):
        self.devices = devices
        self.dra = dra

    def pods(self) -> tuple[PodResources, ...]:
        return self.devices.pods(self.dra.dynamic_resources_by_user())

    def allocatable(self) -> Any:
        return self.devices.allocatable()
