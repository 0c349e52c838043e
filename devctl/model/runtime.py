"""What a node's container runtime and kubelet log say of one pod: read by ``devctl.node`` (cri_states, kubeletlog),
judged by ``devctl.analyze.why``; values here so that the analysis never imports the readers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxState:
    id: str
    uid: str
    state: str  # ready | notready | unknown
    created_at: str | None = None  # UTC ISO 8601


@dataclass(frozen=True)
class ContainerState:
    id: str
    sandbox_id: str
    name: str
    state: str  # created | running | exited | unknown
    reason: str = ""
    message: str = ""
    exit_code: int | None = None  # only for an exited container
    attempt: int = 0
    created_at: str | None = None


@dataclass(frozen=True)
class PodRuntimeState:
    """What the runtime holds of one pod: its sandboxes (newest first) and their containers."""

    endpoint: str
    sandboxes: tuple[SandboxState, ...] = ()
    containers: tuple[ContainerState, ...] = ()


@dataclass(frozen=True)
class LogLine:
    """One kubelet log line about the pod: when (as the line says it, None if it says nothing) and its text."""

    time: str | None
    text: str
