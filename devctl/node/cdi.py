"""CDI spec files read as the container runtime reads them, and their device nodes traced to hardware.

The runtime (containerd, CRI-O through cncf-tags/container-device-interface)
reads ``*.json`` and ``*.yaml`` in each spec dir (not recursively); a later
dir has the higher priority. A spec is strict: a file that does not parse,
names an unknown field, lacks ``cdiVersion``/``kind``/``devices`` or defines
a device twice is rejected whole — here one line in ``CdiSpec.error``, the
other specs still read. A device node's major:minor (from the spec, else the
host path's ``stat`` under the root) leads through ``<sysfs>/dev/char/M:m``
to the PCI function that owns it and that function's ``numa_node``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections.abc import Callable
from typing import Any

from devctl.model import CdiDevice, CdiDeviceNode, CdiEdits, CdiMount, CdiSpec, CdiState, ErrorKind
from devctl.node.files import FileReadError, read_file
from devctl.node.sockets import OutsideRoot, in_root

MAX_SPEC_BYTES = 4 * 1024 * 1024  # a spec larger than this is not a CDI spec
_TOP = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
_DEVICE = {"name", "annotations", "containerEdits"}
_EDITS = {"env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGIDs", "netDevices"}
_ATTR_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # a sysfs attribute: never blocks on a planted FIFO
_PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class SpecError(ValueError):
    """Why a spec file is rejected, one line."""


def _strict(obj: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: not a mapping")
    if not obj.keys() <= allowed:
        raise SpecError(f"{where}: unknown field {min(str(k) for k in obj if k not in allowed)!r}")
    return obj


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: not a list of strings")
    return tuple(value)


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}: not an integer")
    return value


# Makes a spec's device node (path, host path, major, minor): as written, or traced to its PCI function.
_NodeMaker = Callable[[str, str, "int | None", "int | None"], CdiDeviceNode]


def _as_written(path: str, host: str, major: int | None, minor: int | None) -> CdiDeviceNode:
    return CdiDeviceNode(path=path, host_path=host, major=major, minor=minor)


def _edits(obj: Any, where: str, node: _NodeMaker) -> CdiEdits:
    if obj is None:
        return CdiEdits()
    obj = _strict(obj, _EDITS, where)
    nodes = []
    for i, n in enumerate(obj.get("deviceNodes") or ()):
        if not isinstance(n, dict) or not isinstance(n.get("path"), str) or not n["path"]:
            raise SpecError(f"{where}.deviceNodes[{i}]: no path")
        host = n.get("hostPath") or n["path"]
        if not isinstance(host, str):
            raise SpecError(f"{where}.deviceNodes[{i}].hostPath: not a string")
        major = _int(n.get("major"), f"{where}.deviceNodes[{i}].major")
        minor = _int(n.get("minor"), f"{where}.deviceNodes[{i}].minor")
        nodes.append((n["path"], host, major, minor))
    mounts = []
    for i, m in enumerate(obj.get("mounts") or ()):
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("hostPath"), str)
            or not isinstance(m.get("containerPath"), str)
        ):
            raise SpecError(f"{where}.mounts[{i}]: needs hostPath and containerPath")
        mounts.append(CdiMount(host_path=m["hostPath"], container_path=m["containerPath"]))
    nets = []
    for i, d in enumerate(obj.get("netDevices") or ()):
        if not isinstance(d, dict) or not isinstance(d.get("hostInterfaceName"), str):
            raise SpecError(f"{where}.netDevices[{i}]: no hostInterfaceName")
        nets.append(d["hostInterfaceName"])
    return CdiEdits(
        env=_strings(obj.get("env"), f"{where}.env"),
        device_nodes=tuple(node(*n) for n in nodes),  # traced once the spec is known to be valid this far
        mounts=tuple(mounts),
        net_devices=tuple(nets),
    )


def _yaml(text: str) -> Any:
    """A YAML spec parsed; PyYAML (under our fast loader) is imported only for one: it costs every read ~20 ms."""
    import yaml

    from devctl.node import yamlsubset

    try:
        return yamlsubset.load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"not YAML: {getattr(e, 'problem', None) or 'syntax error'}{at}") from None


def parse_spec(text: str, path: str, priority: int, node: _NodeMaker = _as_written) -> CdiSpec:
    """One spec's text (YAML, of which JSON is a part); raises SpecError. ``node`` makes each device node."""
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"not JSON: {e.msg} at line {e.lineno}") from None
    else:
        data = _yaml(text)
    data = _strict(data, _TOP, "spec")
    version, kind = data.get("cdiVersion"), data.get("kind")
    if not isinstance(version, str) or not version:
        raise SpecError("no cdiVersion")
    if not isinstance(kind, str) or "/" not in kind:
        raise SpecError("kind is not vendor/class")
    raw_devices = data.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise SpecError("no devices")
    devices, seen = [], set()
    for i, d in enumerate(raw_devices):
        d = _strict(d, _DEVICE, f"devices[{i}]")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise SpecError(f"devices[{i}]: no name")
        if name in seen:
            raise SpecError(f"device {name!r} defined twice")
        seen.add(name)
        devices.append(
            CdiDevice(name=name, edits=_edits(d.get("containerEdits"), f"devices[{i}].containerEdits", node))
        )
    return CdiSpec(
        path=path,
        priority=priority,
        kind=kind,
        cdi_version=version,
        edits=_edits(data.get("containerEdits"), "containerEdits", node),
        devices=tuple(devices),
    )


