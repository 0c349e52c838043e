"""Every path devctl reads, resolved in one place: flag, then environment, then /host, then default.

The device-plugins directory is hard-coded in the kubelet
(pkg/kubelet/apis/deviceplugin/v1beta1/constants.go), so it does not follow
``--kubelet-dir``; the pod-resources socket and the plugin registry do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from devctl.model import NodePaths

ENV_ROOT = "DEVCTL_ROOT"
ENV_KUBELET_DIR = "DEVCTL_KUBELET_DIR"
ENV_PLUGINS_DIR = "DEVCTL_PLUGINS_DIR"
ENV_POD_RESOURCES = "DEVCTL_POD_RESOURCES"
ENV_SYSFS = "DEVCTL_SYSFS"
ENV_POD_LOGS = "DEVCTL_POD_LOGS"
ENV_PROC = "DEVCTL_PROC"
ENV_RUNTIME_ENDPOINT = "DEVCTL_RUNTIME_ENDPOINT"

# The CRI sockets of containerd and CRI-O, in the order crictl tries them.
RUNTIME_SOCKETS = ("run/containerd/containerd.sock", "run/crio/crio.sock")
ENV_CDI_DIRS = "DEVCTL_CDI_DIRS"

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
    root: str | None = None,
    kubelet_dir: str | None = None,
    plugins_dir: str | None = None,
    pod_resources: str | None = None,
    sysfs: str | None = None,
    pod_logs: str | None = None,
    proc: str | None = None,
    runtime_endpoint: str | None = None,
    cdi_dirs: str | None = None,
    env: Mapping[str, str] | None = None,
    host_mount: str = HOST_MOUNT,
) -> NodePaths:
    """Resolve every node path; an explicit argument wins over the environment."""
    env = os.environ if env is None else env

    def pick(flag: str | None, var: str) -> str | None:
        return flag or env.get(var) or None

    root = pick(root, ENV_ROOT) or detect_root(host_mount)
    kubelet = pick(kubelet_dir, ENV_KUBELET_DIR) or _join(root, "var/lib/kubelet")
    return NodePaths(
        root=root,
        kubelet_dir=kubelet,
        plugins_dir=pick(plugins_dir, ENV_PLUGINS_DIR) or _join(root, "var/lib/kubelet/device-plugins"),
        pod_resources=socket_of(pick(pod_resources, ENV_POD_RESOURCES) or _join(kubelet, "pod-resources/kubelet.sock")),
        sysfs=pick(sysfs, ENV_SYSFS) or _join(root, "sys"),
        pod_logs=pick(pod_logs, ENV_POD_LOGS) or _join(root, "var/log/pods"),
        proc=pick(proc, ENV_PROC) or _join(root, "proc"),
        runtime_endpoint=pick(runtime_endpoint, ENV_RUNTIME_ENDPOINT) or default_runtime_endpoint(root),
        cdi_dirs=_cdi_dirs(pick(cdi_dirs, ENV_CDI_DIRS), root),
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
