"""The checks of NUMA alignment and of the shared CPU pool."""

from __future__ import annotations

from devctl.analyze import Holder
from devctl.analyze.checkup import WARNING, Checkup, delete_pods, numa_list

# --- topology ---------------------------------------------------------------------------------------


def numa_alignment(c: Checkup) -> None:
    for a in c.topology.alignment:
        if a.aligned is not False:
            continue
        where = [
            f"{what} on NUMA {numa_list(nodes)}"
            for what, nodes in (("devices", a.device_numa), ("exclusive CPUs", a.cpu_numa), ("memory", a.memory_numa))
            if nodes
        ]
        c.add(
            WARNING,
            "numa-misaligned",
            f"{a.namespace}/{a.pod}/{a.container}",
            "; ".join(where),
            "the Topology Manager let it start across NUMA nodes (policy none or best-effort): set "
            "--topology-manager-policy=single-numa-node (or restricted) if it matters, then recreate the pod "
            f"({delete_pods([Holder(a.namespace, a.pod, a.container)])})",
        )


def shared_pool(c: Checkup) -> None:
    allocatable = c.snapshot.allocatable
    if allocatable is None or not allocatable.cpu_ids or c.topology.shared_pool:
        return
    c.add(
        WARNING,
        "no-shared-cpus",
        "shared-pool",
        f"containers hold all {len(allocatable.cpu_ids)} allocatable CPUs exclusively: every other container "
        "shares only the reserved CPUs",
        "Burstable and BestEffort pods now compete for the reserved CPUs: move a Guaranteed pod away, or "
        "lower its whole-CPU requests",
    )
