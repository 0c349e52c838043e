"""What a device plugin serves: one resource, its devices, its options and its Allocate replies.

The same mapping describes a resource in a scenario file (``devctl sim``) and in
``devctl plugin serve --config FILE``, so both are parsed here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from devctl.base.errors import DevctlError
from devctl.model import HEALTHY, Allocation, Device, DeviceNode, Mount

# The kubelet's rule for an extended resource name
# (pkg/apis/core/helper IsExtendedResourceName + validation of qualified names).
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Bounds checked when a spec is parsed, so that a typo (``--count 10**12``, a NUMA
# ID of 20 digits) is a usage error instead of a process that grows without end
# or a ListAndWatch reply that no int64 field can carry.
MAX_DEVICES = 100_000  # per plugin; the kubelet itself slows to a crawl long before
MAX_NUMA_NODE = 1023  # the kernel's largest MAX_NUMNODES (CONFIG_NODES_SHIFT=10)


class PluginSpecError(DevctlError, ValueError):
    """A plugin or scenario description that cannot be served."""


class DeviceError(DevctlError, ValueError):
    """A device change that cannot be made: unknown ID, or an ID that already exists."""


class UnknownDevice(DeviceError):
    """A device change names an ID the plugin does not have."""


def resource_name_error(name: str) -> str | None:
    """Why the kubelet would refuse ``name`` as an extended resource name, or None if it would not."""
    if "/" not in name:
        return f"{name!r} is not an extended resource name: it needs a domain prefix, e.g. example.com/{name}"
    if name.count("/") > 1:
        return f"{name!r} is invalid: a resource name has exactly one '/'"
    prefix, part = name.split("/")
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io") or name.startswith("requests."):
        return f"{name!r} is invalid: kubernetes.io/ and requests. names are reserved"
    labels = prefix.split(".")
    if not prefix or len(prefix) > 253 or not all(_DNS_LABEL.match(label) and len(label) <= 63 for label in labels):
        return f"{name!r} is invalid: the prefix must be a DNS-1123 subdomain (lower case, digits, '-' and '.')"
    if not part or len(part) > 63 or not _NAME_PART.match(part):
        return (
            f"{name!r} is invalid: the name part must be 1-63 characters of [A-Za-z0-9-_.], alphanumeric at both ends"
        )
    return None


def socket_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a plugin socket's file name in the plugins dir, or None if it can.

    A plain file name only: a path (``/``) or ``..`` would serve, and later
    remove, a socket outside the plugins dir.
    """
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        return f"socket {name!r} must be a plain file name in the plugins dir (no '/', not '.' or '..')"
    return None


def numa_node_error(node: int) -> str | None:
    """Why ``node`` cannot be a NUMA node ID, or None if it can."""
    if not 0 <= node <= MAX_NUMA_NODE:
        return f"NUMA node {node} is out of range 0..{MAX_NUMA_NODE}"
    return None


def check_devices(resource: str, count: int) -> None:
    """PluginSpecError when a plugin would serve more than MAX_DEVICES devices (or a negative count)."""
    if count < 0:
        raise PluginSpecError(f"{resource}: a device count cannot be negative ({count})")
    if count > MAX_DEVICES:
        raise PluginSpecError(f"{resource}: {count} devices is more than the limit of {MAX_DEVICES:,} per plugin")


def default_socket(resource: str) -> str:
    """The socket file name for a resource: ``nvidia.com/gpu`` -> ``devctl-nvidia.com-gpu.sock``."""
    return "devctl-" + resource.replace("/", "-") + ".sock"


@dataclass(frozen=True)
class PluginSpec:
    """One resource served by one plugin.

    ``allocate`` is a template: every ``{ids}`` in its strings becomes the
    comma-joined device IDs of the request, every ``{id}`` the first of them;
    a CDI name with ``{each}`` is one name per device.
    """

    resource: str
    devices: tuple[Device, ...] = ()
    socket: str = ""
    preferred_allocation: bool = True
    pre_start: bool = False
    allocate: Allocation = field(default_factory=Allocation)

    def __post_init__(self) -> None:
        if not self.socket:
            object.__setattr__(self, "socket", default_socket(self.resource))
        if (why := socket_name_error(self.socket)) is not None:
            raise PluginSpecError(why)
        check_devices(self.resource, len(self.devices))

    def render_allocation(self, device_ids: Sequence[str]) -> Allocation:
        """The Allocate reply for these devices, with the template's placeholders filled in."""
        ids = ",".join(device_ids)
        first = device_ids[0] if device_ids else ""

        def sub(s: str) -> str:
            return s.replace("{ids}", ids).replace("{id}", first)

        t = self.allocate
        return Allocation(
            envs={sub(k): sub(v) for k, v in t.envs.items()},
            mounts=tuple(
                replace(m, container_path=sub(m.container_path), host_path=sub(m.host_path)) for m in t.mounts
            ),
            devices=tuple(
                replace(d, container_path=sub(d.container_path), host_path=sub(d.host_path)) for d in t.devices
            ),
            annotations={sub(k): sub(v) for k, v in t.annotations.items()},
            cdi_devices=tuple(
                n
                for c in t.cdi_devices
                for n in ([c.replace("{each}", i) for i in device_ids] if "{each}" in c else [sub(c)])
            ),
        )


