"""A few examples at the end of each command's ``--help``, as kubectl's help ends.

One table for every command, keyed by the command as typed after ``devctl``:
a new command adds its lines here, and devctl.cli.globalopts shows them as the
command's epilog. Each line is a command a person can paste, then ``#`` and
what it answers.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "ls": (
        "devctl ls                      # every extended resource of this node",
        "devctl ls nvidia.com/gpu -o wide  # one resource, every column",
        "devctl ls --root /host -o json # from a debug pod with the host at /host",
    ),
    "devices": (
        "devctl devices nvidia.com/gpu  # each GPU: health, state, NUMA, holder",
        "devctl devices nvidia.com/gpu GPU-0  # one device",
        "devctl devices -o wide         # with state, PCI address, model, driver",
        "devctl devices -q              # device IDs only",
    ),
    "pods": (
        "devctl pods                    # who holds which device, every namespace",
        "devctl pods -n ml              # one namespace",
        "devctl pods --from node.json   # from a snapshot taken elsewhere",
    ),
    "get": (
        "devctl get train-0 -n ml       # one pod's devices, CPUs, memory",
        "devctl get ml/train-0 -o yaml  # NAMESPACE/NAME, as devctl prints holders",
    ),
    "topo": (
        "devctl topo                    # NUMA nodes: CPUs, memory, devices",
        "devctl topo -o json            # the same as a document",
        "devctl topo --pci              # and the PCIe path between GPUs and NICs",
    ),
    "plugins": (
        "devctl plugins                 # every socket: resource, status, latency",
        "devctl plugins -o wide         # with full paths, kind, options, registry",
    ),
    "checkpoint": (
        "devctl checkpoint              # the device manager's checkpoint, decoded",
        "devctl checkpoint -o json      # its entries as a document",
    ),
    "snapshot": (
        "devctl snapshot -f node.json   # every source at once, to read elsewhere",
        "devctl --from node.json doctor # then any read command on it",
    ),
    "doctor": (
        "devctl doctor                  # every check; exit 1 on an error finding",
        "devctl doctor -o json          # findings with their codes and hints",
    ),
    "call": (
        "devctl call nvidia.com/gpu list          # the plugin's first device list",
        "devctl call nvidia.com/gpu options       # GetDevicePluginOptions",
        "devctl call --socket x.sock list         # a socket the kubelet may not know",
        "devctl call --dra gpu.example.com health # one DRA health stream message",
    ),
    "watch": (
        "devctl watch                   # every plugin and DRA driver, until Ctrl-C",
        "devctl watch nvidia.com/gpu    # one resource",
        "devctl watch -o json --count 5 # five events as JSON lines",
    ),
    "plugin": (
        "devctl plugin serve --resource example.com/gpu --count 4  # serve here",
        "devctl plugin set-health example.com/gpu gpu-1 unhealthy  # another shell",
    ),
    "plugin serve": (
        "devctl plugin serve --resource example.com/gpu --count 4",
        "devctl plugin serve --config gpu.yaml --no-register",
    ),
    "plugin set-health": ("devctl plugin set-health example.com/gpu gpu-1 unhealthy",),
    "plugin add": ("devctl plugin add example.com/gpu gpu-8@1",),
    "plugin remove": ("devctl plugin remove example.com/gpu gpu-8",),
    "sim": (
        "devctl sim                     # prints export DEVCTL_ROOT=...; until Ctrl-C",
        "devctl sim -- devctl ls        # one command against a fresh simulated node",
        "devctl sim --scenario node.yaml --root /tmp/node",
    ),
    "sim restart-kubelet": ("devctl sim restart-kubelet",),
    "sim delete-pod": ("devctl sim delete-pod ml/train-0",),
    "sim add-pod": ("devctl sim add-pod pod.yaml       # one pod in the scenario's pods: format",),
    "tui": (
        "devctl tui                     # this node, live",
        "devctl tui --from node.json    # a snapshot taken elsewhere",
    ),
    "demo": ("devctl demo                    # the TUI on a simulated node",),
    "completion": (
        "devctl completion bash > /etc/bash_completion.d/devctl",
        'devctl completion zsh > "${fpath[1]}/_devctl"',
    ),
    "exporter": ("devctl exporter --listen :9477  # on every address (default: 127.0.0.1 only)",),
    "fleet": (
        "devctl fleet --prometheus http://prom:9090 ls      # every node's resources",
        "devctl fleet --prometheus http://prom:9090 doctor  # every node's findings",
    ),
    "fleet ls": ("devctl fleet --prometheus http://prom:9090 ls",),
    "fleet devices": ("devctl fleet --prometheus http://prom:9090 devices",),
    "fleet doctor": ("devctl fleet --prometheus http://prom:9090 doctor",),
    "version": ("devctl version",),
    "claims": (
        "devctl claims                  # every DRA claim: state, devices, pods",
        "devctl claims -n ml -o wide    # one namespace, with CDI names",
    ),
    "cdi": (
        "devctl cdi                     # CDI specs and every name in use, resolved",
        "devctl cdi nvidia.com/gpu=0    # one name: device nodes, PCI, NUMA",
    ),
    "hw": (
        "devctl hw                      # physical devices, logical ones on each",
        "devctl hw 3b:00.0 -o json      # one PCI function: who holds what on it",
    ),
    "who": (
        "devctl who nvidia.com/gpu      # processes holding each GPU, by pod",
        "devctl who /dev/nvidia3        # who has this device node open",
    ),
    "fit": (
        "devctl fit nvidia.com/gpu=2 cpu=8 memory=32Gi  # would it be admitted now",
        "devctl fit -f pod.yaml -o json # a whole Pod: init containers, sidecars",
        "devctl fit nvidia.com/gpu=4 cpu=16 --policy single-numa-node  # what if",
    ),
    "why": (
        "devctl why -n ml train-0       # one verdict for a stuck pod, with evidence",
        "devctl why ml/train-0 -o json  # the same for a script",
    ),
    "events": (
        "devctl events --since 2h       # the node's device history, the kernel's too",
        "devctl events 3b:00.0 -w       # one PCI address, then follow",
    ),
    "record": (
        "devctl record                  # keep the node journal (the DaemonSet does)",
        "devctl record --max-size 16Mi  # a smaller journal, oldest records dropped",
    ),
}


def epilog(command_path: str) -> str | None:
    """The examples of a command as click shows them: a block it does not rewrap (``\\b``)."""
    lines = EXAMPLES.get(command_path)
    if not lines:
        return None
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