def _read(path: str) -> str:
    """The spec's text through the one safe reader (regular files only, never blocking, capped)."""
    raw = read_file(path, MAX_SPEC_BYTES)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("not UTF-8 text") from None


@functools.lru_cache(maxsize=8)
def _char_dir(sysfs: str) -> str:
    """``<sysfs>/dev/char`` with its symlinks resolved: where its relative links start from."""
    return os.path.realpath(os.path.join(sysfs, "dev", "char"))


def _pci_of(sysfs: str, major: int, minor: int) -> tuple[str | None, int | None]:
    """The PCI function (and its NUMA node) owning char device major:minor, from sysfs's dev/char link."""
    name = f"{major}:{minor}"
    try:
        # One readlink instead of realpath's lstat of every component: sysfs's dev/char entries are
        # links to device directories, the only links on that path (1,000 claims' device nodes).
        target = os.path.normpath(os.path.join(_char_dir(sysfs), os.readlink(os.path.join(sysfs, "dev", "char", name))))
    except OSError:  # not a link (or no such entry): what realpath makes of it
        try:
            target = os.path.realpath(os.path.join(sysfs, "dev", "char", name))
        except OSError:
            return None, None
    parts = target.split(os.sep)
    for i in range(len(parts) - 1, -1, -1):
        if _PCI.match(parts[i]):
            return parts[i], _numa_node(os.sep.join(parts[: i + 1]))
    return None, None


def _numa_node(device_dir: str) -> int | None:
    """The function's ``numa_node`` (-1 is none); a bare descriptor read, ~4x cheaper than ``open()``'s text file."""
    try:
        fd = os.open(os.path.join(device_dir, "numa_node"), _ATTR_FLAGS)
    except OSError:
        return None
    try:
        numa = int(os.read(fd, 64).strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return numa if numa >= 0 else None


def _tracer(root: str, sysfs: str) -> _NodeMaker:
    """Device nodes traced through sysfs: major:minor (the spec's, else the host path's ``stat``) to PCI and NUMA."""

    def traced(path: str, host: str, major: int | None, minor: int | None) -> CdiDeviceNode:
        if major is None or minor is None:
            try:
                st = os.stat(in_root(root, host))
            except (OSError, OutsideRoot):
                return CdiDeviceNode(path, host, major, minor)
            if not stat.S_ISCHR(st.st_mode):
                return CdiDeviceNode(path, host, major, minor)
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        pci, numa = _pci_of(sysfs, major, minor)
        return CdiDeviceNode(path, host, major, minor, pci, numa)

    return traced


def read_spec(path: str, priority: int, node: _NodeMaker) -> CdiSpec:
    """One spec file, its device nodes made by ``node`` (traced); a failure is the spec's one-line ``error``."""
    try:
        return parse_spec(_read(path), path, priority, node)
    except SpecError as e:
        return CdiSpec(path=path, priority=priority, error=f"{path}: {e}", error_kind=ErrorKind.MALFORMED)
    except FileReadError as e:
        return CdiSpec(path=path, priority=priority, error=str(e), error_kind=e.kind)


def read_cdi(dirs: tuple[str, ...], root: str, sysfs: str) -> tuple[CdiState, list[tuple[str, ErrorKind]]]:
    """Every spec in ``dirs`` (a missing dir is no spec, as for the runtime) and the dirs that could not be listed."""
    specs: list[CdiSpec] = []
    errors: list[tuple[str, ErrorKind]] = []
    traced = _tracer(root, sysfs)
    for priority, directory in enumerate(dirs):
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            continue
        except OSError as e:
            errors.append((f"{directory}: {e.strerror or e}", ErrorKind.of_oserror(e)))
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith((".json", ".yaml")) or not os.path.isfile(path):
                continue
            specs.append(read_spec(path, priority, traced))
    return CdiState(dirs=dirs, specs=tuple(specs)), errors
