"""Live shell completion: names read from the node as the shell asks, silent and fast when it does not answer.

Resource names and device IDs come from the kubelet's checkpoint
(RegisteredDevices: every resource a plugin registered and its device IDs), a
file read with no RPC; namespaces and pod names from pod-resources List under a
short deadline. Anything that fails (no node, no rights, a hung socket)
completes nothing: a completion must never print an error into the shell's
line nor keep a person waiting.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import typer

# pod-resources' deadline for a completion: a person pressing Tab waits no longer.
DEADLINE = 0.25


def _paths(ctx: typer.Context):
    """The node's paths from the global options typed so far (or their environment variables)."""
    from devctl.cli.common import GlobalOptions

    params = ctx.find_root().params
    given = {}
    for field, env in (
        ("root", "DEVCTL_ROOT"),
        ("kubelet_dir", "DEVCTL_KUBELET_DIR"),
        ("plugins_dir", "DEVCTL_PLUGINS_DIR"),
        ("pod_resources", "DEVCTL_POD_RESOURCES"),
    ):
        given[field] = params.get(field) or os.environ.get(env)
    return GlobalOptions(**given).paths()


def _matching(names: Iterable[str], incomplete: str) -> list[str]:
    """The names that start with what was typed (a shell replaces the word only with names that do)."""
    return sorted(n for n in set(names) if n.startswith(incomplete))


def _registered(ctx: typer.Context) -> dict[str, tuple[str, ...]]:
    from devctl.node.checkpoint import read_checkpoint

    try:
        paths = _paths(ctx)
        return read_checkpoint(os.path.join(paths.plugins_dir, "kubelet_internal_checkpoint")).registered_devices
    except Exception:
        return {}


def resources(ctx: typer.Context, incomplete: str) -> list[str]:
    """Extended resource names the node registered."""
    return _matching(_registered(ctx), incomplete)


def device_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Device IDs of the resource named before (``plugin set-health RESOURCE ID``), else of every resource."""
    registered = _registered(ctx)
    resource = ctx.params.get("resource")
    ids = registered.get(resource, ()) if resource else [i for group in registered.values() for i in group]
    return _matching(ids, incomplete)


def _pods(ctx: typer.Context) -> list[tuple[str, str]]:
    import asyncio

    from devctl.analyze import POD_RESOURCES
    from devctl.collect import collect

    try:
        snap = asyncio.run(collect(_paths(ctx), DEADLINE, want={POD_RESOURCES}))
    except Exception:
        return []
    return [(p.namespace, p.name) for p in snap.pods or ()]


def namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    return _matching((ns for ns, _ in _pods(ctx)), incomplete)


def pod_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Pod names in the namespace given with -n; NAMESPACE/NAME when none is, as `get` takes both."""
    namespace = ctx.params.get("namespace")
    pods = _pods(ctx)
    if namespace:
        return _matching((name for ns, name in pods if ns == namespace), incomplete)
    return sorted(f"{ns}/{name}" for ns, name in pods if f"{ns}/{name}".startswith(incomplete))
