"""A CDI spec's loaded document checked by the rules the runtime's library applies, one failure one line.

The runtime (containerd, CRI-O, podman through tags.cncf.io/container-device-interface
pkg/cdi v1.1.0) reads every spec file, ``.json`` or ``.yaml``, with its YAML
reader (sigs.k8s.io/yaml, strict: a key twice in one mapping is an error),
turns the YAML into JSON (a scalar where a string belongs becomes that
string: ``name: 0`` is device ``"0"``) and decodes the JSON with Go's
encoding/json, which matches a field's name whatever its case
(``additionalGIDs`` is ``additionalGids``) and, strict again, refuses a field
it does not know. Then it checks the spec, in this order:

- ``cdiVersion`` (a leading ``v`` allowed) is one of the released versions,
  0.1.0 to 1.1.0, and no older than the newest feature the spec uses needs:
  a mount ``type`` 0.4.0; a device node ``hostPath`` or a device name starting
  with a digit 0.5.0; annotations or a dot in the kind's class 0.6.0;
  ``intelRdt`` or ``additionalGids`` 0.7.0; ``netDevices`` or intelRdt's
  ``schemata``/``enableMonitoring`` 1.1.0 (so 0.1.0 and 0.2.0, older than
  0.3.0, are refused whatever the spec holds);
- the kind's vendor and class: a letter first, a letter or digit last,
  letters, digits, ``_``, ``-``, ``.`` between;
- the spec's container edits, then each device: its name (a letter or digit
  first and last; letters, digits, ``_ - . :`` between), edits that are not
  empty, the edits' own rules (``env`` entries ``KEY=VALUE``; a device node's
  path, type ``b c u p``, permissions of ``r w m``; a hook's OCI name and
  path; a mount's two paths; intelRdt's ``closID``; a net device's two names,
  each once); no device twice; at least one device.

This module holds the rules only (no file is read here): :func:`decode` and
:func:`check`, each raising :class:`SpecError` with the rule and where.
Never anything from the file beyond devctl.node.files.excerpt's one short word.
"""

from __future__ import annotations

import math
import re
from typing import Any

from devctl.base.errors import DevctlError
from devctl.node.files import excerpt


class SpecError(DevctlError, ValueError):
    """Why a spec file is rejected, one line."""


# Go field types, as the library's specs-go declares them.
_STR, _I64, _U32, _INT, _BOOL = "string", "int64", "uint32", "int", "bool"
_RANGES = {_I64: (-(2**63), 2**63 - 1), _INT: (-(2**63), 2**63 - 1), _U32: (0, 2**32 - 1)}


class _Struct:
    """A Go struct's JSON fields (name -> type), found whatever their case as encoding/json finds them."""

    def __init__(self, fields: dict[str, Any]):
        self.fields = fields
        self.folded = {name.lower(): name for name in fields}


class _List:
    def __init__(self, item: Any):
        self.item = item


_MAP = "map[string]string"
_NODE = _Struct(
    {
        "path": _STR,
        "hostPath": _STR,
        "type": _STR,
        "major": _I64,
        "minor": _I64,
        "fileMode": _U32,
        "permissions": _STR,
        "uid": _U32,
        "gid": _U32,
    }
)
_HOOK = _Struct({"hookName": _STR, "path": _STR, "args": _List(_STR), "env": _List(_STR), "timeout": _INT})
_MOUNT = _Struct({"hostPath": _STR, "containerPath": _STR, "options": _List(_STR), "type": _STR})
_RDT = _Struct(
    {
        "closID": _STR,
        "l3CacheSchema": _STR,
        "memBwSchema": _STR,
        "schemata": _List(_STR),
        "enableMonitoring": _BOOL,
    }
)
_NET = _Struct({"hostInterfaceName": _STR, "name": _STR})
_EDITS = _Struct(
    {
        "env": _List(_STR),
        "deviceNodes": _List(_NODE),
        "netDevices": _List(_NET),
        "hooks": _List(_HOOK),
        "mounts": _List(_MOUNT),
        "intelRdt": _RDT,
        "additionalGids": _List(_U32),
    }
)
_DEVICE = _Struct({"name": _STR, "annotations": _MAP, "containerEdits": _EDITS})
_SPEC = _Struct(
    {"cdiVersion": _STR, "kind": _STR, "annotations": _MAP, "devices": _List(_DEVICE), "containerEdits": _EDITS}
)


