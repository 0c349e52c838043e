"""Calling one device plugin by hand (``devctl call``): find the socket that serves a resource, dial it under the
deadline, make one DevicePlugin RPC, and hand back the reply as model values.

The use-case, for every face: ``call_plugin`` returns a ``CallResult`` or raises one typed failure
(``RpcFailure`` when the plugin cannot be reached or answers with an error, ``UnknownResource`` when no plugin is
known by that name, ``NeedsConsent`` when a state-changing RPC is asked without ``changes_state``).
``unreachable`` says which failures mean "no answer" (exit 3) rather than "answered with an error". The words
of a request and the rule for the RPCs that change state are in ``devctl.core.callwords`` (light: completion
reads them). ``RpcFailure`` is re-exported here for the faces, which never import node/.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from devctl.core.callwords import CallResult, NeedsConsent, Request, refusal
from devctl.core.failures import UnknownResource
from devctl.node.connect import RpcFailure, check_socket

if TYPE_CHECKING:
    from devctl.model import NodePaths, PluginProbe
    from devctl.node.deviceplugin import DevicePluginClient

__all__ = ["RpcFailure", "UnknownResource", "call_plugin", "unreachable"]


def unreachable(failure: RpcFailure) -> bool:
    """Whether the plugin could not be reached or gave no usable reply (exit 3), not answered with an error."""
    import grpc

    return failure.code in (None, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


async def call_plugin(
    paths: NodePaths,
    timeout: float,
    resource: str | None,
    socket: str | None,
    request: Request,
    *,
    changes_state: bool = False,
) -> CallResult:
    """One DevicePlugin RPC: at ``socket``, else at the socket that serves ``resource``; every step under ``timeout``.

    Raises NeedsConsent (before any socket is touched) for allocate or prestart without ``changes_state``,
    UnknownResource for a name no plugin serves, RpcFailure for a plugin that cannot be reached or refuses.
    """
    from devctl.node.deviceplugin import DevicePluginClient

    why = refusal(request)
    if why is not None and not changes_state:
        raise NeedsConsent(why)
    if socket is None:
        socket = await _socket_of(paths, timeout, resource or "")
    # A socket-level connect first: gRPC says UNAVAILABLE for a missing, stale or forbidden socket alike.
    await check_socket(socket, timeout)
    async with DevicePluginClient(socket, timeout) as client:
        start = time.perf_counter()
        reply = await _reply(client, request)
        latency = (time.perf_counter() - start) * 1000
    return CallResult(socket, resource, request, reply, round(latency, 3))


async def _socket_of(paths: NodePaths, timeout: float, resource: str) -> str:
    """The socket that serves ``resource``, as ``devctl ls`` shows it (the first by path when several do).

    When none does, the error says why a person may not see it: sockets devctl
    may not open (not root), or a resource name that is almost one served.
    """
    from devctl.analyze import CHECKPOINT, PLUGINS, POD_RESOURCES
    from devctl.core.collect import collect
    from devctl.node.sockets import serving_sockets

    snapshot = await collect(paths, timeout, want={PLUGINS, POD_RESOURCES, CHECKPOINT})
    found = serving_sockets(paths, snapshot.plugins, resource)
    if found:
        return found[0][1]  # the socket that serves DevicePlugin: a registry socket's endpoint, a symlink's target
    from devctl.analyze.inventory import inventories  # only to say why none does

    raise _not_served(paths, snapshot.plugins, resource, known=resource in inventories(snapshot))


def _not_served(paths: NodePaths, plugins: Sequence[PluginProbe], resource: str, known: bool = False) -> Exception:
    """Why no socket serves ``resource``: no plugins dir (wrong root), rights, a resource the node has whose plugin
    does not serve (exit 3, as a --socket that does not answer: no serving socket is one exit code), or a name that
    is wrong (exit 1, as in ls)."""
    from devctl.base.names import likely
    from devctl.model import PluginStatus
    from devctl.node.paths import not_a_node

    if not os.path.isdir(paths.plugins_dir):
        return RpcFailure(PluginStatus.NO_PLUGIN, not_a_node(paths))
    serving = [p for p in plugins if p.status == PluginStatus.SERVING]
    message = f"no serving socket in {paths.plugins_dir} is known to serve {resource}"
    denied = sum(p.status == PluginStatus.PERMISSION_DENIED for p in plugins)
    close = likely(resource, {p.resource for p in serving if p.resource})
    if denied:
        why = f"{denied} socket(s) there refused devctl: permission denied; run as root"
        return RpcFailure(PluginStatus.NO_PLUGIN, f"{message} ({why})")
    if known:
        why = "the kubelet or its checkpoint names it, but its plugin does not serve it now"
        return RpcFailure(PluginStatus.NO_PLUGIN, f"{message} ({why}; see devctl plugins)")
    return UnknownResource(message + (f" (did you mean {close}?)" if close else " (see devctl plugins)"))


async def _reply(client: DevicePluginClient, request: Request) -> Any:
    if request.rpc == "options":
        return await client.options()
    if request.rpc == "list":
        return {"devices": await client.first_list()}
    if request.rpc == "preferred":
        return {"device_ids": await client.preferred(request.available, request.must_include, request.size or 0)}
    if request.rpc == "allocate":
        return await client.allocate(request.device_ids)
    await client.prestart(request.device_ids)
    return {}
