"""The checksums of the kubelet's CPU and memory manager state files, as the kubelet computes them.

FNV-1a 32 of go-spew's ``%#v`` of the checkpoint struct with its checksum zeroed (see ``devctl.node.kubeletstate``'s
docstring for each layout and which kubelet follows which rule). The memory manager's struct is rendered from the
JSON document as Go's encoding/json would decode it into that struct; where Go would not decode it, ``StateError``
(MALFORMED) says where. Pure functions: ``kubeletstate`` reads the files and gives the verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from devctl.base.errors import DevctlError
from devctl.model import ErrorKind
from devctl.node.checkpoint import fnv1a32


class StateError(DevctlError):
    """A state file that cannot be read or decoded; the message is one line, the kind says why."""

    def __init__(self, message: str, kind: ErrorKind):
        super().__init__(message)
        self.kind = kind


def _nested(entries: Mapping[str, Mapping[str, str]] | None) -> str:
    if entries is None:
        return "<nil>"
    inner = " ".join(
        f"{uid}:map[" + " ".join(f"{c}:{cpus}" for c, cpus in sorted(containers.items())) + "]"
        for uid, containers in sorted(entries.items())
    )
    return f"map[{inner}]"


def cpu_checksum(
    policy: str, default_set: str, entries: Mapping[str, Mapping[str, str]] | None, *, newer: bool = False
) -> int:
    """The checksum a kubelet writes into a v2 cpu_manager_state: kubelet ≤1.32's, or with ``newer`` the one
    kubelets newer than 1.32 compute (their V3 struct, PodEntries empty); None entries are a JSON null."""
    if newer:
        rendered = (
            f"(*state.CPUManagerCheckpointV3){{PolicyName:(string){policy} DefaultCPUSet:(string){default_set} "
            f"Entries:(map[string]map[string]string){_nested(entries)} PodEntries:(state.PodCPUAssignments)map[] "
            "Checksum:(checksum.Checksum)0}"
        )
    else:
        rendered = (
            f"(*state.CPUManagerCheckpoint){{PolicyName:(string){policy} DefaultCPUSet:(string){default_set} "
            f"Entries:(map[string]map[string]string){_nested(entries)} Checksum:(checksum.Checksum)0}}"
        )
    return fnv1a32(rendered.encode())


def cpu_checksum_v1(policy: str, default_set: str, entries: Mapping[str, str] | None) -> int:
    """The checksum of a v1 cpu_manager_state (entries by container ID), as every kubelet verifies it: its
    ``CPUManagerCheckpointV1`` rendered under the name ``CPUManagerCheckpoint``."""
    inner = "<nil>" if entries is None else "map[" + " ".join(f"{k}:{v}" for k, v in sorted(entries.items())) + "]"
    rendered = (
        f"(*state.CPUManagerCheckpoint){{PolicyName:(string){policy} DefaultCPUSet:(string){default_set} "
        f"Entries:(map[string]string){inner} Checksum:(checksum.Checksum)0}}"
    )
    return fnv1a32(rendered.encode())


def data_checksum(data: str) -> int:
    """The checksum newer kubelets write beside ``data`` (CPU v4, memory v3): checksum.New of the string."""
    return fnv1a32(("(string)" + data).encode())


def _go_int(value: Any, path: str, where: str, *, unsigned: bool = False) -> int:
    """A JSON number as Go's encoding/json decodes it into an int or uint64 (nothing else decodes)."""
    if value is None:
        return 0  # null leaves a Go number at zero
    if isinstance(value, bool) or not isinstance(value, int) or (unsigned and value < 0):
        raise StateError(f"{path}: {where} is not {'an unsigned ' if unsigned else 'an '}integer", ErrorKind.MALFORMED)
    return value


def _go_ints(value: Any, path: str, where: str) -> str:
    if value is None:
        return "<nil>"
    if not isinstance(value, list):
        raise StateError(f"{path}: {where} is not a list", ErrorKind.MALFORMED)
    return "[" + " ".join(str(_go_int(v, path, where)) for v in value) + "]"


