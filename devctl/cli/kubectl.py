"""``kubectl devctl NODE ARGS...``: devctl on a cluster's node, as a kubectl plugin (``kubectl-devctl`` on PATH).

kubectl runs any ``kubectl-NAME`` executable on PATH as ``kubectl NAME``. This
one runs ``devctl --root /host ARGS...`` on NODE where the host is mounted at
``/host``: in the devctl DaemonSet's own pod on that node (``kubectl exec``,
devctl's argv directly: no shell in the image). Only a pod of the DaemonSet's
namespace, whose controller is that DaemonSet (by its uid: a DaemonSet that
cannot be read is one line and no pod), running on NODE is used; any other pod, whatever its
labels, is not. With none, it says so and exits 1, unless ``--debug-image``
names a fully qualified image for a debug pod (``kubectl debug node/NODE
--profile=sysadmin``, which mounts the host's root at ``/host`` too).
``tui`` gets a terminal (``-it``). kubectl's exit status is passed on, and
every line kubectl writes on stderr is escaped before it reaches the terminal.

Only the standard library (and devctl.base.escape): this is a process of its own, started for every call.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.escape import escape

# The DaemonSet of deploy/daemonset.yaml: its namespace, name and container, and where it mounts the host.
NAMESPACE = "devctl"
DAEMONSET = "devctl-exporter"
CONTAINER = "exporter"
HOST_ROOT = "/host"
# devctl commands that need a terminal.
INTERACTIVE = frozenset({"tui", "demo"})
# Asking the API server for one object or one node's pods takes well under this; the process gets more.
GET_TIMEOUT = "20s"
GET_DEADLINE = 60.0
# kubectl's stderr is read in lines of at most this many bytes (a longer one is shown in pieces).
LINE_LIMIT = 64 * 1024

# RFC 1123: a label (namespaces) and a subdomain (nodes, pods, DaemonSets) as the API server checks them.
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_NAMESPACE = re.compile(_LABEL)
# An image reference with its registry (a host with a dot or a port, or localhost), a path, and a tag or digest.
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?P<registry>{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?)"
    rf"/{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?P<tag>:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?P<digest>@sha256:[0-9a-f]{64})?"
)

USAGE = f"""\
usage: kubectl devctl [--context NAME] [--kubeconfig FILE] [--namespace NS] [--daemonset NAME]
                      [--debug-image REGISTRY/IMAGE:TAG] NODE [DEVCTL ARGS...]

Runs `devctl --root {HOST_ROOT} ARGS...` on NODE in the devctl DaemonSet's own pod on that node
(kubectl exec). `kubectl devctl NODE tui` gets a terminal.

  -n, --namespace NS  the DaemonSet's namespace [{NAMESPACE}]
  --daemonset NAME    the DaemonSet's name [{DAEMONSET}]
  --debug-image IMAGE where the DaemonSet runs no pod on NODE, run devctl in a debug pod of this
                      fully qualified image instead (kubectl debug node/NODE --profile=sysadmin)
  $DEVCTL_KUBECTL     the kubectl to run [kubectl]
"""


class UsageError(DevctlError):
    pass


class KubectlFailed(DevctlError):
    """kubectl could not be run or could not answer; the message is one line, escaped."""


@dataclass(frozen=True)
class Invocation:
    """What the user asked: kubectl's own flags, the node, the DaemonSet, a debug pod's image, devctl's arguments."""

    kubectl_flags: tuple[str, ...]
    node: str
    args: tuple[str, ...]
    namespace: str = NAMESPACE
    daemonset: str = DAEMONSET
    debug_image: str | None = None

    @property
    def interactive(self) -> bool:
        return any(a in INTERACTIVE for a in self.args if not a.startswith("-"))


def is_node_name(name: str) -> bool:
    """A Kubernetes node name: an RFC 1123 subdomain (lower-case alphanumerics, '-', '.'), at most 253 characters."""
    return len(name) <= 253 and _SUBDOMAIN.fullmatch(name) is not None


def is_qualified_image(image: str) -> bool:
    """``registry.example/path/devctl:1.2`` or ``…@sha256:…``: a registry host, a path, a tag or digest."""
    m = _IMAGE.fullmatch(image)
    if m is None or len(image) > 512 or not (m["tag"] or m["digest"]):
        return False
    registry = m["registry"]
    return "." in registry or ":" in registry or registry == "localhost"