def decode(loaded: Any) -> dict[str, Any]:
    """The loaded document as the library's Spec: known fields only (canonical names), each of its Go type.

    A field absent or null is left out (Go's zero value); a scalar where a
    string belongs is that string, as the library's YAML-to-JSON step makes it.
    """
    if loaded is None:
        raise SpecError("no spec data (empty document)")
    spec = _decode(loaded, _SPEC, "")
    assert isinstance(spec, dict)
    return spec


def _decode(value: Any, typ: Any, where: str) -> Any:
    if isinstance(typ, _Struct):
        if type(value) is not dict:
            raise SpecError(f"{where or 'spec'}: not a mapping")
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _go_key(key)
            field = name if name in typ.fields else typ.folded.get(name.lower())
            if field is None:
                raise SpecError(f"{where or 'spec'}: unknown field {excerpt(name)}")
            if item is None:
                out.pop(field, None)  # null: the field's zero value (a later key of the same name may set it)
                continue
            want = typ.fields[field]
            # The usual cases, without a path made for an error.
            if (want is _STR and type(item) is str) or (
                want is _I64 and type(item) is int and -(2**63) <= item < 2**63
            ):
                out[field] = item
            else:
                out[field] = _decode(item, want, f"{where}.{field}" if where else field)
        return out
    if isinstance(typ, _List):
        if type(value) is not list:
            raise SpecError(f"{where}: not a list")
        if typ.item is _STR and all(type(item) is str for item in value):
            return value
        items = []
        for i, item in enumerate(value):
            if item is None and isinstance(typ.item, _Struct):
                raise SpecError(f"{where}[{i}]: null")  # a nil pointer the library would not survive
            items.append("" if item is None else _decode(item, typ.item, f"{where}[{i}]"))
        return items
    if typ == _MAP:
        if type(value) is not dict:
            raise SpecError(f"{where}: not a mapping")
        return {_go_key(k): "" if v is None else _decode(v, _STR, f"{where}.{_go_key(k)}") for k, v in value.items()}
    if typ == _STR:
        if isinstance(value, (dict, list)):
            raise SpecError(f"{where}: not a string")
        return _as_string(value)
    if typ == _BOOL:
        if type(value) is not bool:
            raise SpecError(f"{where}: not true or false")
        return value
    # An integer: a bool is none (type(True) is bool), a float only when whole (JSON's 1.0 is 1).
    if type(value) is float and math.isfinite(value) and value.is_integer():
        value = int(value)
    low, high = _RANGES[typ]
    if type(value) is not int or not low <= value <= high:
        raise SpecError(f"{where}: not {'a non-negative 32-bit' if typ == _U32 else 'an'} integer")
    return value


def _go_key(key: Any) -> str:
    """A mapping key as the YAML-to-JSON step writes it: a string, a number's text, ``true``/``false``."""
    return key if type(key) is str else _as_string(key)


