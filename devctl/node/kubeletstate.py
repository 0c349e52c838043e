"""The kubelet's CPU and memory manager state files, and the policies of its config file.

``<kubelet-dir>/cpu_manager_state`` (pkg/kubelet/cm/cpumanager/state/checkpoint.go):
``{"policyName", "defaultCpuSet", "entries": {podUID: {container: cpuset}}, "checksum"}``.
Its checksum is FNV-1a 32 of go-spew's ``%#v`` of the checkpoint struct with the
checksum zeroed, under the type name ``state.CPUManagerCheckpoint`` (the v2
struct is renamed so that old checksums still verify); 0 means "none".

``<kubelet-dir>/memory_manager_state`` (pkg/kubelet/cm/memorymanager/state):
``{"policyName", "machineState": {NUMA node: {"numberOfAssignments", "memoryMap":
{type: {"total", "systemReserved", "allocatable", "reserved", "free"}}, "cells"}},
"entries": {podUID: {container: [{"numaAffinity", "type", "size"}]}}, "checksum"}``.
Its checksum is the same FNV-1a 32 of go-spew's ``%#v``, here of
``state.MemoryManagerCheckpoint`` as Go decodes the file into it: a JSON null
is Go's nil (``<nil>``), an absent map the empty one the kubelet starts from,
pointers to structs ``<*>{…}``. Kubelets with the alpha pod-level resource
managers add ``podEntries``; both renderings are tried, as those kubelets do.
A mismatch is one typed error (the kubelet refuses to start on the file); the
rest of the file is still shown.

Layouts are tried in the kubelet's order, and each verdict says whose rules it
follows (``checksum_rule``), and which kubelets still read a file it refuses
(``accepted_by``), so that nothing advises removing a file a kubelet accepts:

- CPU v1 (``entries`` by container ID, no pods): the kubelet tries it first,
  with its own type name in the rendering; a none-policy file with no entries is
  often in this layout. Kubelet ≤1.32 migrates container-ID entries while those
  containers run; newer kubelets refuse them.
- CPU v2 (``entries`` by pod and container): kubelet ≤1.32 renders
  ``state.CPUManagerCheckpoint``; newer kubelets render ``state.CPUManagerCheckpointV3``
  with an empty ``PodEntries:(state.PodCPUAssignments)`` and accept either.
- CPU v3 (``podEntries``, newer kubelets): devctl does not compute that checksum
  and says so (unknown, never a mismatch); kubelet ≤1.32 refuses it.
- CPU v4 and memory v3 (``data``, a JSON document in a string, with
  ``dataChecksum`` — or ``checksum`` when the outer fields are gone): newer
  kubelets read only ``data``, whose checksum is FNV-1a 32 of go-spew's
  ``(string)…`` of it; kubelet ≤1.32 reads the outer fields as before.
- memory: checksum 0 is accepted by newer kubelets, refused by kubelet ≤1.32.

``<kubelet-dir>/config.yaml``: ``cpuManagerPolicy``, ``memoryManagerPolicy``,
``topologyManagerPolicy`` and ``topologyManagerScope`` (KubeletConfiguration).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from devctl.base.units import parse_cpulist
from devctl.model import (
    KUBELET_STATE,
    ContainerMemory,
    CpuAssignment,
    CpuManagerState,
    ErrorKind,
    KubeletConfig,
    KubeletState,
    MemoryAssignment,
    MemoryManagerState,
    SourceError,
)
from devctl.node.files import FileReadError, excerpt, read_file

# The checksums and the error of a state file, re-exported: callers import them from here.
from devctl.node.kubeletstate_checksum import StateError as StateError
from devctl.node.kubeletstate_checksum import cpu_checksum as cpu_checksum
from devctl.node.kubeletstate_checksum import cpu_checksum_v1 as cpu_checksum_v1
from devctl.node.kubeletstate_checksum import data_checksum as data_checksum
from devctl.node.kubeletstate_checksum import memory_checksums as memory_checksums

# Larger than any real state file by far; a bigger one is not the kubelet's.
MAX_BYTES = 64 * 1024 * 1024
CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static")


def _read(path: str) -> bytes:
    """The file's bytes through the one safe reader (regular files only, never blocking, capped)."""
    try:
        return read_file(path, MAX_BYTES)
    except FileReadError as e:
        raise StateError(str(e), e.kind) from None


