"""Names for completion: what the node's files list, read cheaply and never failing.

A shell's Tab must answer within a budget (devctl.cli.complete) and never print an error, so these read only
what they need — the checkpoints' JSON without verifying checksums or modelling allocations, the pod log
directories, one synchronous pod-resources List — and return nothing when anything fails. Nothing here
imports devctl.model at run time (its import alone costs a tenth of the budget).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devctl.base.names import go_field

if TYPE_CHECKING:
    from devctl.model import NodePaths

Claims = list[tuple[str, str, dict[str, tuple[str, ...]]]]


def _key(obj: Any, name: str) -> Any:
    return go_field(obj, name) if isinstance(obj, dict) else None


def _json(path: str) -> Any:
    from devctl.node.files import read_file

    return json.loads(read_file(path))


def registered_devices(paths: NodePaths) -> dict[str, tuple[str, ...]]:
    """Resource -> device IDs from the checkpoint: Data.RegisteredDevices, and the devices its entries hold.

    The kubelet registers only healthy devices there; a device that went bad while a container holds it is
    still in that container's PodDeviceEntries, so it is offered too.
    """
    try:
        data = _key(_json(paths.checkpoint), "Data")
    except Exception:
        return {}
    registered, entries = _key(data, "RegisteredDevices"), _key(data, "PodDeviceEntries")
    devices: dict[str, dict[str, None]] = {}
    for name, ids in registered.items() if isinstance(registered, dict) else ():
        if isinstance(name, str) and isinstance(ids, list):
            devices.setdefault(name, {}).update(dict.fromkeys(i for i in ids if isinstance(i, str)))
    for entry in entries if isinstance(entries, list) else ():
        name, by_numa = _key(entry, "ResourceName"), _key(entry, "DeviceIDs")
        if not (isinstance(name, str) and isinstance(by_numa, dict)):
            continue
        for ids in by_numa.values():
            if isinstance(ids, list):
                devices.setdefault(name, {}).update(dict.fromkeys(i for i in ids if isinstance(i, str)))
    return {name: tuple(ids) for name, ids in devices.items()}


def _claim_devices(states: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    drivers = {}
    for driver, state in states.items():
        held = _key(state, "Devices")
        drivers[driver] = tuple(
            f"{_key(d, 'PoolName')}/{_key(d, 'DeviceName')}"
            for d in (held if isinstance(held, list) else ())
            if isinstance(_key(d, "PoolName"), str) and isinstance(_key(d, "DeviceName"), str)
        )
    return drivers


def checkpointed_claims(paths: NodePaths) -> Claims:
    """(namespace, name, driver -> ``<pool>/<device>`` IDs) of each claim in ``dra_manager_state``.

    Its claims only: devctl.node.dra_checkpoint verifies and models the whole file, and its imports alone cost
    half the budget. Any shape it does not expect is no claim.
    """
    try:
        doc = _json(paths.dra_checkpoint)
        text = _key(doc, "Data")
        data = json.loads(text) if isinstance(text, str) else doc  # the alpha form has no Data
        listed = _key(data, "ClaimInfoStateList") or _key(data, "Entries") or []
    except Exception:
        return []
    claims = []
    for claim in listed if isinstance(listed, list) else ():
        namespace, name, states = _key(claim, "Namespace"), _key(claim, "ClaimName"), _key(claim, "DriverState")
        if isinstance(namespace, str) and isinstance(name, str) and isinstance(states, dict):
            claims.append((namespace, name, _claim_devices(states)))
    return claims


def node_pods(paths: NodePaths, deadline: Callable[[], float]) -> list[tuple[str, str]]:
    """(namespace, name) of every pod: from the pod log directories, else by one pod-resources List.

    The directories answer at the cost of a listing whatever state the kubelet is in (hung, restarting); a pod
    that has ended keeps its directory until the kubelet cleans it up, which a completion may offer. The List
    only where they cannot be listed (a kubelet logging elsewhere, no rights), within the seconds ``deadline()``
    says are left once gRPC is imported (its import is part of the wait a person sees).
    """
    from devctl.node.podlogs import logged_pods

    try:
        return logged_pods(paths.pod_logs)
    except OSError:
        pass
    try:
        socket = paths.pod_resources
        if not os.path.exists(socket):  # no kubelet here: nothing to ask, and gRPC not worth importing
            return []
        import grpc

        from devctl.api.podresources.v1 import api_pb2, api_pb2_grpc

        options = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]
        with grpc.insecure_channel(f"unix:{os.path.abspath(socket)}", options=options) as channel:
            reply = api_pb2_grpc.PodResourcesListerStub(channel).List(
                api_pb2.ListPodResourcesRequest(), timeout=deadline()
            )
    except Exception:
        return []
    return [(p.namespace, p.name) for p in reply.pod_resources]


def numa_nodes(sysfs: str) -> set[int] | None:
    """The NUMA node IDs the host's sysfs lists; None when it cannot be read (nothing to check against)."""
    from devctl.node.sysfs import TopologyError, read_topology

    try:
        return {n.id for n in read_topology(sysfs, use_udev=False).numa_nodes}
    except TopologyError:
        return None