def parse(argv: Sequence[str]) -> Invocation:
    """Our options up to NODE; everything after NODE is devctl's."""
    flags: list[str] = []
    namespace, daemonset, image = NAMESPACE, DAEMONSET, None
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        name, eq, value = option.partition("=")
        if name == "-n":
            name = "--namespace"
        if name not in ("--context", "--kubeconfig", "--namespace", "--daemonset", "--debug-image"):
            raise UsageError(f"unknown option {escape(option)} (devctl's options go after NODE)")
        if not eq:
            if not rest:
                raise UsageError(f"{name} needs a value")
            value = rest.pop(0)
        if name == "--namespace":
            if len(value) > 63 or not _NAMESPACE.fullmatch(value):
                raise UsageError(f"--namespace '{escape(value)}' is not a namespace name")
            namespace = value
        elif name == "--daemonset":
            if not is_node_name(value):  # the same rule: an RFC 1123 subdomain
                raise UsageError(f"--daemonset '{escape(value)}' is not a DaemonSet name")
            daemonset = value
        elif name == "--debug-image":
            if not is_qualified_image(value):
                raise UsageError(
                    f"--debug-image '{escape(value)}' is not a fully qualified image (REGISTRY/PATH:TAG or @sha256:…)"
                )
            image = value
        else:
            if not value:
                raise UsageError(f"{name} needs a value")
            flags.append(f"{name}={value}")  # one argument: a value never reads as an option of kubectl's
    if not rest:
        raise UsageError("which node? kubectl devctl NODE [DEVCTL ARGS...]")
    node = rest.pop(0)
    if not is_node_name(node):
        raise UsageError(f"'{escape(node)}' is not a node name (lower-case letters, digits, '-' and '.')")
    return Invocation(tuple(flags), node, tuple(rest), namespace, daemonset, image)


def _last_line(stderr: str | None) -> str:
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    return escape(lines[-1].strip()) if lines else "no reason given"


def _get_json(kubectl: Sequence[str], inv: Invocation, what: Sequence[str]) -> dict[str, Any]:
    """``kubectl get WHAT -n NS -o json``'s object; KubectlFailed with one escaped line if there is none."""
    argv = [*kubectl, *inv.kubectl_flags, "get", *what, f"--namespace={inv.namespace}", "-o", "json"]
    try:
        p = subprocess.run(
            [*argv, f"--request-timeout={GET_TIMEOUT}"],
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=GET_DEADLINE,
        )
    except FileNotFoundError:
        raise KubectlFailed(f"{escape(kubectl[0])}: not found on PATH") from None
    except PermissionError:
        raise KubectlFailed(f"{escape(kubectl[0])}: permission denied") from None
    except subprocess.TimeoutExpired:
        raise KubectlFailed(f"kubectl get {' '.join(what)}: no answer in {GET_DEADLINE:.0f} s") from None
    if p.returncode != 0:
        raise KubectlFailed(_last_line(p.stderr))
    try:
        data = json.loads(p.stdout)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise KubectlFailed(f"kubectl get {' '.join(what)} printed no JSON object")
    return data