def parse_device(text: str) -> Device:
    """``ID``, ``ID@NUMA`` or ``ID@NUMA+NUMA`` (the ``--device`` flag) as a Device."""
    ident, _, numa = text.partition("@")
    if not ident:
        raise PluginSpecError(f"device {text!r} has no ID")
    try:
        nodes = tuple(int(n) for n in numa.split("+")) if numa else ()
    except ValueError:
        raise PluginSpecError(f"device {text!r}: NUMA nodes must be integers, as in GPU-0@0 or GPU-0@0+1") from None
    return Device(id=ident, numa_nodes=_checked(nodes, f"device {text!r}"))


def _checked(nodes: tuple[int, ...], where: str) -> tuple[int, ...]:
    for node in nodes:
        if (why := numa_node_error(node)) is not None:
            raise PluginSpecError(f"{where}: {why}")
    return nodes


def counted_devices(resource: str, count: int, numa: Sequence[int | Sequence[int]] = ()) -> tuple[Device, ...]:
    """``count`` devices named ``<last part of the resource>-0`` …, with NUMA nodes taken in order."""
    check_devices(resource, count)
    base = resource.rsplit("/", 1)[-1]
    out = []
    for i in range(count):
        nodes: tuple[int, ...] = ()
        if i < len(numa):
            n = numa[i]
            nodes = _checked((n,) if isinstance(n, int) else tuple(n), resource)
        out.append(Device(id=f"{base}-{i}", numa_nodes=nodes))
    return tuple(out)


def _numa(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    try:
        nodes = (value,) if isinstance(value, int) else tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise PluginSpecError(f"{where}: numa must be a NUMA node ID or a list of them, not {value!r}") from None
    return _checked(nodes, where)


def _allocation(data: Mapping[str, Any]) -> Allocation:
    try:
        return Allocation(
            envs={str(k): str(v) for k, v in (data.get("envs") or {}).items()},
            mounts=tuple(
                Mount(m["container_path"], m["host_path"], bool(m.get("read_only", False)))
                for m in data.get("mounts") or ()
            ),
            devices=tuple(
                DeviceNode(d["container_path"], d.get("host_path", d["container_path"]), d.get("permissions", "rw"))
                for d in data.get("devices") or ()
            ),
            annotations={str(k): str(v) for k, v in (data.get("annotations") or {}).items()},
            cdi_devices=tuple(str(c) for c in data.get("cdi_devices") or ()),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise PluginSpecError(f"allocate template: missing or malformed field {e}") from None


def spec_from_mapping(data: Mapping[str, Any]) -> PluginSpec:
    """A scenario ``resources:`` entry (or a plugin config file) as a PluginSpec."""
    if not isinstance(data, Mapping) or "name" not in data:
        raise PluginSpecError("a resource needs a 'name'")
    name = str(data["name"])
    if (why := resource_name_error(name)) is not None:
        raise PluginSpecError(why)
    if "devices" in data and data["devices"] is not None:
        if len(data["devices"]) > MAX_DEVICES:  # before building any: the list itself may be huge
            check_devices(name, len(data["devices"]))
        devices = []
        for d in data["devices"]:
            if isinstance(d, str):
                devices.append(parse_device(d))
                continue
            if not isinstance(d, Mapping) or "id" not in d:
                raise PluginSpecError(f"{name}: each device needs an 'id'")
            devices.append(
                Device(
                    id=str(d["id"]),
                    health=str(d.get("health", HEALTHY)),
                    numa_nodes=_numa(d.get("numa"), f"{name}: device {d['id']!r}"),
                )
            )
        devs = tuple(devices)
    else:
        numa = data.get("numa") or ()
        try:
            count = int(data.get("count", 0))
        except (TypeError, ValueError):
            raise PluginSpecError(f"{name}: count must be a whole number, not {data.get('count')!r}") from None
        devs = counted_devices(name, count, [n if isinstance(n, int) else tuple(n) for n in numa])
    ids = [d.id for d in devs]
    if len(set(ids)) != len(ids):
        raise PluginSpecError(f"{name}: device IDs must be unique")
    return PluginSpec(
        resource=name,
        devices=devs,
        socket=str(data.get("socket") or ""),
        preferred_allocation=bool(data.get("preferred_allocation", True)),
        pre_start=bool(data.get("pre_start", False)),
        allocate=_allocation(data.get("allocate") or {}),
    )
