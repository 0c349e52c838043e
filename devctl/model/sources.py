"""The sources ``collect`` reads, by name, and how one failed (``SourceError``; a socket's state: SocketStatus)."""

from __future__ import annotations

from dataclasses import dataclass

from devctl.base.errors import ErrorKind, Word
from devctl.model.serial import json_field


class Source(Word):
    """The name of a source ``collect`` reads, as a ``SourceError`` and a command's list of sources spell it.

    A source error's ``source`` is one of these, or a path (a socket, a file) where the source holds many.
    """

    # What a command asks ``collect`` for.
    POD_RESOURCES = "pod-resources"
    PLUGINS = "plugins"
    CHECKPOINT = "checkpoint"
    TOPOLOGY = "topology"
    IDENTITIES = "identities"
    DRA_CHECKPOINT = "dra-checkpoint"
    CDI = "cdi"
    # The DRA drivers alone, a part of PLUGINS: their registrations and endpoints, no device-plugin socket
    # (``devctl claims`` shows no device plugin, and probing every one of them cost it a tenth of its time).
    DRA_DRIVERS = "dra-drivers"
    # The pod-resources List alone, a part of POD_RESOURCES: the pods and their claims, no GetAllocatableResources
    # (``devctl claims`` shows no allocatable device; 2,000 of them cost it a twentieth of its time).
    POD_LIST = "pod-list"
    # Read only when a command asks for them (``devctl who``, ``devices -o wide``,
    # ``doctor``, ``snapshot``): a /proc scan is no price for ``ls`` to pay.
    PROCS = "procs"
    RUNTIME = "runtime"
    KUBELET_STATE = "kubelet-state"  # cpu_manager_state, memory_manager_state, config.yaml
    NODE_NAME = "node-name"  # the kubelet's node name, for doctor's hints: a walk of <proc> ``ls`` never pays for
    # What a source error names beside those: a plugins directory that could not be listed (so that the views
    # can tell the directory from the sockets in it), a device plugin's socket, a registration socket, a DRA
    # driver's endpoint (its name in ``subject``), and sysfs.
    PLUGINS_DIR = "plugins-dir"
    PLUGIN = "plugin"
    REGISTRY = "registry"
    DRA = "dra"
    SYSFS = "sysfs"


# The names as constants, as every module has imported them.
POD_RESOURCES = Source.POD_RESOURCES
PLUGINS = Source.PLUGINS
CHECKPOINT = Source.CHECKPOINT
TOPOLOGY = Source.TOPOLOGY
IDENTITIES = Source.IDENTITIES
DRA_CHECKPOINT = Source.DRA_CHECKPOINT
CDI = Source.CDI
ALL_SOURCES = frozenset({POD_RESOURCES, PLUGINS, CHECKPOINT, TOPOLOGY, IDENTITIES, DRA_CHECKPOINT, CDI})
DRA_DRIVERS = Source.DRA_DRIVERS
POD_LIST = Source.POD_LIST
PROCS = Source.PROCS
RUNTIME = Source.RUNTIME
HOLDER_SOURCES = frozenset({PROCS, RUNTIME, CHECKPOINT, IDENTITIES, DRA_CHECKPOINT, CDI})  # DRA: nodes via CDI
KUBELET_STATE = Source.KUBELET_STATE
NODE_NAME = Source.NODE_NAME
# What doctor and snapshot read beyond ALL_SOURCES.
EXTRA_SOURCES = HOLDER_SOURCES | {KUBELET_STATE, NODE_NAME}
PLUGINS_DIR_SOURCE = Source.PLUGINS_DIR


@dataclass(frozen=True)
class SourceError:
    """One source (socket, file, directory) that could not be read, as a one-line message and a kind."""

    source: str
    message: str
    kind: ErrorKind = ErrorKind.OTHER
    # What within the source failed, when the source holds many (a DRA driver's name for a ``dra``
    # endpoint error): checks tie an error to its object by this, never by the words of ``message``.
    subject: str | None = None
    # A refusal that came although devctl was root already (a scan's fds closed to it by capabilities or a user
    # namespace): then "run devctl as root" is no help. Set where the error is made (node/); None: not said.
    even_as_root: bool | None = json_field(omit_none=True)
