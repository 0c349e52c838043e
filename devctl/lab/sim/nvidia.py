"""NVIDIA's GPUs on the simulated node as the driver and the container toolkit lay them out (issue 33).

On a real node the NVIDIA driver numbers its GPUs ``/dev/nvidia<N>`` (character major 195, minor N;
``/dev/nvidiactl`` is 195:255), ``/sys/dev/char/195:<N>`` links to the GPU's PCI function, and
NVIDIA's device plugin with a CDI device-list strategy writes a CDI spec of kind
``k8s.device-plugin.nvidia.com/gpu`` naming each GPU it serves by its UUID and its index, with its device
node. With time-slicing it advertises replicas ``GPU-<uuid>::<n>`` of one GPU and hands out the GPU's CDI
name, ``k8s.device-plugin.nvidia.com/gpu=GPU-<uuid>``.

The simulator does the same from the scenario alone:

- the GPUs are the scenario's NVIDIA display/3D functions (vendor 0x10de, class 0x03xxxx), in address
  order; each ``nvidia.com/*`` resource, in the scenario's order, takes one per distinct base ID of its
  devices (``GPU-<uuid>::0..3`` are one GPU), so the GPU's index is its place in that order;
- every GPU so taken gets its ``<sysfs>/dev/char/195:<N>`` link;
- the CDI spec ``<root>/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.yaml`` names every GPU so taken (whole
  and time-sliced) by its ID and index, with its device node ``/dev/nvidia<N>`` (195:N). The default node's
  plugin hands out ``k8s.device-plugin.nvidia.com/gpu=<id>`` for each GPU (``{each}``), so devctl traces
  GPU-0..7 to their A100s through ``<sysfs>/dev/char/195:N``; the other kind it hands out,
  ``nvidia.com/gpu=GPU-<n>`` (nvidia-ctk's), keeps no spec: its story is that it vanished (ml/train-0).

Resources whose devices all took a GPU get no simulated functions of their own (``drasysfs.char_devices``
passes them over).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from devctl.lab.plugin.cdi import CDI_VERSION, DYNAMIC_DIR
from devctl.lab.plugin.spec import PluginSpec
from devctl.model import PciDevice

MAJOR = 195  # the NVIDIA driver's character major (Documentation/admin-guide/devices.txt: 195 = nvidia)
CTL_MINOR = 255  # /dev/nvidiactl
VENDOR = "0x10de"
KIND = "k8s.device-plugin.nvidia.com/gpu"
SPEC_NAME = "k8s.device-plugin.nvidia.com-gpu.yaml"
_REPLICA = re.compile(r"(.+)::(\d+)")


@dataclass(frozen=True)
class SimGpu:
    index: int  # /dev/nvidia<index>, minor <index>
    id: str  # the base device ID (GPU-<uuid>)
    resource: str
    pci: PciDevice
    shared: bool  # served as time-slicing replicas


def base(device_id: str) -> str:
    """The GPU a device ID is: ``GPU-8`` for the replica ``GPU-8::2``."""
    m = _REPLICA.fullmatch(device_id)
    return m.group(1) if m else device_id


def is_nvidia(resource: PluginSpec) -> bool:
    return resource.resource.split("/", 1)[0] == "nvidia.com"


def is_time_sliced(resource: PluginSpec) -> bool:
    """Every device of it a replica ``<id>::<n>``: NVIDIA's time-slicing."""
    return is_nvidia(resource) and bool(resource.devices) and all(_REPLICA.fullmatch(d.id) for d in resource.devices)


def gpus(resources: Sequence[PluginSpec], pci: Sequence[PciDevice]) -> tuple[SimGpu, ...]:
    """The scenario's NVIDIA GPUs, each joined to the resource and base ID that take it (see the module)."""
    functions = sorted(
        (d for d in pci if d.vendor_id.lower() == VENDOR and d.class_id.lower().startswith("0x03")),
        key=lambda d: d.address,
    )
    out: list[SimGpu] = []
    for resource in resources:
        if not is_nvidia(resource):
            continue
        shared = is_time_sliced(resource)
        for gpu_id in dict.fromkeys(base(d.id) for d in resource.devices):
            if len(out) >= len(functions):
                return tuple(out)
            out.append(SimGpu(len(out), gpu_id, resource.resource, functions[len(out)], shared))
    return tuple(out)


def char_devices(sim_gpus: Sequence[SimGpu]) -> dict[tuple[int, int], PciDevice]:
    """``(195, N)`` → the GPU's function, for ``drasysfs.write_char_links``."""
    return {(MAJOR, g.index): g.pci for g in sim_gpus}


def _node(index: int | str) -> dict[str, object]:
    minor = CTL_MINOR if index == "ctl" else int(index)
    path = f"/dev/nvidia{index}"
    return {"path": path, "hostPath": path, "type": "c", "major": MAJOR, "minor": minor}


def spec(sim_gpus: Sequence[SimGpu]) -> dict[str, object] | None:
    """The CDI spec of the GPUs (None: there are none), shaped as the plugin writes it."""
    if not sim_gpus:
        return None
    devices = [
        {"name": name, "containerEdits": {"deviceNodes": [_node(g.index)]}}
        for g in sim_gpus
        for name in (g.id, str(g.index))
    ]
    return {
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": devices,
        "containerEdits": {"deviceNodes": [_node("ctl")]},
    }


def write_spec(root: str, sim_gpus: Sequence[SimGpu]) -> str | None:
    """Write ``<root>/var/run/cdi/<SPEC_NAME>`` at once; its path, or None when there is nothing to name."""
    import yaml

    content = spec(sim_gpus)
    if content is None:
        return None
    directory = os.path.join(root, DYNAMIC_DIR)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, SPEC_NAME)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".tmp")  # never read half-written
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(content, f, sort_keys=False)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path
