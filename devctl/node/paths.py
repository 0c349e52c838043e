"""Every path devctl reads, resolved in one place: flag, then environment, then /host, then default.

The device-plugins directory is hard-coded in the kubelet
(pkg/kubelet/apis/deviceplugin/v1beta1/constants.go), so it does not follow
``--kubelet-dir``; the pod-resources socket and the plugin registry do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from devctl.base.path_options import PATH_NAMES, PATH_OPTIONS
from devctl.model import NodePaths

# The CRI sockets of containerd and CRI-O, in the order crictl tries them.
RUNTIME_SOCKETS = ("run/containerd/containerd.sock", "run/crio/crio.sock")

# The container runtime's default CDI spec dirs, lowest priority first: a later
# dir wins over an earlier one (containerd's and CRI-O's ``cdi_spec_dirs``).
DEFAULT_CDI_DIRS = ("etc/cdi", "var/run/cdi")

# Under `kubectl debug node/NAME` the host's filesystem is mounted here.
HOST_MOUNT = "/host"


def detect_root(host_mount: str = HOST_MOUNT) -> str:
    """``/host`` when only it has a kubelet dir (a debug pod), else ``/``."""
    if not Path("/var/lib/kubelet").is_dir() and Path(host_mount, "var/lib/kubelet").is_dir():
        return host_mount
    return "/"


def _join(root: str, rel: str) -> str:
    return str(Path(root) / rel)


def resolve_paths(
    given: Mapping[str, str | None] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    host_mount: str = HOST_MOUNT,
    **named: str | None,
) -> NodePaths:
    """Resolve every node path; a path given by name (devctl.base.path_options), in ``given`` or as a
    keyword, wins over its variable in ``env``."""
    given = {**(given or {}), **named}
    unknown = given.keys() - PATH_NAMES
    if unknown:
        raise TypeError(f"resolve_paths: no node path named {', '.join(sorted(unknown))}")
    env = os.environ if env is None else env
    chosen = {o.name: given.get(o.name) or env.get(o.envvar) or None for o in PATH_OPTIONS}

    root = chosen["root"] or detect_root(host_mount)
    kubelet = chosen["kubelet_dir"] or _join(root, "var/lib/kubelet")
    return NodePaths(
        root=root,
        kubelet_dir=kubelet,
        plugins_dir=chosen["plugins_dir"] or _join(root, "var/lib/kubelet/device-plugins"),
        pod_resources=socket_of(chosen["pod_resources"] or _join(kubelet, "pod-resources/kubelet.sock")),
        sysfs=chosen["sysfs"] or _join(root, "sys"),
        pod_logs=chosen["pod_logs"] or _join(root, "var/log/pods"),
        proc=chosen["proc"] or _join(root, "proc"),
        runtime_endpoint=chosen["runtime_endpoint"] or default_runtime_endpoint(root),
        cdi_dirs=_cdi_dirs(chosen["cdi_dirs"], root),
    )


def socket_of(endpoint: str) -> str:
    """The socket path of an endpoint as crictl takes it: ``unix:///path``, ``unix:/path`` (a URL whose path
    has no empty host before it), the scheme in any case, or a plain path. The one parser of endpoints given
    by a person (``--pod-resources``, ``--runtime-endpoint``)."""
    scheme, colon, rest = endpoint.partition(":")
    if not colon or scheme.lower() != "unix":
        return endpoint
    return rest[2:] if rest.startswith("//") else rest


def default_runtime_endpoint(root: str) -> str:
    """The first CRI socket that exists under ``root`` (containerd, then CRI-O); containerd's when neither does."""
    candidates = [_join(root, rel) for rel in RUNTIME_SOCKETS]
    return next((c for c in candidates if os.path.exists(c)), candidates[0])


def _cdi_dirs(flag: str | None, root: str) -> tuple[str, ...]:
    """``--cdi-dirs A:B`` as given (lowest priority first), else the runtime's defaults under the root."""
    if flag:
        return tuple(d for d in flag.split(":") if d)
    return tuple(_join(root, d) for d in DEFAULT_CDI_DIRS)


def not_a_node(paths: NodePaths) -> str:
    """The line for a plugins dir that is not there: most likely devctl looks at the wrong root.

    One sentence for every command (``watch``, ``call``, the read commands), so
    that a wrong ``--root`` reads the same whichever command met it.
    """
    return f"{paths.plugins_dir} does not exist: is this a node? --root/--kubelet-dir"
