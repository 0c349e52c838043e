"""The node state the kubelet's admission reads, as values (built by ``devctl.node``/``core``, or by a test).

Every field is what the kubelet itself holds at the moment it admits a pod: the devices each plugin reported
(health, NUMA nodes), the devices already allocated (device-manager checkpoint), the shared CPU pool
(cpu_manager_state) and the memory left on each NUMA node (memory_manager_state). ``None`` where a source could
not be read: a prediction that needs it says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from devctl.model.machine import KubeletPolicy, MachineTopology


@dataclass(frozen=True)
class DeviceInfo:
    """One device as its plugin's ListAndWatch reported it; ``numa_nodes`` empty: no ``TopologyInfo``."""

    id: str
    healthy: bool = True
    numa_nodes: frozenset[int] = frozenset()


@dataclass(frozen=True)
class HeldDevices:
    """Devices a container holds (the device-manager checkpoint): ``pod_uid``/``container`` and the IDs."""

    namespace: str
    pod: str
    pod_uid: str
    container: str
    resource: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class AdmissionInputs:
    """Everything admission reads besides the pod itself.

    ``devices``: every registered device-plugin resource, with all its devices (healthy or not); a resource
    absent here is not a device-plugin resource for the kubelet. ``held``: every allocation on the node.
    ``preferred``: a plugin's ``GetPreferredAllocation`` answer, as the IDs it ranks first, per resource (absent:
    the plugin offers none). ``free_cpus``: the shared pool less the reserved CPUs (``None``: every CPU but
    ``policy.reserved_cpus``). ``free_memory``: NUMA node -> resource (``memory``, ``hugepages-2Mi``) -> bytes
    still free for Guaranteed pods after ``reservedMemory`` and other pods (``None``: unknown).
    ``allocatable``: the node's allocatable as its status says (``cpu`` in millicores, ``memory``,
    ``hugepages-2Mi``, ``ephemeral-storage`` in bytes; ``None``: unknown, and then the resource-fit check uses
    the machine's CPUs and memory as an upper bound and says so). ``requested``: what the pods already on the
    node request, summed, in the same units (``None``: unknown).
    """

    machine: MachineTopology
    policy: KubeletPolicy = field(default_factory=KubeletPolicy)
    devices: Mapping[str, tuple[DeviceInfo, ...]] = field(default_factory=dict)
    held: tuple[HeldDevices, ...] = ()
    preferred: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    free_cpus: frozenset[int] | None = None
    free_memory: Mapping[int, Mapping[str, int]] | None = None
    allocatable: Mapping[str, int] | None = None
    requested: Mapping[str, int] | None = None

    def allocated(self, resource: str) -> frozenset[str]:
        """Every ID of ``resource`` some container holds."""
        return frozenset(i for h in self.held if h.resource == resource for i in h.ids)

    def holders(self, resource: str, device: str) -> tuple[HeldDevices, ...]:
        return tuple(h for h in self.held if h.resource == resource and device in h.ids)
