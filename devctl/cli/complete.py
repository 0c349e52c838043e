"""Live shell completion: names read from the node as the shell asks, silent and fast when it does not answer.

Resource names (read by devctl.core.names) and device IDs come from the kubelet's checkpoint
(RegisteredDevices: every resource a plugin registered and its device IDs), a
file read with no RPC; DRA drivers, their claimed devices and the claims' names
from the DRA manager's (``dra_manager_state``, the same); namespaces and pod names from the kubelet's pod log
directories (one listing), and only where those cannot be
listed from one pod-resources List. Anything that fails (no node, no rights, a
hung socket) completes nothing: a completion must never print an error into
the shell's line nor keep a person waiting. A person pressing Tab waits at
most BUDGET from the process's start (docs/performance.md), so each read takes
what is left of it and only what it needs: the checkpoint's JSON without its
checksum or allocations, the List reply's names without the model's
conversion, one synchronous call without an event loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from devctl.model import NodePaths

# From the command's start to the answer, node reads included; the List gets what is left, at least MIN_DEADLINE.
BUDGET = 0.28
MIN_DEADLINE = 0.03
# A deadline in seconds for the List instead (a slow node, or a test on a loaded machine).
DEADLINE_VAR = "DEVCTL_COMPLETE_TIMEOUT"


def _process_start() -> float:
    """When this process started, on time.monotonic's clock: the person's wait began there, not at this import.

    The interpreter and typer are loaded by then (about a third of the budget).
    /proc/self/stat's start time (clock ticks after boot) against CLOCK_BOOTTIME;
    an age that cannot be read, or is negative, counts from now.
    """
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if age >= 0 else now


_STARTED = _process_start()


def _deadline() -> float:
    try:
        return max(MIN_DEADLINE, float(os.environ[DEADLINE_VAR]))
    except (KeyError, ValueError):
        return max(MIN_DEADLINE, _STARTED + BUDGET - time.monotonic())


def _paths(ctx: typer.Context) -> NodePaths:
    """The node's paths from the global options typed so far (or their environment variables): before the command
    (the root group's values) and after it (``devctl ls --root X <TAB>``: its copies keep theirs on the root's
    ``obj`` as they are parsed, devctl.cli.globalopts)."""
    from devctl.cli.common import GlobalOptions
    from devctl.cli.globalopts import given_paths

    root = ctx.find_root()
    given = given_paths(root.params)
    if isinstance(root.obj, GlobalOptions):
        given.update(root.obj.given)
    return GlobalOptions(given=given).paths()


def _matching(names: Iterable[str], incomplete: str) -> list[str]:
    """The names that start with what was typed (a shell replaces the word only with names that do)."""
    return sorted(n for n in set(names) if n.startswith(incomplete))


def _registered(ctx: typer.Context) -> dict[str, tuple[str, ...]]:
    from devctl.core.names import registered_devices

    try:
        return registered_devices(_paths(ctx))
    except Exception:
        return {}


def _dra_claims(ctx: typer.Context) -> list[tuple[str, str, dict[str, tuple[str, ...]]]]:
    from devctl.core.names import checkpointed_claims

    try:
        return checkpointed_claims(_paths(ctx))
    except Exception:
        return []


def _devices(ctx: typer.Context) -> dict[str, tuple[str, ...]]:
    """Resource or DRA driver -> device IDs: the checkpoint's, and the ``<pool>/<device>`` a driver's claims hold.

    A DRA driver is named only where a claim of its is checkpointed: its own
    name is what its registration's GetInfo says, an RPC a Tab does not wait for.
    """
    devices = dict(_registered(ctx))
    for _, _, drivers in _dra_claims(ctx):
        for driver, ids in drivers.items():
            devices[driver] = tuple(dict.fromkeys((*devices.get(driver, ()), *ids)))
    return devices


def resources(ctx: typer.Context, incomplete: str) -> list[str]:
    """Extended resource names the node registered, and its DRA drivers."""
    return _matching(_devices(ctx), incomplete)


def device_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Device IDs of the resource named before (``plugin set-health RESOURCE ID``), else of every resource."""
    devices = _devices(ctx)
    resource = ctx.params.get("resource")
    ids = devices.get(resource, ()) if resource else [i for group in devices.values() for i in group]
    return _matching(ids, incomplete)


