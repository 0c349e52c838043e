"""Pod UID to namespace and name, from what the kubelet leaves on the node's disk.

The checkpoint names pods by UID and pod-resources by namespace and name, and
the node offers no API that joins them without the API server. The kubelet's
per-pod log directories do: it names each ``<namespace>_<name>_<uid>``
(pkg/kubelet/kuberuntime/helpers.go BuildPodLogsDirectory; namespaces and pod
names are DNS names, so ``_`` never occurs in them). Its per-pod directories
``<root-dir>/pods/<uid>`` (pkg/kubelet/kubelet_getters.go getPodDir) outlive the
logs and at least say that a UID still exists.
"""

from __future__ import annotations

import os

from devctl.model import ErrorKind, PodIdentity, SourceError
from devctl.node.podlogs import is_uid, parse_log_dir


def read_pod_identities(pod_logs: str, kubelet_dir: str) -> tuple[tuple[PodIdentity, ...], tuple[SourceError, ...]]:
    """Every pod the node's disk knows: named ones from the log directories, then UIDs known only by their pod dir.

    A UID found only under ``<kubelet_dir>/pods`` comes back as
    ``PodIdentity(uid, "", "")``: the pod exists, its name is unknown. A
    missing directory is not an error (a node without pods, or a kubelet with
    another root); one that cannot be read becomes a SourceError. Never raises.
    """
    errors: list[SourceError] = []
    named = sorted(
        (p for p in map(_from_log_dir, _subdirs(pod_logs, errors)) if p is not None),
        key=lambda p: (p.namespace, p.name, p.uid),
    )
    known = {p.uid for p in named}
    unnamed = [
        PodIdentity(uid, "", "")
        for uid in sorted(_subdirs(os.path.join(kubelet_dir, "pods"), errors))
        if is_uid(uid) and uid not in known
    ]
    return (*named, *unnamed), tuple(errors)


def _from_log_dir(name: str) -> PodIdentity | None:
    parsed = parse_log_dir(name)
    if parsed is None:
        return None
    namespace, pod, uid = parsed
    return PodIdentity(uid=uid, namespace=namespace, name=pod)


def _subdirs(path: str, errors: list[SourceError]) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries if e.is_dir()]
    except FileNotFoundError:
        return []
    except PermissionError:
        errors.append(SourceError(path, "permission denied", ErrorKind.PERMISSION_DENIED))
    except OSError as err:
        errors.append(SourceError(path, (err.strerror or str(err)).lower(), ErrorKind.of_oserror(err)))
    return []
