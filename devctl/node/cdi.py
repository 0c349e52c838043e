"""CDI spec files read as the container runtime reads them, and their device nodes traced to hardware.

The runtime (containerd, CRI-O through cncf-tags/container-device-interface)
reads ``*.json`` and ``*.yaml`` in each spec dir (not recursively), each as
YAML; a later dir has the higher priority. A spec is strict, and checked by
the library's own rules (devctl.node.cdi_rules: versions and each feature's
minimum, names, edits): a spec the runtime would refuse is rejected whole —
here one line in ``CdiSpec.error`` naming the rule, the other specs still
read. A spec file that is a symlink is read only when the
file it leads to is in the same dir, and a reason never shows more of a
file's text than one short plain word (devctl.node.files.excerpt): a link
to ``/etc/shadow`` is refused, not quoted. A device node's major:minor (from the spec, else the
host path's ``stat`` under the root) leads through ``<sysfs>/dev/char/M:m``
to the PCI function that owns it and that function's ``numa_node``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from devctl.base.errors import DevctlError
from devctl.model import CdiDevice, CdiDeviceNode, CdiEdits, CdiMount, CdiSpec, CdiState, ErrorKind
from devctl.node.cdi_rules import SpecError, check, decode
from devctl.node.cdi_scan import MIN_FILES, scan_in_child
from devctl.node.files import FileReadError, FileRefused, read_file, read_regular
from devctl.node.sockets import OutsideRoot, in_root

if TYPE_CHECKING:
    from devctl.node.cdi_scan import Scanned

MAX_SPEC_BYTES = 4 * 1024 * 1024  # a spec larger than this is not a CDI spec
_PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# Makes a spec's device node (path, host path, major, minor): as written, or traced to its PCI function.
_NodeMaker = Callable[[str, str, "int | None", "int | None"], CdiDeviceNode]
_NO_EDITS = CdiEdits()


def _as_written(path: str, host: str, major: int | None, minor: int | None) -> CdiDeviceNode:
    return CdiDeviceNode(path=path, host_path=host, major=major, minor=minor)


def _edits(edits: dict[str, Any] | None, node: _NodeMaker) -> CdiEdits:
    """A checked spec's (or device's) containerEdits as the model's; device nodes made by ``node``."""
    if not edits:
        return _NO_EDITS
    nodes = [
        node(n["path"], n.get("hostPath") or n["path"], n.get("major"), n.get("minor"))
        for n in edits.get("deviceNodes", ())
    ]
    mounts = tuple(
        CdiMount(host_path=m["hostPath"], container_path=m["containerPath"]) for m in edits.get("mounts", ())
    )
    nets = tuple(d["hostInterfaceName"] for d in edits.get("netDevices", ()))
    # Positional, as CdiEdits declares them.
    return CdiEdits(tuple(edits.get("env", ())), tuple(nodes), mounts, nets)


def _yaml(text: str) -> Any:
    """A YAML spec parsed, a key twice in one mapping refused (the runtime's YAML is strict).

    PyYAML is imported only for a spec outside yamlsubset's lines (~20 ms: most commands').
    """
    from devctl.fast import yamlsubset

    try:
        return yamlsubset.load(text, unique=True)
    except Exception as e:
        import yaml  # loaded already: only the safe loader raises

        if not isinstance(e, yaml.YAMLError):
            raise
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"not YAML: {_problem(getattr(e, 'problem', None))}{at}") from None
    except RecursionError:
        raise SpecError("not YAML: nested too deeply") from None


def _problem(problem: object) -> str:
    """PyYAML's problem without the text it quotes from the file (a token, an alias): its words only."""
    if not isinstance(problem, str) or not problem:
        return "syntax error"
    return problem.split("'", 1)[0].split('"', 1)[0].strip() or "syntax error"