def resources_then_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """``devices [RESOURCE|ID]...``: the resource names, and after a resource its device IDs too."""
    devices = _devices(ctx)
    typed = [n for n in ctx.params.get("resources") or () if n in devices]
    ids = [i for n in typed for i in devices[n]]
    return _matching([*devices, *ids], incomplete)


def targets(ctx: typer.Context, incomplete: str) -> list[str]:
    """``who [DEVICE | RESOURCE | DRIVER]``: the resource and driver names and every device ID."""
    devices = _devices(ctx)
    return _matching([*devices, *(i for ids in devices.values() for i in ids)], incomplete)


def claim_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Checkpointed claims: names in the namespace given with -n, else NAMESPACE/NAME (claims takes both)."""
    namespace = ctx.params.get("namespace")
    claims = _dra_claims(ctx)
    if namespace:
        return _matching((name for ns, name, _ in claims if ns == namespace), incomplete)
    return _matching((f"{ns}/{name}" for ns, name, _ in claims), incomplete)


def _pods(ctx: typer.Context) -> list[tuple[str, str]]:
    """(namespace, name) of every pod (devctl.core.names.node_pods), within what is left of the budget."""
    from devctl.cli import grpclog
    from devctl.core.names import node_pods

    try:
        paths = _paths(ctx)
    except Exception:
        return []
    grpclog.quiet()  # the app's callback, which does this for a command, does not run for a completion
    return node_pods(paths, _deadline)


def namespaced_pods(ctx: typer.Context, incomplete: str) -> list[str]:
    """``NS/NAME`` of every pod (``sim delete-pod``)."""
    return _matching((f"{ns}/{name}" for ns, name in _pods(ctx)), incomplete)


def namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    return _matching((ns for ns, _ in _pods(ctx)), incomplete)


def pod_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Pod names in the namespace given with -n; NAMESPACE/NAME when none is, as `get` takes both."""
    namespace = ctx.params.get("namespace")
    pods = _pods(ctx)
    if namespace:
        return _matching((name for ns, name in pods if ns == namespace), incomplete)
    return sorted(f"{ns}/{name}" for ns, name in pods if f"{ns}/{name}".startswith(incomplete))


def call_words(ctx: typer.Context, incomplete: str) -> list[str]:
    """``devctl call [RESOURCE] RPC [ID...]``: resource names, then RPC names, then the resource's device IDs."""
    from devctl.core.callwords import METHODS

    typed = list(ctx.params.get("args") or ())
    driver = ctx.params.get("dra")
    if driver:
        return _dra_call_words(ctx, driver, typed, incomplete)
    if not ctx.params.get("socket"):
        if not typed:
            return resources(ctx, incomplete)
        resource, typed = typed[0], typed[1:]
    else:
        resource = None
    if not typed:
        return _matching(METHODS, incomplete)
    if typed[0] not in ("allocate", "prestart", "preferred"):
        return []
    registered = _devices(ctx)
    ids = registered.get(resource, ()) if resource else [i for group in registered.values() for i in group]
    return _matching(ids, incomplete)


def _dra_call_words(ctx: typer.Context, driver: str, typed: list[str], incomplete: str) -> list[str]:
    """``devctl call --dra DRIVER RPC [NAMESPACE/NAME]``: the DRA RPC names, then the driver's checkpointed claims."""
    from devctl.core.callwords import DRA_METHODS

    if not typed:
        return _matching(DRA_METHODS, incomplete)
    if typed[0] not in ("prepare", "unprepare") or len(typed) > 1:
        return []
    return _matching((f"{ns}/{name}" for ns, name, held in _dra_claims(ctx) if driver in held), incomplete)


def drivers(ctx: typer.Context, incomplete: str) -> list[str]:
    """``--dra DRIVER``: the DRA drivers that hold checkpointed claims."""
    return _matching((d for _, _, held in _dra_claims(ctx) for d in held), incomplete)
