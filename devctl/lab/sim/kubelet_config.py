"""The simulated kubelet's configuration: the scenario's ``kubelet:`` policy fields, written as kubeadm does.

A scenario's ``kubelet:`` may name the admission settings of ``KubeletConfiguration`` under their own names
(``topologyManagerPolicy``, ``topologyManagerScope``, ``topologyManagerPolicyOptions``, ``cpuManagerPolicy``,
``cpuManagerPolicyOptions``, ``reservedSystemCPUs``, ``memoryManagerPolicy``, ``reservedMemory``,
``kubeReserved``, ``systemReserved``); the simulator writes them to ``<root>/var/lib/kubelet/config.yaml``
(kubeadm's place, where ``devctl.node.kubeletconfig`` reads them). Unset: the static CPU and memory managers the
simulator's pods are placed by, the ``best-effort`` topology manager, and ``reservedSystemCPUs`` from the
scenario's ``reserved_cpus``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from devctl.base.units import format_cpulist

CONFIG_FIELDS = (
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "reservedSystemCPUs",
    "memoryManagerPolicy",
    "reservedMemory",
    "kubeReserved",
    "systemReserved",
)
DEFAULT_CONFIG: Mapping[str, Any] = {
    "cpuManagerPolicy": "static",
    "memoryManagerPolicy": "Static",
    "topologyManagerPolicy": "best-effort",
    "topologyManagerScope": "container",
}
_MAPS = ("topologyManagerPolicyOptions", "cpuManagerPolicyOptions", "kubeReserved", "systemReserved")


def parse_kubelet_config(
    entry: Mapping[str, Any], reserved_cpus: Sequence[int] = (), error: type[Exception] = ValueError
) -> dict[str, Any]:
    """The configuration fields of a scenario's ``kubelet:`` over the defaults (see the module's docstring);
    a field of the wrong shape raises ``error`` (the scenario's own) naming it."""
    config: dict[str, Any] = dict(DEFAULT_CONFIG)
    for name in CONFIG_FIELDS:
        if name not in entry:
            continue
        value = entry[name]
        if name in _MAPS:
            if not isinstance(value, Mapping):
                raise error(f"kubelet.{name}: expected a mapping")
            value = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        elif name == "reservedMemory":
            if not isinstance(value, list):
                raise error("kubelet.reservedMemory: expected a list of {numaNode, limits}")
        elif not isinstance(value, (str, int)):
            raise error(f"kubelet.{name}: expected a word")
        else:
            value = str(value)
        config[name] = value
    if "reservedSystemCPUs" not in config and reserved_cpus:
        config["reservedSystemCPUs"] = format_cpulist(reserved_cpus)
    return config


def config_yaml(config: Mapping[str, Any]) -> str:
    """``config.yaml`` as kubeadm writes it: apiVersion and kind, then the fields (JSON values are YAML)."""
    lines = ["apiVersion: kubelet.config.k8s.io/v1beta1", "kind: KubeletConfiguration"]
    lines.extend(f"{name}: {json.dumps(value)}" for name, value in config.items())
    return "\n".join(lines) + "\n"
