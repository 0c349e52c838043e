"""A container the simulated node cannot start: ``pods[].containers[].waiting`` and the kubelet log lines about it.

``waiting: {reason: CreateContainerError, message: "…"}`` keeps the container in the CRI's created state
with that reason and message (devctl.lab.sim.cri), as a runtime keeps a container whose start failed, and
the node writes the kubelet's own lines about it, in klog's format, to ``<root>/var/log/kubelet.log``
(``devctl why`` reads that file by default under ``--root``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from devctl.lab.made import Made

KUBELET_LOG = "var/log/kubelet.log"


def parse_waiting(value: Any, where: str, error: type[Exception] = ValueError) -> tuple[str, str] | None:
    """(reason, message) of a container's ``waiting:``, None without one; raises ``error`` (the scenario's)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"reason", "message"} or not value.get("reason"):
        raise error(f"{where}: needs {{reason: R, message: M}} and nothing else")
    return str(value["reason"]), str(value.get("message") or "")


def _klog(now: float, text: str) -> str:
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now)) + f".{int(now * 1e6) % 1_000_000:06d}"
    return f"E{stamp}    4242 {text}"


def kubelet_lines(pods: Iterable[Any], now: float | None = None) -> list[str]:
    """The kubelet's lines (pod_workers.go and kuberuntime_manager.go's words) for each waiting container."""
    at = time.time() if now is None else now
    lines = []
    for pod in pods:
        for c in pod.containers:
            if c.waiting is None:
                continue
            reason, message = c.waiting
            ref = f'pod="{pod.namespace}/{pod.name}" podUID="{pod.uid}"'
            quoted = message.replace('"', '\\"')
            lines.append(
                _klog(
                    at,
                    f'kuberuntime_manager.go:1341] "Unhandled Error" err="container {c.name} start failed '
                    f'in pod {pod.name}_{pod.namespace}({pod.uid}): {reason}: {quoted}" logger="UnhandledError"',
                )
            )
            lines.append(
                _klog(
                    at,
                    f'pod_workers.go:1301] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" '
                    f'for \\"{c.name}\\" with {reason}: \\"{quoted}\\"" {ref}',
                )
            )
    return lines


def write_kubelet_log(root: Path, pods: Iterable[Any], made: Made | None) -> None:
    """Append the lines of the waiting containers to ``<root>/var/log/kubelet.log`` (made, and recorded, once)."""
    path = root / KUBELET_LOG
    if made is not None:
        made.makedirs(path.parent)
    new = not path.exists()
    said = "" if new else path.read_text(encoding="utf-8", errors="replace")
    lines = [line for line in kubelet_lines(pods) if line.split(" ", 3)[3] not in said]  # once each, not per populate
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    if new and made is not None:
        made.file(path)
    os.utime(path)