def _as_string(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return _go_float(value)
    return str(value)


def _go_float(x: float) -> str:
    """Go's strconv.FormatFloat(x, 'g', -1, 64): the shortest digits, an exponent from 1e21 or below 1e-4."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    digits, exp = _shortest(abs(x))
    sign = "-" if x < 0 else ""
    precision = len(digits) if 6 > len(digits) >= exp + 1 else 6
    if exp < -4 or exp >= precision:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    whole = digits[: exp + 1].ljust(exp + 1, "0")
    rest = digits[exp + 1 :]
    return f"{sign}{whole}.{rest}" if rest else f"{sign}{whole}"


def _shortest(x: float) -> tuple[str, int]:
    """The shortest round-tripping digits of ``x`` (>= 0) and its decimal exponent (1.5 -> ('15', 0))."""
    if x == 0:
        return "0", 0
    mantissa, _, exponent = f"{x!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    exp = len(whole) - 1 + int(exponent or 0)
    if whole == "0":
        exp = -(len(frac) - len(frac.lstrip("0"))) - 1 + int(exponent or 0)
    return digits.rstrip("0") or "0", exp


# The released versions, newest first (specs-go/version.go), and the hooks OCI names.
VERSIONS = ("1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0")
_EARLIEST = "0.3.0"
_DIGITS = frozenset("0123456789")
HOOKS = frozenset({"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"})


def _all_edits(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [d.get("containerEdits", {}) for d in spec.get("devices", ())] + [spec.get("containerEdits", {})]


def _needs(spec: dict[str, Any]) -> tuple[str, str] | None:
    """The newest version a feature the spec uses needs, and that feature; None for none beyond 0.3.0."""
    edits = _all_edits(spec)
    rdts = [e["intelRdt"] for e in edits if "intelRdt" in e]
    if any("schemata" in r or r.get("enableMonitoring") for r in rdts):
        return "1.1.0", "intelRdt schemata or enableMonitoring"
    if any(e.get("netDevices") for e in edits):
        return "1.1.0", "netDevices"
    if rdts:
        return "0.7.0", "intelRdt"
    if any(e.get("additionalGids") for e in edits):
        return "0.7.0", "additionalGids"
    if spec.get("annotations") or any(d.get("annotations") for d in spec.get("devices", ())):
        return "0.6.0", "annotations"
    if "." in spec.get("kind", "").partition("/")[2]:
        return "0.6.0", "a dot in the kind's class"
    if any(d.get("name", "")[:1] in _DIGITS for d in spec.get("devices", ())):
        return "0.5.0", "a device name starting with a digit"
    if any(n.get("hostPath") for e in edits for n in e.get("deviceNodes", ())):
        return "0.5.0", "a device node's hostPath"
    if any(m.get("type") for e in edits for m in e.get("mounts", ())):
        return "0.4.0", "a mount's type"
    return None


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


# The names the rules below allow, in one match each (the rules' loops only say why one is refused).
_VENDOR_OR_CLASS = re.compile(r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
_DEVICE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")


def _vendor_or_class(what: str, name: str) -> None:
    if _VENDOR_OR_CLASS.match(name):
        return
    if not name:
        raise SpecError(f"kind: empty {what}")
    if not (name[0].isascii() and name[0].isalpha()):
        raise SpecError(f"kind: {what} {excerpt(name)} does not start with a letter")
    for c in name[1:-1]:
        if not (_alnum(c) or c in "_-."):
            raise SpecError(f"kind: {what} {excerpt(name)} has a character other than letters, digits, '_-.'")
    if not _alnum(name[-1]):
        raise SpecError(f"kind: {what} {excerpt(name)} does not end with a letter or digit")


def _device_name(name: str, where: str) -> None:
    if _DEVICE_NAME.match(name):
        return
    if not name:
        raise SpecError(f"{where}: no name")
    if not _alnum(name[0]) or not _alnum(name[-1]):
        raise SpecError(f"{where}: device name {excerpt(name)} does not start and end with a letter or digit")
    if not all(_alnum(c) or c in "_-.:" for c in name[1:-1]):
        raise SpecError(f"{where}: device name {excerpt(name)} has a character other than letters, digits, '_-.:'")


def _env(env: list[str], where: str) -> None:
    for i, v in enumerate(env):
        if v.find("=") <= 0:
            raise SpecError(f"{where}[{i}]: env entry {excerpt(v)} is not KEY=VALUE")


def _empty(edits: dict[str, Any]) -> bool:
    return not any(
        edits.get(k) for k in ("env", "deviceNodes", "hooks", "mounts", "additionalGids", "netDevices")
    ) and ("intelRdt" not in edits)


def _edits(edits: dict[str, Any], where: str) -> None:
    """The library's ContainerEdits.Validate, in its order."""
    _env(edits.get("env", ()), f"{where}.env")
    for i, n in enumerate(edits.get("deviceNodes", ())):
        at = f"{where}.deviceNodes[{i}]"
        if not n.get("path"):
            raise SpecError(f"{at}: no path")
        if n.get("type", "") not in ("", "b", "c", "u", "p"):
            raise SpecError(f"{at}: type {excerpt(n['type'])} is not b, c, u or p")
        if set(n.get("permissions", "")) - set("rwm"):
            raise SpecError(f"{at}: permissions {excerpt(n['permissions'])} are not of r, w, m")
    for i, h in enumerate(edits.get("hooks", ())):
        at = f"{where}.hooks[{i}]"
        if h.get("hookName", "") not in HOOKS:
            raise SpecError(f"{at}: hookName {excerpt(h.get('hookName', ''))} is not an OCI hook")
        if not h.get("path"):
            raise SpecError(f"{at}: no path")
        _env(h.get("env", ()), f"{at}.env")
    for i, m in enumerate(edits.get("mounts", ())):
        if not m.get("hostPath") or not m.get("containerPath"):
            raise SpecError(f"{where}.mounts[{i}]: needs hostPath and containerPath")
    rdt = edits.get("intelRdt")
    if rdt is not None:
        clos = rdt.get("closID", "")
        if clos != "/" and (
            len(clos.encode("utf-8", "surrogatepass")) >= 4096 or clos in (".", "..") or "/" in clos or "\n" in clos
        ):
            raise SpecError(f"{where}.intelRdt.closID: not a file name")
    hosts: set[str] = set()
    names: set[str] = set()
    for i, d in enumerate(edits.get("netDevices", ())):
        at = f"{where}.netDevices[{i}]"
        host, name = d.get("hostInterfaceName", ""), d.get("name", "")
        if not host:
            raise SpecError(f"{at}: no hostInterfaceName")
        if not name:
            raise SpecError(f"{at}: no name")
        if host in hosts:
            raise SpecError(f"{at}: hostInterfaceName {excerpt(host)} twice")
        if name in names:
            raise SpecError(f"{at}: name {excerpt(name)} twice")
        hosts.add(host)
        names.add(name)


def check(spec: dict[str, Any]) -> None:
    """The library's checks of a decoded spec (Spec.validate, then each device's), the first failure raised."""
    version = spec.get("cdiVersion", "")
    known = version[1:] if version.startswith("v") else version
    if not version:
        raise SpecError("no cdiVersion")
    if known not in VERSIONS:
        raise SpecError(f"cdiVersion {excerpt(version)} is not a CDI version (0.1.0 to 1.1.0)")
    need, feature = _needs(spec) or (_EARLIEST, "")
    if VERSIONS.index(need) < VERSIONS.index(known):
        what = f"{feature} needs" if feature else "the oldest version read is"
        raise SpecError(f"cdiVersion {excerpt(version)} is too old: {what} {need}")
    kind = spec.get("kind", "")
    vendor, sep, cls = kind.partition("/")
    if not sep or not vendor or not cls:
        vendor, cls = "", kind
    _vendor_or_class("vendor", vendor)
    _vendor_or_class("class", cls)
    _edits(spec.get("containerEdits", {}), "containerEdits")
    seen: set[str] = set()
    for i, d in enumerate(spec.get("devices", ())):
        where = f"devices[{i}]"
        name = d.get("name", "")
        _device_name(name, where)
        edits = d.get("containerEdits", {})
        if _empty(edits):
            raise SpecError(f"{where}: device {excerpt(name)} has no containerEdits")
        _edits(edits, f"{where}.containerEdits")
        if name in seen:
            raise SpecError(f"device {excerpt(name)} defined twice")
        seen.add(name)
    if not seen:
        raise SpecError("no devices")
