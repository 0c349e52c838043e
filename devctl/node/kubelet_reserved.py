"""The node allocatable's memory reservations from the kubelet's config fields (``devctl fit``'s resource fit).

The kubelet's allocatable is its capacity less ``kubeReserved``, ``systemReserved`` and the hard eviction
thresholds (``pkg/kubelet/cm/node_container_manager_linux.go``: ``GetNodeAllocatableReservation``,
``hardEvictionReservation``). This reads the memory parts: ``kubeReserved.memory + systemReserved.memory`` and
``evictionHard``'s ``memory.available`` (a quantity or a percentage of capacity; the config's map or the
``--eviction-hard`` flag's ``memory.available<100Mi,...``). v1.32's defaults: with no
``evictionHard`` at all, ``memory.available: 100Mi``; an ``evictionHard`` without it sets none (0), as the kubelet
defaults the whole map or nothing. A value that cannot be read is a ``SourceError`` naming the field (never its
text) and counts 0 (the allocatable is then an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devctl.base.units import parse_quantity
from devctl.model import ErrorKind, SourceError

SOURCE = "kubelet-config"  # node.kubeletconfig's KUBELET_CONFIG_SOURCE
DEFAULT_EVICTION_MEMORY = 100 * 2**20  # evictionHard memory.available: 100Mi


def _error(message: str) -> SourceError:
    return SourceError(SOURCE, message, ErrorKind.MALFORMED)


def _reserved(fields: Mapping[str, object], field: str, errors: list[SourceError]) -> int:
    value = fields.get(field)
    if not isinstance(value, Mapping):
        return 0  # absent; a map of the wrong shape is named by the policy's own reading
    amount = value.get("memory")
    if amount is None:
        return 0
    if not isinstance(amount, (str, int)) or isinstance(amount, bool):
        errors.append(_error(f"{field}.memory: not a quantity"))
        return 0
    try:
        return parse_quantity(amount)
    except ValueError:
        errors.append(_error(f"{field}.memory: a value that is not a memory quantity"))
        return 0


def _eviction(fields: Mapping[str, object], errors: list[SourceError]) -> tuple[int, float | None]:
    """(bytes, percent): ``evictionHard``'s ``memory.available``; the default when ``evictionHard`` is absent."""
    value = fields.get("evictionHard")
    if value is None:
        return DEFAULT_EVICTION_MEMORY, None
    if isinstance(value, str):  # --eviction-hard=memory.available<100Mi,nodefs.available<10%
        pairs = (p.partition("<") for p in value.split(","))
        value = {k.strip(): v.strip() for k, sep, v in pairs if sep}
    if not isinstance(value, Mapping):
        errors.append(_error("evictionHard is not a map"))
        return DEFAULT_EVICTION_MEMORY, None
    amount = value.get("memory.available")
    if amount is None:
        return 0, None
    if not isinstance(amount, (str, int)) or isinstance(amount, bool):
        errors.append(_error("evictionHard.memory.available: not a quantity"))
        return DEFAULT_EVICTION_MEMORY, None
    text = str(amount).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 <= percent <= 100:
                raise ValueError(text)
            return 0, percent
        return parse_quantity(text), None
    except ValueError:
        errors.append(_error("evictionHard.memory.available: a value that is neither a quantity nor a percentage"))
        return DEFAULT_EVICTION_MEMORY, None


def memory_reservations(fields: Mapping[str, object], errors: list[SourceError]) -> dict[str, Any]:
    """``KubeletPolicy``'s ``reserved_memory_quantity``, ``eviction_memory_bytes``, ``eviction_memory_percent``
    from config fields (file and flags merged); a bad value is appended to ``errors``."""
    reserved = _reserved(fields, "kubeReserved", errors) + _reserved(fields, "systemReserved", errors)
    eviction, percent = _eviction(fields, errors)
    return {
        "reserved_memory_quantity": reserved,
        "eviction_memory_bytes": eviction,
        "eviction_memory_percent": percent,
    }