def _field(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def daemonset_uid(kubectl: Sequence[str], inv: Invocation) -> str:
    """The DaemonSet's uid; KubectlFailed when it cannot be read.

    Its pods are told from look-alikes by that uid in their controller reference (a pod's owner name
    alone can be written by anyone who may create pods in the namespace), so without it no pod is chosen.
    """
    what = f"daemonset {inv.namespace}/{inv.daemonset}"
    try:
        ds = _get_json(kubectl, inv, ["daemonset", inv.daemonset])
    except KubectlFailed as e:
        raise KubectlFailed(f"cannot read {what} ({e}), so its pods cannot be told from look-alikes") from None
    meta = _field(ds, "metadata")
    uid = _field(meta, "uid")
    if _field(meta, "name") != inv.daemonset or _field(meta, "namespace") != inv.namespace:
        raise KubectlFailed(f"kubectl get {what} answered another object")
    if not isinstance(uid, str) or not uid:
        raise KubectlFailed(f"{what} has no uid")
    return uid


def is_daemonset_pod(pod: Any, inv: Invocation, uid: str) -> bool:
    """The pod is the DaemonSet's own, running on NODE: its namespace, controlled by it, not being deleted."""
    meta = _field(pod, "metadata")
    name = _field(meta, "name")
    if not isinstance(name, str) or not is_node_name(name):
        return False
    if _field(meta, "namespace") != inv.namespace or _field(meta, "deletionTimestamp"):
        return False
    if _field(pod, "spec", "nodeName") != inv.node or _field(pod, "status", "phase") != "Running":
        return False
    owners = _field(meta, "ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if (
            isinstance(owner, Mapping)
            and owner.get("controller") is True
            and owner.get("kind") == "DaemonSet"
            and str(owner.get("apiVersion", "")).partition("/")[0] == "apps"
            and owner.get("name") == inv.daemonset
            and owner.get("uid") == uid
        ):
            return True
    return False


def daemonset_pod(kubectl: Sequence[str], inv: Invocation) -> str | None:
    """The name of the DaemonSet's running pod on the node, or None; KubectlFailed when the pods cannot be listed."""
    uid = daemonset_uid(kubectl, inv)
    pods = _get_json(kubectl, inv, ["pods", "--field-selector", f"spec.nodeName={inv.node}"])
    items = pods.get("items")
    if not isinstance(items, list):
        raise KubectlFailed("kubectl get pods printed no pod list")
    names = sorted(pod["metadata"]["name"] for pod in items if is_daemonset_pod(pod, inv, uid))
    return names[0] if names else None


def command(kubectl: Sequence[str], inv: Invocation, pod: str | None) -> list[str]:
    """The kubectl command that runs devctl (its argv, no shell) in the DaemonSet's pod, or in a debug pod."""
    devctl = ["devctl", "--root", HOST_ROOT, *inv.args]
    tty = ["-it"] if inv.interactive else []
    if pod is not None:
        return [*kubectl, *inv.kubectl_flags, "exec", *tty, "-n", inv.namespace, pod, "-c", CONTAINER, "--", *devctl]
    if inv.debug_image is None:
        raise ValueError("no pod and no debug image")
    attach = tty or ["--attach=true"]
    return [
        *kubectl,
        *inv.kubectl_flags,
        "debug",
        f"node/{inv.node}",
        "--profile=sysadmin",
        f"--image={inv.debug_image}",
        "--quiet",
        *attach,
        "--",
        *devctl,
    ]


def run_escaped(argv: Sequence[str]) -> int:
    """Run kubectl with stdin and stdout the user's own and each line of its stderr escaped; its exit status."""
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        while True:
            raw = proc.stderr.readline(LINE_LIMIT)
            if not raw:
                break
            line = raw.decode("utf-8", "surrogateescape")
            line = line[:-1] if line.endswith("\n") else line
            line = line[:-1] if line.endswith("\r") else line
            sys.stderr.write(escape(line) + "\n")
            sys.stderr.flush()
        return proc.wait()
    except KeyboardInterrupt:
        # The terminal's Ctrl-C reached kubectl too: give it a moment to restore the terminal and end.
        try:
            proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
        return 130
    finally:
        proc.stderr.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    try:
        inv = parse(args)
    except UsageError as e:
        print(f"kubectl devctl: {e}", file=sys.stderr)
        sys.stderr.write(USAGE)
        return 2
    kubectl = [os.environ.get("DEVCTL_KUBECTL") or "kubectl"]
    try:
        pod = daemonset_pod(kubectl, inv)
    except KubectlFailed as e:
        print(
            f"kubectl devctl: cannot list the pods of {inv.namespace}/{inv.daemonset} on {inv.node}: {e}",
            file=sys.stderr,
        )
        return 3
    except KeyboardInterrupt:
        return 130
    where = f"DaemonSet {inv.namespace}/{inv.daemonset}"
    if pod is None:
        if inv.debug_image is None:
            print(
                f"kubectl devctl: no running pod of {where} on node {inv.node}"
                " (--debug-image REGISTRY/IMAGE:TAG runs devctl in a debug pod instead)",
                file=sys.stderr,
            )
            return 1
        print(
            f"kubectl devctl: no running pod of {where} on node {inv.node}: a debug pod of {inv.debug_image}"
            " (kubectl leaves it behind: kubectl delete pod it when done)",
            file=sys.stderr,
        )
    try:
        return run_escaped(command(kubectl, inv, pod))
    except OSError as e:
        print(f"kubectl devctl: {escape(kubectl[0])}: {escape(e.strerror or str(e))}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
