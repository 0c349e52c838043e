"""The checks of the kubelet itself: its registration socket and its pod-resources socket."""

from __future__ import annotations

from devctl.analyze import PLUGINS_DIR_SOURCE, POD_RESOURCES
from devctl.analyze.checkup import ERROR, LEAVES_SOCKETS, WARNING, WRONG_PLACE, Checkup, denied
from devctl.model import ErrorKind, SocketStatus

# --- the kubelet --------------------------------------------------------------------------------


def kubelet_socket(c: Checkup) -> None:
    s = c.snapshot
    no_dir = c.explain(lambda e: e.source == PLUGINS_DIR_SOURCE and e.kind == ErrorKind.MISSING)
    status = s.kubelet_socket_status
    if status is None:  # a snapshot file from before devctl dialled the socket
        status = SocketStatus.LISTENING if s.kubelet_socket_present else SocketStatus.MISSING
    subject = s.paths.kubelet_socket
    if status == SocketStatus.LISTENING:
        return
    if status == SocketStatus.STALE:
        c.add(
            ERROR,
            "kubelet-socket-stale",
            subject,
            "kubelet.sock is a socket file with nothing listening on it: the kubelet is not running",
            f"{LEAVES_SOCKETS}; plugins register again when it creates kubelet.sock anew",
        )
        return
    if status == SocketStatus.PERMISSION_DENIED:
        c.permission_denied(subject)
        return
    if status != SocketStatus.MISSING:
        c.add(
            ERROR,
            "kubelet-socket-unreachable",
            subject,
            f"kubelet.sock does not take connections ({status.value})",
            "check the kubelet (systemctl status kubelet; journalctl -u kubelet)",
        )
        return
    if no_dir:
        message = f"the device-plugins directory {s.paths.plugins_dir} does not exist"
    else:
        message = "kubelet.sock is missing: the kubelet is not running, or is restarting"
    c.add(
        ERROR,
        "kubelet-socket-missing",
        s.paths.kubelet_socket,
        message,
        f"check the kubelet (systemctl status kubelet; journalctl -u kubelet); {WRONG_PLACE}",
    )


def pod_resources(c: Checkup) -> None:
    s = c.snapshot
    errors = c.explain(lambda e: e.source == POD_RESOURCES)
    if not errors:
        return
    error = errors[0]
    message, kind = error.message, error.kind
    subject = s.paths.pod_resources
    if denied(error):
        c.permission_denied(subject)
    elif kind == ErrorKind.STALE:
        c.add(
            ERROR,
            "pod-resources-stale",
            subject,
            f"{message}: the kubelet is not running, so who holds which device is unknown",
            LEAVES_SOCKETS,
        )
    elif kind == ErrorKind.RATE_LIMITED:
        # pkg/kubelet/apis/podresources/grpc/ratelimit.go: one token bucket for every client of the node.
        c.add(
            WARNING,
            "pod-resources-rate-limited",
            subject,
            f"{message}: the kubelet's limit (100 calls/s, shared by every client of the node) is spent",
            "another client polls pod-resources too fast (a monitoring agent, another devctl): slow it down, "
            "then run devctl doctor again",
        )
    elif s.pods is None or kind != ErrorKind.UNIMPLEMENTED:
        if kind == ErrorKind.MISSING:
            hint = f"the kubelet is down or runs with another --root-dir; {WRONG_PLACE}"
        elif kind == ErrorKind.TIMEOUT:
            hint = "the kubelet accepts connections but does not answer: stuck or overloaded (journalctl -u kubelet)"
        elif kind in (ErrorKind.WRONG_API, ErrorKind.MALFORMED, ErrorKind.NOT_A_SOCKET):
            hint = "something other than the kubelet's pod-resources server is at that path: check --pod-resources"
        else:
            hint = "check the kubelet's health (journalctl -u kubelet)"
        c.add(ERROR, "pod-resources-unreachable", subject, message, hint)
    else:
        c.add(
            WARNING,
            "pod-resources-limited",
            subject,
            message,
            "the kubelet lists pods but not what is allocatable (Kubernetes 1.20 and later do): the checks of "
            "allocatable devices, exclusive CPUs and NUMA alignment are incomplete",
        )
