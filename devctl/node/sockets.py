"""Which sockets on a node are plugins, and which of them serves which resource: one answer for everyone.

The kubelet never says which socket serves which resource (Register's endpoint
is kept in memory only), so every view, ``devctl watch`` and the guard of
``devctl plugin serve`` ask the same question, and must get the same answer:
a guard that answers it worse than the views registers a debugging plugin over
a live one (kubelet-contract.md, "Same resource registered twice").

Listing. The device-plugins dir holds the plugins' sockets, symlinks to sockets
included (the kubelet dials whatever the endpoint name leads to), but not the
kubelet's own ``kubelet.sock``; ``plugins_registry/`` is walked recursively as
the kubelet's plugin watcher walks it (pkg/kubelet/pluginmanager/pluginwatcher/
plugin_watcher.go: every unix socket below it, names starting with ``.``
ignored, symlinked directories not followed). Paths under ``--root`` are read
as the node reads them: a symlink's absolute target and a registry endpoint
are node paths, found under the root, and nothing outside the root is dialled.

Resolving. A socket serves R when its registration says so (a registry
``GetInfo`` of type DevicePlugin, or a running devctl plugin's control
socket), or when its full device list, of any health, matches the IDs the
kubelet ties to R. The kubelet's own lists miss exactly the devices that
matter here: ``GetAllocatableResources`` and the checkpoint's
``RegisteredDevices`` hold healthy devices only, so allocations (pod-resources
and checkpoint entries) count too. A symlink and its target are one plugin.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from devctl.base.errors import DevctlError
from devctl.model import (
    DEVICE_PLUGIN_TYPE,
    AllocatableResources,
    Checkpoint,
    DeviceList,
    NodePaths,
    PluginProbe,
    PluginStatus,
    PodResources,
    RegistryInfo,
)

KUBELET_SOCKET = "kubelet.sock"
# Symlinks followed in one path before it is given up as a loop (Linux's own limit).
_MAX_LINKS = 40


# The longest path the kernel takes (bytes, its NUL included): a longer one names no file.
PATH_MAX = 4096
# How much of a hostile string a message shows (it is escaped where it is shown).
_SHOWN = 120


class OutsideRoot(DevctlError, ValueError):
    """A path that leads outside ``--root``: refused, never dialled. The message is one line."""


class NotAPath(OutsideRoot):
    """A string that names no file the node could have (a NUL, too long, not UTF-8, a URL): refused, never dialled.

    An OutsideRoot, so every caller that refuses a path outside the root
    refuses this one the same way: one failure of the socket that gave it,
    never of the whole source (a NUL reaching ``os.lstat`` was a ValueError
    that failed every plugin at once).
    """


def shown(text: str) -> str:
    """``text`` cut to a length a message line can carry, saying how long it was."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}… ({len(text)} characters)"


def _why_not_a_path(path: str, *, wire: bool = False) -> str | None:
    """Why ``path`` can name no file, or None. ``wire``: a string from a socket, where no undecodable byte can be.

    A name read from a directory may hold undecodable bytes (as surrogate
    escapes, which ``os.fsencode`` takes back); a string from a plugin cannot.
    """
    if "\0" in path:
        return "holds a NUL byte"
    try:
        size = len(path.encode("utf-8") if wire else os.fsencode(path))
    except UnicodeEncodeError:
        return "is not UTF-8"
    if size >= PATH_MAX:
        return f"is {size} bytes long, longer than any path ({PATH_MAX - 1})"
    return None


def _check_path(path: str) -> None:
    why = _why_not_a_path(path)
    if why is not None:
        raise NotAPath(f"{shown(path)}: the path {why}")


@dataclass(frozen=True)
class SocketFile:
    """One plugin socket as listed (``path``) and the file it is (``real``: symlinks followed inside the root)."""

    path: str
    real: str


# --- paths under the root -------------------------------------------------------------------------


