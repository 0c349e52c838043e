"""The words and values of calling a plugin or driver by hand: the RPC words, which of them change node state
(what the faces parse, complete and refuse before any socket is touched), the requests and the results.

Only the standard library and ``devctl.base`` are imported here: shell completion reads ``METHODS`` and
``DRA_METHODS`` and must load neither the model, gRPC nor the node's readers. The calls themselves are
``devctl.core.calls.call_plugin`` and ``devctl.core.calls_dra.call_driver``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devctl.base.errors import DevctlError

if TYPE_CHECKING:
    from devctl.node.dra_call import ClaimRef

__all__ = [
    "CHANGES_STATE",
    "DRA_CHANGES_STATE",
    "DRA_METHODS",
    "METHODS",
    "CallResult",
    "DraCallResult",
    "DraRequest",
    "NeedsConsent",
    "Request",
    "dra_refusal",
    "refusal",
]

# The RPC words of ``devctl call`` and the DevicePlugin methods they call.
METHODS = {
    "options": "GetDevicePluginOptions",
    "list": "ListAndWatch",
    "preferred": "GetPreferredAllocation",
    "allocate": "Allocate",
    "prestart": "PreStartContainer",
}
# A plugin may reserve, reset or power up a device when it is allocated or about to
# be used by a container (what the kubelet calls these for), so they need an explicit flag.
CHANGES_STATE = {"allocate", "prestart"}

# The RPC words after ``--dra DRIVER`` and what they call.
DRA_METHODS = {
    "info": "GetInfo",
    "health": "NodeWatchResources",
    "prepare": "NodePrepareResources",
    "unprepare": "NodeUnprepareResources",
}
# A driver sets devices up and writes CDI specs for a claim, or tears them down:
# the node's state changes under the kubelet's feet, so these need an explicit flag.
DRA_CHANGES_STATE = {
    "prepare": "sets up the claim's devices and writes their CDI specs",
    "unprepare": "tears down the claim's devices and removes their CDI specs, even while a pod uses them",
}


class NeedsConsent(DevctlError):
    """A state-changing RPC was asked without the caller's explicit consent: nothing was dialled."""


@dataclass(frozen=True)
class Request:
    """What is asked of a device plugin."""

    rpc: str  # a key of METHODS
    device_ids: tuple[str, ...] = ()  # allocate, prestart
    available: tuple[str, ...] = ()  # preferred
    must_include: tuple[str, ...] = ()
    size: int | None = None

    def plain(self) -> dict[str, Any]:
        """The request as the JSON output echoes it: only the fields its RPC takes."""
        if self.rpc == "preferred":
            return {"available": list(self.available), "must_include": list(self.must_include), "size": self.size}
        if self.rpc in CHANGES_STATE:
            return {"device_ids": list(self.device_ids)}
        return {}


@dataclass(frozen=True)
class DraRequest:
    """What is asked of a DRA driver: the RPC word and, for prepare/unprepare, the claim."""

    rpc: str  # a key of DRA_METHODS
    claim: str | None = None  # NAMESPACE/NAME
    uid: str | None = None

    def plain(self, ref: ClaimRef | None) -> dict[str, Any]:
        """The request as the JSON output echoes it: the claim with its UID, once known."""
        if ref is None:
            return {}
        return {"claims": [{"namespace": ref.namespace, "name": ref.name, "uid": ref.uid}]}


@dataclass(frozen=True)
class CallResult:
    """A device plugin's answer: the socket dialled, the resource named (None with a socket), the reply."""

    socket: str
    resource: str | None
    request: Request
    reply: Any  # the model object(s) the RPC returned, as devctl.model.serial shapes them
    latency_ms: float


@dataclass(frozen=True)
class DraCallResult:
    """A DRA driver's answer: its name, the socket called, the request as echoed, the reply, the method."""

    driver: str
    socket: str  # the socket called: the registration socket (info) or the endpoint
    request: dict[str, Any]
    reply: Any  # model objects and plain values, as devctl.model.serial shapes them
    latency_ms: float
    rpc: str


def refusal(request: Request) -> str | None:
    """Why ``request`` needs the explicit flag (the line a face shows), None when it only reads."""
    if request.rpc not in CHANGES_STATE:
        return None
    return (
        f"{request.rpc} calls {METHODS[request.rpc]}, which may change the devices' state on the node "
        "(a plugin may reserve or reset them): add --yes to call it"
    )


def dra_refusal(request: DraRequest) -> str | None:
    """Why ``request`` needs the explicit flag (the line a face shows), None when it only reads."""
    why = DRA_CHANGES_STATE.get(request.rpc)
    if not why:
        return None
    return (
        f"{request.rpc} calls {DRA_METHODS[request.rpc]}, which changes node state (the driver {why}): "
        "add --yes to call it"
    )
