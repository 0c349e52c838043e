"""The CPU manager as a hint provider of the admit flow: ``none`` (no hints, no exclusive CPUs) or ``static``.

The flow keeps the shared pool and the CPUs to reuse; a provider only answers for a count of exclusive CPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from devctl.analyze.admission import cpus
from devctl.analyze.admission.masks import MaskSpace
from devctl.model.machine import MachineTopology, TopologyHint


class CpuProvider(Protocol):
    """What admission asks the CPU manager; ``allocate`` raises an exception with ``reason`` and ``message``."""

    def hints(self, count: int, available: frozenset[int], reusable: frozenset[int]) -> list[TopologyHint] | None: ...

    def allocate(
        self, count: int, available: frozenset[int], affinity: frozenset[int] | None, reusable: frozenset[int]
    ) -> tuple[int, ...]: ...

    @property
    def static(self) -> bool: ...


class NoCpuPolicy:
    """``cpuManagerPolicy: none``: no preference, no exclusive CPUs."""

    static = False

    def hints(self, count: int, available: frozenset[int], reusable: frozenset[int]) -> list[TopologyHint] | None:
        return None

    def allocate(
        self, count: int, available: frozenset[int], affinity: frozenset[int] | None, reusable: frozenset[int]
    ) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class StaticCpuPolicy:
    """``cpuManagerPolicy: static`` through ``devctl.analyze.admission.cpus``."""

    machine: MachineTopology
    options: Mapping[str, str] = field(default_factory=dict)
    reserved: frozenset[int] = frozenset()
    static: bool = True
    space: MaskSpace | None = None  # the NUMA masks shared with the other providers (their hint values too)

    def hints(self, count: int, available: frozenset[int], reusable: frozenset[int]) -> list[TopologyHint] | None:
        if count <= 0:
            return None
        return cpus.generate_cpu_hints(self.machine, available, reusable, count, self.options, space=self.space)

    def allocate(
        self, count: int, available: frozenset[int], affinity: frozenset[int] | None, reusable: frozenset[int]
    ) -> tuple[int, ...]:
        return cpus.allocate_cpus(
            self.machine, available, count, affinity, self.options, reusable=reusable, reserved=self.reserved
        )
