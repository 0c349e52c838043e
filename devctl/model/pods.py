"""What pod-resources says each container holds, and the pod identities the kubelet keeps on disk."""

from __future__ import annotations

from dataclasses import dataclass

# --- pod-resources side (v1) ------------------------------------------------------


@dataclass(frozen=True)
class ContainerDevices:
    """One ContainerDevices entry; the kubelet sends one per device per NUMA node."""

    resource: str
    ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ContainerMemory:
    type: str
    size: int
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ClaimDevice:
    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()  # each name once, of this device only (node.convert undoes v1.32's repeats)
    share_id: str | None = None  # ClaimResource.share_id (1.35+): None when the kubelet sent none
    # Filled by the views (analyze.claims.with_claim_health), never by pod-resources: the driver's
    # health stream, and NUMA nodes through the CDI device nodes; None/() when unknown.
    health: str | None = None
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class DynamicResource:
    claim_name: str
    claim_namespace: str
    devices: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True)
class PodResources:
    namespace: str
    name: str
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True)
class AllocatableResources:
    """GetAllocatableResources: healthy devices only, allocatable CPUs and memory."""

    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True)
class PodIdentity:
    uid: str
    namespace: str
    name: str
