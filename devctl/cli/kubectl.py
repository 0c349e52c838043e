"""``kubectl devctl NODE ARGS...``: devctl on a cluster's node, as a kubectl plugin (``kubectl-devctl`` on PATH).

kubectl runs any ``kubectl-NAME`` executable on PATH as ``kubectl NAME``. This
one runs ``devctl --root /host ARGS...`` on NODE where the host is mounted at
``/host``: in the devctl DaemonSet's pod on that node (``kubectl exec``), or,
when none runs there, in a debug pod (``kubectl debug node/NODE
--profile=sysadmin``, which mounts the host's root at ``/host`` too).
``tui`` gets a terminal (``-it``). kubectl's exit status is passed on.

Only the standard library: this is a process of its own, started for every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from devctl import __version__

# The DaemonSet of deploy/daemonset.yaml: its pods' label and container, and where it mounts the host.
DAEMONSET_LABEL = "app.kubernetes.io/name=devctl-exporter"
CONTAINER = "exporter"
HOST_ROOT = "/host"
DEFAULT_IMAGE = f"devctl:{__version__}"
# devctl commands that need a terminal.
INTERACTIVE = frozenset({"tui", "demo"})
# Asking the API server for one node's pod takes well under this.
GET_TIMEOUT = "20s"

USAGE = f"""\
usage: kubectl devctl [--context NAME] [--kubeconfig FILE] [--image IMAGE] NODE [DEVCTL ARGS...]

Runs `devctl --root {HOST_ROOT} ARGS...` on NODE: in the devctl DaemonSet's pod on that node
(kubectl exec), else in a debug pod (kubectl debug node/NODE --profile=sysadmin --image IMAGE).
`kubectl devctl NODE tui` gets a terminal.

  --image IMAGE   image of the debug pod [$DEVCTL_IMAGE, else {DEFAULT_IMAGE}]
  $DEVCTL_KUBECTL the kubectl to run [kubectl]
"""


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Invocation:
    """What the user asked: kubectl's own flags, the node, the image for a debug pod, devctl's arguments."""

    kubectl_flags: tuple[str, ...]
    node: str
    image: str
    args: tuple[str, ...]

    @property
    def interactive(self) -> bool:
        return any(a in INTERACTIVE for a in self.args if not a.startswith("-"))


def parse(argv: Sequence[str], env: dict[str, str] | os._Environ[str] = os.environ) -> Invocation:
    """Our options up to NODE; everything after NODE is devctl's."""
    flags: list[str] = []
    image = env.get("DEVCTL_IMAGE") or DEFAULT_IMAGE
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        name, eq, value = option.partition("=")
        if name in ("--context", "--kubeconfig", "--image"):
            if not eq:
                if not rest:
                    raise UsageError(f"{name} needs a value")
                value = rest.pop(0)
            if name == "--image":
                image = value
            else:
                flags += [name, value]
        else:
            raise UsageError(f"unknown option {option} (devctl's options go after NODE)")
    if not rest:
        raise UsageError("which node? kubectl devctl NODE [DEVCTL ARGS...]")
    node = rest.pop(0)
    return Invocation(tuple(flags), node, image, tuple(rest))


def daemonset_pod(kubectl: Sequence[str], inv: Invocation) -> tuple[str, str] | None:
    """(namespace, name) of the running DaemonSet pod on the node, or None; raises OSError or CalledProcessError."""
    out = subprocess.run(
        [
            *kubectl,
            *inv.kubectl_flags,
            "get",
            "pods",
            "--all-namespaces",
            "-l",
            DAEMONSET_LABEL,
            "--field-selector",
            f"spec.nodeName={inv.node}",
            "-o",
            "json",
            f"--request-timeout={GET_TIMEOUT}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    try:
        items = json.loads(out).get("items", [])
    except (ValueError, AttributeError):
        return None
    for pod in items:
        running = pod.get("status", {}).get("phase") == "Running" and not pod.get("metadata", {}).get(
            "deletionTimestamp"
        )
        if running:
            return pod["metadata"]["namespace"], pod["metadata"]["name"]
    return None


def command(kubectl: Sequence[str], inv: Invocation, pod: tuple[str, str] | None) -> list[str]:
    """The kubectl command that runs devctl on the node: exec in the DaemonSet's pod, or a debug pod."""
    devctl = ["devctl", "--root", HOST_ROOT, *inv.args]
    tty = ["-it"] if inv.interactive else []
    if pod is not None:
        namespace, name = pod
        return [*kubectl, *inv.kubectl_flags, "exec", *tty, "-n", namespace, name, "-c", CONTAINER, "--", *devctl]
    attach = tty or ["--attach=true"]
    return [
        *kubectl,
        *inv.kubectl_flags,
        "debug",
        f"node/{inv.node}",
        "--profile=sysadmin",
        f"--image={inv.image}",
        "--quiet",
        *attach,
        "--",
        *devctl,
    ]


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
    except FileNotFoundError:
        print(f"kubectl devctl: {kubectl[0]}: not found on PATH", file=sys.stderr)
        return 3
    except subprocess.CalledProcessError as e:
        reason = (e.stderr or "").strip().splitlines()
        print(f"kubectl devctl: cannot list pods on {inv.node}: {reason[-1] if reason else e}", file=sys.stderr)
        return 3
    try:
        return subprocess.run(command(kubectl, inv, pod)).returncode
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
