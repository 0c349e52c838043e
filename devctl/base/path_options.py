"""The node paths a person can point devctl at, declared once: each one's name, flag, environment variable,
metavar and the words of its default.

The resolver (devctl.node.paths) takes these names as its keywords and reads
these variables; the CLI makes the root group's options and their copies after
each command from this table (devctl.cli.globalopts); the simulator's child
commands drop these variables. The flag and the variable follow from the name
(``kubelet_dir``: ``--kubelet-dir``, ``DEVCTL_KUBELET_DIR``), so no place spells
them again. Standard library only: ``devctl --help`` and completions read it
before the model is imported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PathOption:
    """One node path: ``name`` is the resolver's keyword and the field of devctl.model.NodePaths."""

    name: str
    metavar: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def envvar(self) -> str:
        return "DEVCTL_" + self.name.upper()


# In the order `devctl --help` lists them; the bracket says what the resolver takes when none is given.
PATH_OPTIONS = (
    PathOption("root", "DIR", "The host's filesystem root [default: / or /host]."),
    PathOption("kubelet_dir", "DIR", "The kubelet's --root-dir [<root>/var/lib/kubelet]."),
    PathOption("plugins_dir", "DIR", "Device plugin sockets [<root>/var/lib/kubelet/device-plugins]."),
    PathOption("pod_resources", "PATH", "The pod-resources socket [<kubelet-dir>/pod-resources/kubelet.sock]."),
    PathOption("sysfs", "DIR", "Host topology [<root>/sys]."),
    PathOption("pod_logs", "DIR", "Per-pod log dirs [<root>/var/log/pods]."),
    PathOption("proc", "DIR", "Processes, for who holds a device [<root>/proc]."),
    PathOption(
        "runtime_endpoint",
        "PATH",
        "The CRI socket [the first of <root>/run/containerd/containerd.sock, <root>/run/crio/crio.sock].",
    ),
    PathOption("cdi_dirs", "DIR[:DIR]", "CDI spec dirs, lowest priority first [<root>/etc/cdi:<root>/var/run/cdi]."),
)
PATH_NAMES = frozenset(option.name for option in PATH_OPTIONS)
ROOT = PATH_OPTIONS[0]
