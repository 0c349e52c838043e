"""The kubelet's per-pod log directories: which pods the node runs, read from one directory listing.

The kubelet names each ``<root>/var/log/pods/<namespace>_<name>_<uid>``
(pkg/kubelet/kuberuntime/helpers.go BuildPodLogsDirectory; namespaces and pod
names are DNS names, so ``_`` never occurs in them) and removes it when the pod
is cleaned up. Kept free of the model and of grpc: shell completion offers
namespaces and pod names from here at the cost of a listing, where a
pod-resources List would first load grpc (docs/performance.md);
devctl.node.identity joins UIDs to names with the same parser.
"""

from __future__ import annotations

import os
import re

# A namespace is a DNS-1123 label (at most 63 characters); a pod name a DNS-1123
# subdomain (at most 253) (k8s.io/apimachinery/pkg/util/validation/validation.go).
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_POD_NAME = re.compile(rf"(?=.{{1,253}}\Z){_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*")
# API-server UIDs are UUIDs; static pods get a hex hash of their manifest (pkg/kubelet/config/common.go).
_UID = re.compile(r"[A-Za-z0-9][-A-Za-z0-9]*")


def is_uid(name: str) -> bool:
    """Whether ``name`` can be a pod UID (a UUID, or a static pod's hash)."""
    return _UID.fullmatch(name) is not None


def parse_log_dir(name: str) -> tuple[str, str, str] | None:
    """(namespace, name, uid) of a log directory's name; None for a name the kubelet does not make."""
    parts = name.split("_")
    if len(parts) != 3:
        return None
    namespace, pod, uid = parts
    if _NAMESPACE.fullmatch(namespace) and _POD_NAME.fullmatch(pod) and is_uid(uid):
        return namespace, pod, uid
    return None


def logged_pods(pod_logs: str) -> list[tuple[str, str]]:
    """(namespace, name) of every pod with a log directory; raises OSError when the directory cannot be listed."""
    with os.scandir(pod_logs) as entries:
        parsed = (parse_log_dir(e.name) for e in entries if e.is_dir())
        return [(p[0], p[1]) for p in parsed if p is not None]


def logged_uid(pod_logs: str, namespace: str, name: str) -> str | None:
    """The pod's UID from its ``<pod-logs>/<ns>_<name>_<uid>`` directory (the newest), None when there is none."""
    try:
        names = os.listdir(pod_logs)
    except OSError:
        return None
    found = []
    for n in names:
        parsed = parse_log_dir(n)
        if parsed is not None and parsed[:2] == (namespace, name):
            try:
                found.append((os.path.getmtime(os.path.join(pod_logs, n)), parsed[2]))
            except OSError:
                continue
    return max(found)[1] if found else None