def _read_json(path: str) -> Any:
    raw = _read(path)
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except ValueError as e:
        raise StateError(f"{path}: not JSON: {e}".splitlines()[0], ErrorKind.MALFORMED) from None
    except RecursionError:
        raise StateError(f"{path}: not JSON: nested too deeply", ErrorKind.MALFORMED) from None


def _mapping(value: Any, path: str, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise StateError(f"{path}: {what} is not an object", ErrorKind.MALFORMED)
    return value


def _cpus(text: Any, path: str, where: str) -> tuple[int, ...]:
    if not isinstance(text, str):
        raise StateError(f"{path}: {where} is not a CPU list", ErrorKind.MALFORMED)
    try:
        return tuple(parse_cpulist(text))
    except ValueError:
        raise StateError(f"{path}: {where}: {excerpt(text)} is not a CPU list", ErrorKind.MALFORMED) from None


V1_32 = "kubelet ≤1.32"
NEWER = "kubelets >1.32"


def _checksum_field(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _data(doc: Mapping[str, Any], path: str) -> tuple[Mapping[str, Any], int | None, int] | None:
    """A newer kubelet's ``data`` layout: the inner document, the stored and the computed checksum; None
    when the file has no ``data``."""
    text = doc.get("data")
    if text is None:
        return None
    if not isinstance(text, str):
        raise StateError(f"{path}: data is not a string", ErrorKind.MALFORMED)
    try:
        inner = json.loads(text)
    except ValueError:
        raise StateError(f"{path}: data is not JSON", ErrorKind.MALFORMED) from None
    except RecursionError:
        raise StateError(f"{path}: data is nested too deeply", ErrorKind.MALFORMED) from None
    stored = _checksum_field(doc["dataChecksum"] if "dataChecksum" in doc else doc.get("checksum"))
    return _mapping(inner, path, "data"), stored, data_checksum(text)


def _cpu_fields(
    doc: Mapping[str, Any], path: str
) -> tuple[str, str, dict[str, dict[str, str]] | None, dict[str, str] | None, bool]:
    """policyName, defaultCpuSet, the entries by pod (None: a JSON null), the v1 entries by container ID (None:
    not that layout), and whether it has podEntries."""
    policy = doc.get("policyName")
    if not isinstance(policy, str):
        raise StateError(f"{path}: no policyName", ErrorKind.MALFORMED)
    default_text = doc.get("defaultCpuSet", doc.get("defaultCPUSet", ""))
    if default_text is None:
        default_text = ""
    if not isinstance(default_text, str):
        raise StateError(f"{path}: defaultCpuSet is not a CPU list", ErrorKind.MALFORMED)
    raw = doc.get("entries", {})
    flat: dict[str, str] | None = None
    entries: dict[str, dict[str, str]] | None = None if raw is None else {}
    values = list(_mapping(raw, path, "entries").values())
    if values and all(isinstance(v, str) for v in values):
        flat = {str(k): str(v) for k, v in _mapping(raw, path, "entries").items()}
        entries = {}
    else:
        for uid, containers in _mapping(raw, path, "entries").items():
            for name, cpus in _mapping(containers, path, f"entries.{uid}").items():
                if not isinstance(cpus, str):
                    raise StateError(f"{path}: entries.{uid}.{name} is not a CPU list", ErrorKind.MALFORMED)
                assert entries is not None
                entries.setdefault(uid, {})[name] = cpus
    pod_entries = bool(_mapping(doc.get("podEntries"), path, "podEntries"))
    return policy, default_text, entries, flat, pod_entries


def _cpu_verdict(doc: Mapping[str, Any], path: str, checksum: int | None) -> tuple[bool | None, str, str | None, bool]:
    """The verdict on the file's own fields (no ``data``), with its rule, the kubelets that read it anyway, and
    whether kubelet ≤1.32 accepts it."""
    policy, default_text, entries, flat, pod_entries = _cpu_fields(doc, path)
    # Go decodes the v1 layout only when no entry is a pod's (none at all, or all by container ID).
    v1_entries: dict[str, str] | None = flat if flat is not None else None if entries is None else {}
    v1_ok = (flat is not None or not entries) and (
        not checksum or cpu_checksum_v1(policy, default_text, v1_entries) == checksum
    )
    if flat is not None:
        if v1_ok:
            return (
                False,
                f"v1 layout, entries by container ID: {NEWER} refuse it",
                f"{V1_32}, while every container ID in it runs (it migrates them)",
                False,
            )
        return False, "v1 layout, entries by container ID", None, False
    if not checksum:
        return None, "checksum 0: no kubelet verifies it", None, True
    if v1_ok:
        return True, "v1 layout, as every kubelet reads it (tried first)", None, True
    if not pod_entries and cpu_checksum(policy, default_text, entries) == checksum:
        return True, f"v2 layout, as {V1_32} reads it", None, True
    if not pod_entries and cpu_checksum(policy, default_text, entries, newer=True) == checksum:
        return True, f"v2 layout, as {NEWER} read it (≤1.32 refuses it)", None, False
    if pod_entries:
        rule = f"v3 layout (podEntries, {NEWER}): checksum not verified"
        return None, rule, None, False
    return False, f"v1 and v2 layouts, as {V1_32} and newer read them", None, False


def _outer_cpu_accepted(doc: Mapping[str, Any], path: str) -> bool:
    """Whether kubelet ≤1.32, which knows no ``data``, accepts the fields beside it."""
    try:
        return _cpu_verdict(doc, path, _checksum_field(doc.get("checksum")))[3]
    except StateError:
        return False


def read_cpu_state(path: str) -> CpuManagerState:
    doc = _mapping(_read_json(path), path, "the file")
    data = _data(doc, path)
    accepted_by = None
    if data is not None:
        content, checksum, computed = data
        ok: bool | None = checksum == computed
        rule = f"v4 layout (data + dataChecksum), as {NEWER} read it"
        if not ok and _outer_cpu_accepted(doc, path):
            accepted_by = f"{V1_32} (it reads the fields beside data)"
    else:
        content, checksum = doc, _checksum_field(doc.get("checksum"))
        ok, rule, accepted_by, _ = _cpu_verdict(doc, path, checksum)
    policy, default_text, entries, flat, _ = _cpu_fields(content, path)
    assignments = []
    for uid, containers in sorted((entries or {}).items()):
        for name, cpus in sorted(containers.items()):
            assignments.append(CpuAssignment(uid, name, _cpus(cpus, path, f"entries.{uid}.{name}")))
    for container_id, cpus in sorted((flat or {}).items()):  # v1: no pod known, the container's ID
        assignments.append(CpuAssignment("", container_id, _cpus(cpus, path, f"entries.{container_id}")))
    return CpuManagerState(
        path=path,
        policy=policy,
        default_cpus=_cpus(default_text, path, "defaultCpuSet"),
        assignments=tuple(assignments),
        checksum=checksum,
        checksum_ok=ok,
        known_policy=policy in CPU_POLICIES,
        checksum_rule=rule,
        accepted_by=accepted_by,
    )


def _memory_verdict(doc: Mapping[str, Any], path: str, checksum: int | None) -> tuple[bool | None, str]:
    if not checksum:
        return None, f"checksum 0: {NEWER} accept it, ≤1.32 refuses it"
    without, with_pods = memory_checksums(doc, path)
    if checksum == without:
        return True, f"v1 layout, as {V1_32} and newer read it"
    if checksum == with_pods:
        return True, f"v2 (podEntries), as {NEWER} read it; ≤1.32 refuses it"
    return False, f"v1 and v2 layouts, as {V1_32} and newer read them"


def read_memory_state(path: str) -> MemoryManagerState:
    doc = _mapping(_read_json(path), path, "the file")
    data = _data(doc, path)
    accepted_by = None
    if data is not None:
        content, checksum, computed = data
        ok: bool | None = checksum == computed
        rule = f"v3 layout (data + dataChecksum), as {NEWER} read it"
        outer = _checksum_field(doc.get("checksum"))
        if not ok and outer and isinstance(doc.get("policyName"), str):
            try:
                if outer == memory_checksums(doc, path)[0]:
                    accepted_by = f"{V1_32} (it reads the fields beside data)"
            except StateError:
                pass  # fields beside data that Go would not decode: no kubelet reads them
    else:
        content, checksum = doc, _checksum_field(doc.get("checksum"))
        ok, rule = _memory_verdict(doc, path, checksum)
    policy = content.get("policyName")
    if not isinstance(policy, str):
        raise StateError(f"{path}: no policyName", ErrorKind.MALFORMED)
    if data is not None:
        memory_checksums(content, path)  # what Go would not decode is malformed here too
    assignments = []
    for uid, containers in sorted(_mapping(content.get("entries"), path, "entries").items()):
        for name, blocks in sorted(_mapping(containers, path, f"entries.{uid}").items()):
            memory = []
            for b in blocks if isinstance(blocks, list) else ():
                if isinstance(b, Mapping):
                    numa = tuple(int(n) for n in b.get("numaAffinity") or () if isinstance(n, int))
                    memory.append(ContainerMemory(str(b.get("type", "")), int(b.get("size") or 0), numa))
            assignments.append(MemoryAssignment(uid, name, tuple(memory)))
    return MemoryManagerState(
        path=path,
        policy=policy,
        assignments=tuple(assignments),
        checksum=checksum,
        checksum_ok=ok,
        known_policy=policy in MEMORY_POLICIES,
        checksum_rule=rule,
        accepted_by=accepted_by,
    )


def read_kubelet_config(path: str) -> KubeletConfig:
    import yaml

    raw = _read(path)
    try:
        data = yaml.safe_load(raw)
    except (yaml.YAMLError, RecursionError):
        raise StateError(f"{path}: not YAML", ErrorKind.MALFORMED) from None
    data = _mapping(data, path, "the file")

    def text(key: str) -> str | None:
        value = data.get(key)
        return str(value) if value is not None else None

    return KubeletConfig(
        path=path,
        cpu_manager_policy=text("cpuManagerPolicy"),
        memory_manager_policy=text("memoryManagerPolicy"),
        topology_manager_policy=text("topologyManagerPolicy"),
        topology_manager_scope=text("topologyManagerScope"),
    )


def read_kubelet_state(kubelet_dir: str) -> tuple[KubeletState | None, list[SourceError]]:
    """Each of the three files that exists; a missing one is no error (a node with the default policies has none).

    None when not one of them could be read: nothing was learnt from this source.
    """
    errors: list[SourceError] = []
    parts: dict[str, Any] = {}
    readers = {
        "cpu": (read_cpu_state, "cpu_manager_state"),
        "memory": (read_memory_state, "memory_manager_state"),
        "config": (read_kubelet_config, "config.yaml"),
    }
    for key, (reader, name) in readers.items():
        try:
            parts[key] = part = reader(os.path.join(kubelet_dir, name))
        except StateError as e:
            if e.kind != ErrorKind.MISSING:
                errors.append(SourceError(KUBELET_STATE, str(e), e.kind))
            continue
        if isinstance(part, (CpuManagerState, MemoryManagerState)) and part.checksum_ok is False:
            # Decoded and shown all the same: what the file says is still what the kubelet last enforced.
            if part.accepted_by:
                message = f"{part.path}: refused ({part.checksum_rule}); {part.accepted_by} still reads it"
            else:
                message = (
                    f"{part.path}: checksum {part.checksum} does not match the content ({part.checksum_rule}; "
                    "edited or torn): the kubelet refuses to start on this file"
                )
            errors.append(SourceError(KUBELET_STATE, message, ErrorKind.MALFORMED))
    if not parts:
        return None, errors
    return KubeletState(cpu=parts.get("cpu"), memory=parts.get("memory"), config=parts.get("config")), errors
