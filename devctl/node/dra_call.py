"""NodePrepareResources and NodeUnprepareResources of one claim, for ``devctl call --dra … --yes`` alone.

These change the node (a driver sets devices up and writes CDI specs, or
tears them down), so they live apart from the read side (``devctl.node.dra``):
no read command imports them, and `ls` does not pay for their types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from devctl.model import DraCheckpointDevice
from devctl.node.rpc import failure, parsed, plugin_channel
from devctl.node.rpclog import logged

# The DRA service labels devctl can call, and their generated modules (imported when used).
DRA_APIS = {"v1.DRAPlugin": "v1", "v1beta1.DRAPlugin": "v1beta1"}


def dra_api(supported: Sequence[str]) -> str | None:
    """The DRA service label to call: the first of the driver's own list that devctl speaks, as kubelets 1.34+ pick."""
    return next((label for label in supported if label in DRA_APIS), None)


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim as the kubelet names it to a driver."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class ClaimAnswer:
    """A driver's answer for one claim: the devices prepared (prepare only) and its error ("" when none)."""

    uid: str
    devices: tuple[DraCheckpointDevice, ...] = ()
    error: str = ""


def _dra_modules(label: str) -> tuple[Any, Any]:
    """The generated modules of a DRA service label (imported when a call needs them)."""
    import importlib

    package = f"devctl.api.dra.{DRA_APIS[label]}"
    return importlib.import_module(f"{package}.api_pb2"), importlib.import_module(f"{package}.api_pb2_grpc")


async def change_claim(path: str, driver: str, label: str, method: str, claim: ClaimRef, timeout: float) -> ClaimAnswer:
    """``NodePrepareResources`` or ``NodeUnprepareResources`` (``method``) of one claim; raises RpcFailure.

    These change the node (a driver sets devices up and writes CDI specs, or
    tears them down): only ``devctl call … --yes`` makes them.
    """
    pb, pb_grpc = _dra_modules(label)
    what = f"{path} {DRA_APIS[label]} {method}"
    wire = pb.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)
    make = pb.NodePrepareResourcesRequest if method == "NodePrepareResources" else pb.NodeUnprepareResourcesRequest
    request = make(claims=[wire])
    async with plugin_channel(path) as ch:
        stub = pb_grpc.DRAPluginStub(ch)
        try:
            with logged(path, f"{DRA_APIS[label]} {method}"):
                reply = await getattr(stub, method)(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise failure(e, what, timeout) from None
    reply = parsed(reply, what, f"{method}Response")
    if claim.uid not in reply.claims:
        return ClaimAnswer(claim.uid, error=f"{what}: the reply has no entry for claim {claim.uid}")
    answer = reply.claims[claim.uid]
    shares = label == "v1.DRAPlugin"  # share_id is a v1 field (1.35+)
    devices = tuple(
        DraCheckpointDevice(
            driver=driver,
            pool=d.pool_name,
            device=d.device_name,
            requests=tuple(d.request_names),
            cdi_devices=tuple(d.cdi_device_ids),
            share_id=d.share_id if shares and d.HasField("share_id") else None,
        )
        for d in getattr(answer, "devices", ())
    )
    return ClaimAnswer(claim.uid, devices, answer.error)