class _NotPlainJson(DevctlError, ValueError):
    """JSON the YAML reader would read otherwise: a key twice (refused), NaN or Infinity (not numbers)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _NotPlainJson
    return out


def _no_constant(_: str) -> Any:
    raise _NotPlainJson


def parse_spec(text: str, path: str, priority: int, node: _NodeMaker = _as_written) -> CdiSpec:
    """One spec's text, read as YAML whatever the file's name (as the runtime does); raises SpecError.

    JSON, a part of YAML, is tried first at C speed; a ``.json`` file that is
    YAML, or JSON with a key twice, is the YAML reader's.
    """
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)
    except ValueError:  # json.JSONDecodeError is one
        data = _yaml(text)
    except RecursionError:
        raise SpecError(f"not {'JSON' if path.endswith('.json') else 'YAML'}: nested too deeply") from None
    return _spec(data, path, priority, node)


def _spec(loaded: Any, path: str, priority: int, node: _NodeMaker) -> CdiSpec:
    """The spec of a loaded document (in process, or by devctl.node.cdi_scan's helper); raises SpecError.

    Decoded and checked by the runtime's rules (devctl.node.cdi_rules) before any device node is traced.
    """
    data = decode(loaded)
    check(data)
    return CdiSpec(
        path=path,
        priority=priority,
        kind=data["kind"],
        cdi_version=data["cdiVersion"],
        edits=_edits(data.get("containerEdits"), node),
        devices=tuple(CdiDevice(d["name"], _edits(d.get("containerEdits"), node)) for d in data["devices"]),
    )


def _read(path: str, inside: str | None = None) -> str:
    """The spec's text through the one safe reader (regular files only, never blocking, capped, in ``inside``)."""
    raw = read_file(path, MAX_SPEC_BYTES, inside=inside)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("not UTF-8 text") from None


class Owners:
    """Char devices major:minor -> the PCI function owning each (and its NUMA node), through ``<sysfs>/dev/char``.

    One per read, with what it learnt: each major:minor is looked up once
    (claims' specs name the same control nodes, and MIG slices the same
    function, over and over), and each directory that links point into is
    resolved once (sysfs's links are ``../../devices/pci0000:3a/0000:3a:00.0``:
    a thousand devices, a few buses).
    """

    def __init__(self, sysfs: str):
        self._links = os.path.join(sysfs, "dev", "char") + os.sep
        self._char_dir: str | None = None  # <sysfs>/dev/char with its symlinks resolved, once needed
        self._dirs: dict[str, str] = {}  # a link's directory part -> that directory, resolved
        self._owners: dict[tuple[int, int], tuple[str | None, int | None]] = {}

    def of(self, major: int, minor: int) -> tuple[str | None, int | None]:
        owner = self._owners.get((major, minor))
        if owner is None:
            owner = self._owners[(major, minor)] = self._look_up(major, minor)
        return owner

    def _target(self, link: str) -> str:
        """Where the dev/char link at ``link`` leads: one readlink, not realpath's lstat of every component.

        sysfs's dev/char entries are links to device directories, the only links on that path.
        """
        text = os.readlink(link)
        parent, _, name = text.rpartition("/")
        if name in ("", ".", "..") or not parent:
            return os.path.normpath(os.path.join(self._resolved_char_dir(), text))
        where = self._dirs.get(parent)
        if where is None:
            where = self._dirs[parent] = os.path.normpath(os.path.join(self._resolved_char_dir(), parent))
        return where + os.sep + name if where != os.sep else os.sep + name

    def _resolved_char_dir(self) -> str:
        if self._char_dir is None:
            self._char_dir = os.path.realpath(self._links)
        return self._char_dir

    def _look_up(self, major: int, minor: int) -> tuple[str | None, int | None]:
        link = f"{self._links}{major}:{minor}"
        try:
            target = self._target(link)
        except OSError:  # not a link (or no such entry): what realpath makes of it
            try:
                target = os.path.realpath(link)
            except OSError:
                return None, None
        last = target[target.rfind(os.sep) + 1 :]
        if _PCI.match(last):  # the link names the function itself (the usual case): no split and join
            return last, _numa_node(target)
        parts = target.split(os.sep)
        for i in range(len(parts) - 2, -1, -1):
            if _PCI.match(parts[i]):
                return parts[i], _numa_node(os.sep.join(parts[: i + 1]))
        return None, None


def _numa_node(device_dir: str) -> int | None:
    """The function's ``numa_node`` (-1 is none), through the one reader: a planted link to a device is not opened."""
    try:
        numa = int(read_regular(device_dir + "/numa_node", 64))  # int() takes the attribute's surrounding whitespace
    except (FileRefused, ValueError):
        return None
    return numa if numa >= 0 else None


def _tracer(root: str, sysfs: str) -> _NodeMaker:
    """Device nodes traced through sysfs: major:minor (the spec's, else the host path's ``stat``) to PCI and NUMA."""
    owner_of = Owners(sysfs).of

    def traced(path: str, host: str, major: int | None, minor: int | None) -> CdiDeviceNode:
        if major is None or minor is None:
            try:
                st = os.stat(in_root(root, host))
            except (OSError, OutsideRoot):
                return CdiDeviceNode(path, host, major, minor)
            if not stat.S_ISCHR(st.st_mode):
                return CdiDeviceNode(path, host, major, minor)
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        return CdiDeviceNode(path, host, major, minor, *owner_of(major, minor))

    return traced


def read_spec(
    path: str, priority: int, node: _NodeMaker, scanned: Scanned = None, inside: str | None = None
) -> CdiSpec:
    """One spec file, its device nodes made by ``node`` (traced); a failure is the spec's one-line ``error``.

    ``scanned``: the file's document as the helper process loaded it, when it did (else the file is read here).
    ``inside``: the spec dir, resolved; a file elsewhere (through a symlink) is refused.
    """
    try:
        if scanned is not None:
            return _spec(scanned[0], path, priority, node)
        return parse_spec(_read(path, inside), path, priority, node)
    except SpecError as e:
        return CdiSpec(path=path, priority=priority, error=f"{path}: {e}", error_kind=ErrorKind.MALFORMED)
    except FileReadError as e:
        return CdiSpec(path=path, priority=priority, error=str(e), error_kind=e.kind)


def _is_file(entry: os.DirEntry[str]) -> bool:
    """``os.path.isfile`` of the entry: the listing's file type, a ``stat`` only for a symlink."""
    try:
        return entry.is_file()
    except OSError:
        return False


def read_cdi(
    dirs: tuple[str, ...], root: str, sysfs: str, *, helper_from: int = MIN_FILES, python: str | None = None
) -> tuple[CdiState, list[tuple[str, ErrorKind]]]:
    """Every spec in ``dirs`` (a missing dir is no spec, as for the runtime) and the dirs that could not be listed.

    From ``helper_from`` YAML files on, a helper process scans them on another
    core (devctl.node.cdi_scan; ``python`` is its interpreter, this one by default).
    """
    files: list[tuple[str, int, str]] = []
    errors: list[tuple[str, ErrorKind]] = []
    for priority, directory in enumerate(dirs):
        try:
            with os.scandir(directory) as listing:
                entries = sorted((e for e in listing if e.name.endswith((".json", ".yaml"))), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        except OSError as e:
            errors.append((f"{directory}: {e.strerror or e}", ErrorKind.of_oserror(e)))
            continue
        inside = os.path.realpath(directory)  # where a spec's file must be, whatever links lead to it
        files += [(entry.path, priority, inside) for entry in entries if _is_file(entry)]
    yaml_files = [path for path, _, _ in files if not path.endswith(".json")]  # JSON loads at C speed here
    scanned: dict[str, Scanned] = {}
    if len(yaml_files) >= helper_from:
        docs = scan_in_child(yaml_files, MAX_SPEC_BYTES, python=python)
        scanned = dict(zip(yaml_files, docs, strict=True)) if docs is not None else {}
    traced = _tracer(root, sysfs)
    specs = tuple(read_spec(path, priority, traced, scanned.get(path), inside) for path, priority, inside in files)
    return CdiState(dirs=dirs, specs=specs), errors