def _go_map(value: Any, path: str, where: str, item: Callable[[Any, str], str], *, int_keys: bool = False) -> str:
    """A Go map as go-spew prints it with SortKeys: ``map[k:v k:v]`` in key order, ``<nil>`` for null."""
    if value is None:
        return "<nil>"
    if not isinstance(value, Mapping):
        raise StateError(f"{path}: {where} is not an object", ErrorKind.MALFORMED)
    if int_keys:
        try:
            keys = sorted(value, key=int)
        except ValueError:
            raise StateError(f"{path}: {where} has a key that is not a number", ErrorKind.MALFORMED) from None
    else:
        keys = sorted(value)
    return "map[" + " ".join(f"{int(k) if int_keys else k}:{item(value[k], f'{where}.{k}')}" for k in keys) + "]"


def _go_ptr(value: Any, path: str, where: str, fields: Callable[[Mapping[str, Any], str], str]) -> str:
    """A pointer to a struct inside a map: ``<*>{…}``, or ``<nil>``."""
    if value is None:
        return "<nil>"
    if not isinstance(value, Mapping):
        raise StateError(f"{path}: {where} is not an object", ErrorKind.MALFORMED)
    return "<*>{" + fields(value, where) + "}"


def _memory_render(data: Mapping[str, Any], path: str, pod_entries: bool) -> str:
    def table(t: Mapping[str, Any], where: str) -> str:
        names = (
            ("TotalMemSize", "total"),
            ("SystemReserved", "systemReserved"),
            ("Allocatable", "allocatable"),
            ("Reserved", "reserved"),
            ("Free", "free"),
        )
        return " ".join(f"{go}:(uint64){_go_int(t.get(js), path, f'{where}.{js}', unsigned=True)}" for go, js in names)

    def node(n: Mapping[str, Any], where: str) -> str:
        tables = _go_map(n.get("memoryMap"), path, f"{where}.memoryMap", lambda v, w: _go_ptr(v, path, w, table))
        return (
            f"NumberOfAssignments:(int){_go_int(n.get('numberOfAssignments'), path, f'{where}.numberOfAssignments')} "
            f"MemoryMap:(map[v1.ResourceName]*state.MemoryTable){tables} "
            f"Cells:([]int){_go_ints(n.get('cells'), path, f'{where}.cells')}"
        )

    def blocks(value: Any, where: str) -> str:
        if value is None:
            return "<nil>"
        if not isinstance(value, list) or not all(isinstance(b, Mapping) for b in value):
            raise StateError(f"{path}: {where} is not a list of memory blocks", ErrorKind.MALFORMED)
        out = []
        for b in value:
            kind = b.get("type") or ""
            if not isinstance(kind, str):
                raise StateError(f"{path}: {where}.type is not a string", ErrorKind.MALFORMED)
            size = _go_int(b.get("size"), path, f"{where}.size", unsigned=True)
            out.append(
                f"{{NUMAAffinity:([]int){_go_ints(b.get('numaAffinity'), path, f'{where}.numaAffinity')} "
                f"Type:(v1.ResourceName){kind} Size:(uint64){size}}}"
            )
        return "[" + " ".join(out) + "]"

    def containers(value: Any, where: str) -> str:
        return _go_map(value, path, where, blocks)

    # Absent maps stay the empty ones the kubelet unmarshals into; null makes them nil.
    machine = _go_map(
        data.get("machineState", {}), path, "machineState", lambda v, w: _go_ptr(v, path, w, node), int_keys=True
    )
    entries = _go_map(data.get("entries", {}), path, "entries", containers)
    pods = ""
    if pod_entries:

        def pod(value: Any, where: str) -> str:
            if not isinstance(value, Mapping):
                raise StateError(f"{path}: {where} is not an object", ErrorKind.MALFORMED)
            return f"{{MemoryBlocks:([]state.Block){blocks(value.get('memoryBlocks'), f'{where}.memoryBlocks')}}}"

        pods = f" PodEntries:(state.PodMemoryAssignments){_go_map(data.get('podEntries', {}), path, 'podEntries', pod)}"
    return (
        f"(*state.MemoryManagerCheckpoint){{PolicyName:(string){data.get('policyName')} "
        f"MachineState:(state.NUMANodeMap){machine} Entries:(state.ContainerMemoryAssignments){entries}{pods} "
        "Checksum:(checksum.Checksum)0}"
    )


def memory_checksums(data: Mapping[str, Any], path: str = "memory_manager_state") -> tuple[int, int]:
    """The checksums the kubelet accepts for a memory_manager_state document: of the checkpoint struct without
    and with the alpha ``podEntries`` (see the module's docstring); raises StateError where Go would not decode."""
    return fnv1a32(_memory_render(data, path, False).encode()), fnv1a32(_memory_render(data, path, True).encode())
