"""The IDs a container runtime gives a pod's sandbox and containers, stable for a pod UID: shared by the simulated
runtime (lab/sim/cri) and the processes that stand for the containers (lab/sim/workload)."""

from __future__ import annotations

import hashlib


def sandbox_id(pod_uid: str) -> str:
    """A pod sandbox's ID as a runtime makes one (64 hex digits), stable for a pod UID."""
    return hashlib.sha256(f"sandbox/{pod_uid}".encode()).hexdigest()


def container_id(pod_uid: str, container: str) -> str:
    """A container's ID (64 hex digits), stable for a pod UID and container name."""
    return hashlib.sha256(f"container/{pod_uid}/{container}".encode()).hexdigest()
