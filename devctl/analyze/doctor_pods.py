"""Doctor's pod-level findings: a container the runtime keeps waiting for a reason about its devices.

``device-container-waiting`` (warning): a container in ``CreateContainerError`` whose message names CDI or
devices (kubernetes/kubernetes#141433: a CDI spec gone at reboot), or ``RunContainerError`` naming device
nodes (``/dev/...``); the hint is ``devctl why -n NS POD``, which names the cause with its evidence.

A pod holding a device the kubelet marks unhealthy is not repeated here: doctor_plugins' ``unhealthy-allocated``
and doctor_dra's ``dra-device-unhealthy-in-use`` already say it, with the holders.
Pure: the waiting containers are read by ``devctl.core.doctor_pods.read_waiting``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from devctl.model import Finding, Severity

_DEVICE_WORDS = re.compile(r"\bCDI\b|cdi|\bdevices?\b|/dev/", re.IGNORECASE)
_DEVICE_NODES = re.compile(r"/dev/|device node|\bdevices?\b", re.IGNORECASE)
MAX_MESSAGE = 200


@dataclass(frozen=True)
class PodWaiting:
    """One container the runtime keeps from running, with the runtime's reason and message."""

    namespace: str
    pod: str
    container: str
    reason: str
    message: str


def device_related(w: PodWaiting) -> bool:
    if w.reason in ("CreateContainerError", "CreateContainerConfigError"):
        return bool(_DEVICE_WORDS.search(w.message))
    if w.reason in ("RunContainerError", "StartError"):
        return bool(_DEVICE_NODES.search(w.message))
    return False


def pod_findings(waiting: Iterable[PodWaiting]) -> list[Finding]:
    """One warning per container waiting for a device-related reason, with the ``devctl why`` that explains it."""
    out: list[Finding] = []
    for w in waiting:
        if not device_related(w):
            continue
        message = " ".join(w.message.split())
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1] + "…"
        out.append(
            Finding(
                Severity.WARNING,
                "device-container-waiting",
                f"{w.namespace}/{w.pod}",
                f"container {w.container} cannot start: {w.reason}: {message}",
                "devctl why " + " ".join(shlex.quote(x) for x in ("-n", w.namespace, w.pod)),
            )
        )
    return out