def node_path(root: str, path: str) -> str:
    """The node's own name for ``path``, a file under ``root``: ``<root>/var/x`` is ``/var/x``."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == os.curdir:
        return os.sep
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise OutsideRoot(f"{path}: outside the root {root}")
    return os.sep + rel


def in_root(root: str, path: str) -> str:
    """The file under ``root`` that the node path ``path`` names, every symlink followed as the node would.

    An absolute symlink target is a node path too, so it is read under the root
    (as ``openat2(RESOLVE_IN_ROOT)`` would); a ``..`` that climbs above the root
    raises OutsideRoot. A missing component ends the walk: the rest is joined
    as it is, and dialling it later says "no such socket".
    """
    _check_path(path)
    root = os.path.abspath(root)
    pending = [c for c in path.split(os.sep) if c and c != os.curdir]
    pending.reverse()
    done: list[str] = []
    links = 0
    while pending:
        name = pending.pop()
        if name == os.pardir:
            if not done:
                raise OutsideRoot(f"{path}: leads outside the root {root}")
            done.pop()
            continue
        here = os.path.join(root, *done, name)
        try:
            is_link = stat.S_ISLNK(os.lstat(here).st_mode)
        except OSError:
            done.append(name)
            continue
        if not is_link:
            done.append(name)
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OutsideRoot(f"{path}: too many levels of symbolic links")
        target = os.readlink(here)
        if target.startswith(os.sep):
            done = []
        pending.extend(reversed([c for c in target.split(os.sep) if c and c != os.curdir]))
    return os.path.join(root, *done)


def real_path(root: str | None, path: str) -> str:
    """``path`` (a file under ``root``) with its symlinks followed inside the root; raises OutsideRoot.

    Without a root, or for a path that is not under it (a directory given by
    its own flag, such as ``--plugins-dir``, names a file of this machine),
    the OS follows the symlinks. Raises NotAPath for a string that is no path.
    """
    _check_path(path)
    if root is None:
        return os.path.realpath(path)
    try:
        name = node_path(root, path)
    except OutsideRoot:
        return os.path.realpath(path)
    return in_root(root, name)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


# --- listing --------------------------------------------------------------------------------------


def _socket_file(root: str | None, path: str) -> SocketFile | None:
    try:
        real = real_path(root, path)
    except (OutsideRoot, OSError):
        return None
    return SocketFile(path, real) if _is_socket(real) else None


def _in_dir(root: str | None, directory: str, names: Iterable[str]) -> list[SocketFile]:
    """The sockets among ``names`` in ``directory``: the directory is resolved once, each name with one lstat."""
    try:
        base = real_path(root, directory)
    except (OutsideRoot, OSError):
        return []
    found = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode):
            found.append(SocketFile(path, os.path.join(base, name)))
        elif stat.S_ISLNK(mode) and (linked := _socket_file(root, path)) is not None:
            found.append(linked)
    return found


def _one_per_file(found: Iterable[SocketFile]) -> list[SocketFile]:
    """A symlink and its target are one plugin: keep the target when it is listed too, else the first name."""
    by_real: dict[str, SocketFile] = {}
    for s in found:
        kept = by_real.get(s.real)
        if kept is None or (s.path == s.real and kept.path != kept.real):
            by_real[s.real] = s
    return sorted(by_real.values(), key=lambda s: s.path)


def plugin_sockets(plugins_dir: str, root: str | None = None) -> list[SocketFile]:
    """Every plugin socket in the device-plugins dir; raises OSError when the dir cannot be listed.

    Unix sockets and symlinks to them, one per socket file; not ``kubelet.sock``
    (nor a link to it), not names starting with ``.``.
    """
    with os.scandir(plugins_dir) as entries:
        names = sorted(e.name for e in entries if not e.name.startswith("."))
    kubelet = _socket_file(root, os.path.join(plugins_dir, KUBELET_SOCKET))
    found = _in_dir(root, plugins_dir, (n for n in names if n != KUBELET_SOCKET))
    return _one_per_file(s for s in found if kubelet is None or s.real != kubelet.real)


def registry_sockets(registry_dir: str, root: str | None = None) -> list[SocketFile]:
    """Every socket below ``plugins_registry/``, walked as the kubelet's plugin watcher walks it.

    Raises OSError when the dir itself cannot be listed; a subdirectory that
    cannot be is skipped, as the watcher skips it.
    """
    os.scandir(registry_dir).close()  # the top dir's failure is the caller's to report
    found = []
    for directory, dirs, files in os.walk(registry_dir):
        dirs.sort()
        found += _in_dir(root, directory, sorted(n for n in files if not n.startswith(".")))
    return _one_per_file(found)


def registry_endpoint(paths: NodePaths, socket: str, info: RegistryInfo) -> str:
    """The file under the root that a registry socket's ``endpoint`` names; raises OutsideRoot (or NotAPath).

    Empty: the registration socket serves the plugin itself. Absolute: a node
    path, read under the root (``/var/lib/kubelet/plugins/x/dra.sock`` is
    ``<root>/var/lib/kubelet/plugins/x/dra.sock``). Relative: relative to the
    device-plugins dir, as RegisterRequest's endpoint is. A string that is no
    path (a NUL, longer than PATH_MAX, not UTF-8, a ``unix:`` target) is
    NotAPath: the one registration fails, never the source.
    """
    endpoint = info.endpoint
    if not endpoint:
        return real_path(paths.root, socket)
    why = _why_not_a_path(endpoint, wire=True)
    if why is None and endpoint.startswith("unix:"):
        why = "is a gRPC target (unix:), not the path the kubelet dials"
    if why is not None:
        raise NotAPath(f"{socket}: endpoint {shown(endpoint)} {why}; not dialled")
    if not endpoint.startswith(os.sep):
        try:
            endpoint = os.path.join(node_path(paths.root, paths.plugins_dir), endpoint)
        except OutsideRoot:  # a --plugins-dir outside the root: this machine's own path
            return os.path.realpath(os.path.join(paths.plugins_dir, endpoint))
    try:
        return in_root(paths.root, endpoint)
    except NotAPath as e:  # joined to the plugins dir, longer than any path
        raise NotAPath(f"{socket}: endpoint {e}; not dialled") from None
    except OutsideRoot:
        message = f"{socket}: endpoint {shown(endpoint)} is outside the root {paths.root}; not dialled"
        raise OutsideRoot(message) from None


def dial_path(paths: NodePaths, probe: PluginProbe) -> str | None:
    """The socket that serves DevicePlugin for ``probe``; None for a CSI/DRA registration or one outside the root."""
    try:
        if probe.registry is None:
            return real_path(paths.root, probe.socket)
        if probe.registry.type != DEVICE_PLUGIN_TYPE:
            return None
        return registry_endpoint(paths, probe.socket, probe.registry)
    except (OutsideRoot, OSError):
        return None


# --- resolving ------------------------------------------------------------------------------------


class KnownIds(Mapping[str, set[str]]):
    """Resource -> every device ID the kubelet ties to it, kept as the sources' own ID lists.

    A node of a million devices names them in GetAllocatableResources and
    again in the checkpoint: a set of every ID per resource was two million
    insertions and tens of MiB. Whether a socket's devices overlap a resource
    is asked of the lists themselves (``overlaps``); the set of one resource
    is made only when its whole list is compared.
    """

    def __init__(self, sources: dict[str, list[Sequence[str]]]):
        self._sources = sources
        self._sets: dict[str, set[str]] = {}

    def __getitem__(self, resource: str) -> set[str]:
        found = self._sets.get(resource)
        if found is None:
            found = self._sets[resource] = set().union(*self._sources[resource])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    def overlaps(self, resource: str, ids: set[str]) -> bool:
        """Whether any of ``ids`` is known for the resource: each list read up to its first match."""
        return any(not ids.isdisjoint(listed) for listed in self._sources[resource])


def known_ids(
    allocatable: AllocatableResources | None, pods: Sequence[PodResources] | None, checkpoint: Checkpoint | None
) -> KnownIds:
    """Every device ID the kubelet ties to each resource: allocatable, allocated, and the checkpoint's both lists.

    Allocatable and RegisteredDevices hold healthy devices only; allocations
    keep an unhealthy device known for as long as a container holds it.
    """
    sources: dict[str, list[Sequence[str]]] = {}
    for d in allocatable.devices if allocatable else ():
        sources.setdefault(d.resource, []).append(d.ids)
    for pod in pods or ():
        for c in pod.containers:
            for d in c.devices:
                sources.setdefault(d.resource, []).append(d.ids)
    if checkpoint is not None:
        for resource, ids in checkpoint.registered_devices.items():
            sources.setdefault(resource, []).append(ids)
        for e in checkpoint.entries:
            sources.setdefault(e.resource, []).append([i for group in e.device_ids.values() for i in group])
    return KnownIds(sources)


def infer_resource(device_ids: Iterable[str], known: Mapping[str, set[str]]) -> str | None:
    """The resource whose kubelet-known devices match this socket's, when exactly one does.

    Device IDs are only unique within a resource, so a match with several
    resources is reported as unknown, never guessed.
    """
    ids = set(device_ids)
    if not ids:
        return None
    if isinstance(known, KnownIds):
        overlapping = [r for r in known if known.overlaps(r, ids)]
    else:
        overlapping = [r for r, known_ids in known.items() if not known_ids.isdisjoint(ids)]
    if len(overlapping) == 1:
        return overlapping[0]
    exact = [r for r in overlapping if known[r] == ids]
    return exact[0] if len(exact) == 1 else None


def name_sockets(
    paths: NodePaths,
    probes: Sequence[PluginProbe],
    known: Mapping[str, set[str]],
    claimed: Mapping[str, str],
) -> list[PluginProbe]:
    """Each probe with the resource it serves filled in where that is known for certain.

    ``claimed`` maps a socket (by its real path) to the resource a running
    devctl plugin says it serves on it (its control socket). A registration
    names its socket and its endpoint (an empty device list included); else
    the full device list is matched with ``known`` (see :func:`known_ids`).
    """
    registered: dict[str, str] = {}
    for p in probes:
        if p.registry is not None and p.registry.type == DEVICE_PLUGIN_TYPE and p.registry.name:
            endpoint = dial_path(paths, p)
            if endpoint is not None:
                registered.setdefault(endpoint, p.registry.name)
    out = []
    for p in probes:
        if p.resource is None:
            real = dial_path(paths, p)
            name = (registered.get(real) or claimed.get(real)) if real else None
            if name is None and (p.registry is None or p.registry.type == DEVICE_PLUGIN_TYPE):
                name = infer_resource(DeviceList.of(p.devices).ids, known)
            if name is not None:
                p = replace(p, resource=name)
        out.append(p)
    return out


def serving_sockets(paths: NodePaths, probes: Iterable[PluginProbe], resource: str) -> list[tuple[PluginProbe, str]]:
    """The live probes that serve ``resource``, each with the socket to dial, by path."""
    found = []
    for p in probes:
        if p.resource == resource and p.status == PluginStatus.SERVING:
            dial = dial_path(paths, p)
            if dial is not None:
                found.append((p, dial))
    return sorted(found, key=lambda pair: pair[0].socket)


def unnamed_sockets(paths: NodePaths, probes: Iterable[PluginProbe]) -> list[tuple[PluginProbe, str]]:
    """Live device-plugin sockets whose resource cannot be told and whose devices the kubelet cannot know.

    The kubelet reports healthy devices only (allocatable, RegisteredDevices),
    so a plugin whose every device is unhealthy and held by nobody, or that
    lists none, cannot be tied to its resource from this node: it may serve
    any resource. A plugin with a healthy device the kubelet does not list is
    not registered, and is not one of these.
    """
    found = []
    for p in probes:
        if p.resource is not None or p.status != PluginStatus.SERVING:
            continue
        if p.registry is not None and p.registry.type != DEVICE_PLUGIN_TYPE:
            continue
        if any(d.healthy for d in p.devices):
            continue
        dial = dial_path(paths, p)
        if dial is not None:
            found.append((p, dial))
    return sorted(found, key=lambda pair: pair[0].socket)
