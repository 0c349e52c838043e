"""The kubelet's CPU and memory managers' state files and its resource-manager configuration."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.model.pods import ContainerMemory

# --- the kubelet's CPU and memory managers ------------------------------------------


@dataclass(frozen=True)
class CpuAssignment:
    pod_uid: str
    container: str
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class CpuManagerState:
    """``<kubelet-dir>/cpu_manager_state`` decoded; ``checksum_ok`` None when the file has none (0)."""

    path: str
    policy: str
    default_cpus: tuple[int, ...]
    assignments: tuple[CpuAssignment, ...] = ()
    checksum: int | None = None
    checksum_ok: bool | None = None
    known_policy: bool = True
    # Which layout and which kubelet's rules the verdict follows (node.kubeletstate), and the kubelets that
    # still read the file where the verdict is a mismatch (None: none does).
    checksum_rule: str | None = None
    accepted_by: str | None = None


@dataclass(frozen=True)
class MemoryAssignment:
    pod_uid: str
    container: str
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True)
class MemoryManagerState:
    """``<kubelet-dir>/memory_manager_state`` decoded; ``checksum_ok`` None when the file has none (0)."""

    path: str
    policy: str
    assignments: tuple[MemoryAssignment, ...] = ()
    checksum: int | None = None
    known_policy: bool = True
    checksum_ok: bool | None = None
    checksum_rule: str | None = None  # as CpuManagerState's
    accepted_by: str | None = None


@dataclass(frozen=True)
class KubeletConfig:
    """The resource-manager policies of ``<kubelet-dir>/config.yaml``; None where it sets none."""

    path: str
    cpu_manager_policy: str | None = None
    memory_manager_policy: str | None = None
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None


@dataclass(frozen=True)
class KubeletState:
    cpu: CpuManagerState | None = None
    memory: MemoryManagerState | None = None
    config: KubeletConfig | None = None
