"""The DRA manager checkpoint, ``<kubelet-dir>/dra_manager_state``: read, verify and decode.

The file is ``{"Data": "<JSON as a string>", "Checksum": <uint32>}``, the
checksum being CRC-32 (IEEE) of the Data string's bytes exactly as stored
(pkg/kubelet/checkpointmanager/checksum and pkg/kubelet/cm/dra/state), so it is
verified on the decoded string itself, never on a re-serialisation. Inside,
the claims are under ``ClaimInfoStateList`` (format ``v1``) or, in some
kubelets, ``Entries`` (format ``entries``); the alpha file
``{"version": "v1", "entries": [...], "checksum": <FNV>}`` (format ``legacy``)
is decoded but its checksum (go-spew of structs that changed between
releases) is not recomputed.

``RawDraData`` keeps what Go would tell apart (a null list against an empty
one, null devices of a failed prepare) so that the simulated kubelet's writer
(``devctl.lab.sim.dra_state``) can reproduce a file byte for byte; the model's
``DraCheckpoint`` is what the views read. Reading reuses the device manager
checkpoint's safe file reading and Go-like JSON decoding.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devctl.base.errors import DevctlError
from devctl.base.names import go_field
from devctl.model import DraCheckpoint, DraCheckpointClaim, DraCheckpointDevice
from devctl.node.files import excerpt
from devctl.node.gojson import (
    CheckpointError,
    Shape,
    go_checksum,
    go_text,
    kind_of,
    load_json,
    read_bytes,
    refuse_constant,
)

FORMAT_V1 = "v1"
FORMAT_ENTRIES = "entries"
FORMAT_LEGACY = "legacy"
KIND = "DRACheckpoint"
API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
LIST_KEYS = {FORMAT_V1: "ClaimInfoStateList", FORMAT_ENTRIES: "Entries"}
_ABSENT = object()  # go_field's default where a key that holds null must be told from one that is not there


@dataclass(frozen=True)
class RawDevice:
    """One device of a DriverState; ``None`` stands for Go's nil list."""

    pool: str
    device: str
    requests: tuple[str, ...] | None
    cdi_ids: tuple[str, ...] | None
    share_id: str | None = None


@dataclass(frozen=True)
class RawClaim:
    """One ClaimInfoState as the kubelet writes it; ``drivers`` maps a driver to its devices (None: null)."""

    uid: str
    name: str
    namespace: str
    pod_uids: tuple[str, ...]
    drivers: tuple[tuple[str, tuple[RawDevice, ...] | None], ...]


@dataclass(frozen=True)
class RawDraData:
    """The decoded Data document: its format and its claims (None: the list was null)."""

    format: str
    claims: tuple[RawClaim, ...] | None


def crc32(text: str) -> int:
    """The checksum of a Data string: CRC-32 IEEE of its UTF-8 bytes (Go's crc32.ChecksumIEEE([]byte(s)))."""
    return zlib.crc32(text.encode("utf-8", errors="surrogatepass"))


@dataclass(frozen=True)
class _Document:
    """The file opened: its format, its claim list as JSON gave it (None: null or absent) and its checksums."""

    format: str
    claims: Any
    where: str  # the list's key, for messages
    stored: int | None
    computed: int | None  # None for ``legacy``


def _document(path: str) -> _Document:
    """The file read once, its checksum computed over the Data string as stored, and Data decoded once.

    Raises CheckpointError when the file cannot be read or is not a DRA checkpoint.
    """
    doc = load_json(path, read_bytes(path))
    try:
        if not isinstance(doc, dict):
            raise Shape(f"the file holds {kind_of(doc)}, expected an object")
        if "Data" not in doc and go_field(doc, "version") is not None:
            return _Document(
                FORMAT_LEGACY, go_field(doc, "entries"), "entries", go_checksum(go_field(doc, "checksum")), None
            )
        data = go_field(doc, "Data")
        if not isinstance(data, str):
            raise Shape("it has no Data string" if data is None else f"Data is {kind_of(data)}, expected a string")
        stored = go_checksum(go_field(doc, "Checksum"))
        fmt, key, claims = _parse_data(data)
        return _Document(fmt, claims, key, stored, crc32(data))
    except Shape as err:
        raise CheckpointError(path, f"not a DRA manager checkpoint: {err}") from err


def read_dra_raw(path: str) -> tuple[RawDraData, int | None, int | None]:
    """The file's decoded Data with the stored and the computed checksum (computed None for ``legacy``).

    Raises CheckpointError when the file cannot be read or is not a DRA checkpoint.
    """
    doc = _document(path)
    try:
        return RawDraData(doc.format, _claims(doc.claims, doc.where)), doc.stored, doc.computed
    except Shape as err:
        raise CheckpointError(path, f"not a DRA manager checkpoint: {err}") from err


def read_dra_checkpoint(path: str) -> DraCheckpoint:
    """Read, verify and decode ``dra_manager_state``; a checksum mismatch is a finding (``checksum_ok`` False).

    The model's claims are made from the decoded JSON at once, not through
    :class:`RawClaim` (the writer's form): a claim as the kubelet writes it
    takes :func:`_fast_model_claim`, any other :func:`model_claim` of the
    field-by-field decoding; both give what ``model_claim`` of
    :func:`read_dra_raw`'s claims gives (tests/test_dra_checkpoint.py).
    """
    doc = _document(path)
    try:
        claims = _model_claims(doc.claims, doc.where)
    except Shape as err:
        raise CheckpointError(path, f"not a DRA manager checkpoint: {err}") from err
    return DraCheckpoint(
        path=path,
        format=doc.format,
        checksum_ok=None if doc.computed is None else doc.computed == doc.stored,
        checksum=doc.stored,
        computed_checksum=doc.computed,
        claims=claims,
    )


def model_claim(claim: RawClaim) -> DraCheckpointClaim:
    """A checkpointed claim for the views: each device once, with the number of repeats the file holds."""
    seen: dict[tuple[str, str, str], DraCheckpointDevice] = {}
    total = 0
    for driver, devices in claim.drivers:
        for d in devices or ():
            total += 1
            seen.setdefault(
                (driver, d.pool, d.device),
                DraCheckpointDevice(
                    driver=driver,
                    pool=d.pool,
                    device=d.device,
                    requests=d.requests or (),
                    cdi_devices=d.cdi_ids or (),
                    share_id=d.share_id,
                ),
            )
    return DraCheckpointClaim(
        uid=claim.uid,
        name=claim.name,
        namespace=claim.namespace,
        pod_uids=claim.pod_uids,
        drivers=tuple(driver for driver, _ in claim.drivers),
        devices=tuple(seen.values()),
        duplicate_devices=total - len(seen),
    )


# --- Go's view of the Data document -------------------------------------------------


def _parse_data(text: str) -> tuple[str, str, Any]:
    """The Data document's format, its claim list's key and the list as decoded (None: null or absent)."""
    try:
        data = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as err:
        reason = (
            err.msg
            if isinstance(err, json.JSONDecodeError)
            else "nested too deeply"
            if isinstance(err, RecursionError)
            else str(err)
        )
        raise Shape(f"Data is not JSON: {reason}") from err
    if not isinstance(data, dict):
        raise Shape(f"Data holds {kind_of(data)}, expected an object")
    kind = go_field(data, "kind")
    if kind != KIND:
        raise Shape(f"Data kind is {excerpt(kind)}, expected {KIND!r}")
    for fmt, key in LIST_KEYS.items():
        claims = go_field(data, key, _ABSENT)
        if claims is not _ABSENT:
            return fmt, key, claims
    return FORMAT_V1, LIST_KEYS[FORMAT_V1], None


def _claims(value: Any, where: str) -> tuple[RawClaim, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise Shape(f"{where} is {kind_of(value)}, expected a list")
    return tuple(_claim(v, f"{where}[{i}]") for i, v in enumerate(value))


def _model_claims(value: Any, where: str) -> tuple[DraCheckpointClaim, ...]:
    """The model's claims of the decoded list: what ``model_claim`` of each of :func:`_claims` gives."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise Shape(f"{where} is {kind_of(value)}, expected a list")
    out = []
    for i, v in enumerate(value):
        try:
            out.append(_fast_model_claim(v))
        except _NotPlain:
            out.append(model_claim(_claim(v, f"{where}[{i}]")))
    return tuple(out)


def _strings(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise Shape(f"{where} is {kind_of(value)}, expected a list")
    return tuple(go_text(v, f"{where}[{i}]") for i, v in enumerate(value))


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Shape(f"{where} is {kind_of(value)}, expected an object")
    return value


# A ClaimInfoState and a device as the kubelet writes them (ShareID only when set): the fields of the fast path.
_CLAIM_FIELDS = frozenset({"ClaimUID", "ClaimName", "Namespace", "PodUIDs", "DriverState"})
_DEVICE_FIELDS = frozenset({"PoolName", "DeviceName", "RequestNames", "CDIDeviceIDs"})
_SHARED_DEVICE_FIELDS = _DEVICE_FIELDS | {"ShareID"}


class _NotPlain(DevctlError):
    """A claim that is not exactly as the kubelet writes it: the field-by-field checks decode it."""


def _plain(value: Any) -> str:
    # An ASCII str has no lone surrogate for _text to replace (the flag is stored: no scan).
    if value.__class__ is str and value.isascii():
        return value
    raise _NotPlain


def _plain_strings(value: Any) -> tuple[str, ...] | None:
    """What :func:`_strings` gives for a null or a list of plain strings (checked in a loop: no generator)."""
    if value is None:
        return None
    if value.__class__ is not list:
        raise _NotPlain
    for v in value:
        if v.__class__ is not str or not v.isascii():
            raise _NotPlain
    return tuple(value)


def _plain_claim(obj: Any) -> tuple[dict[str, Any], list[tuple[str, list[Any] | None]]]:
    """A claim's PodUIDs and (driver, its Devices list or None) when it is exactly as the kubelet writes it;
    else _NotPlain. The devices themselves are checked by :func:`_plain_device`."""
    if obj.__class__ is not dict or obj.keys() != _CLAIM_FIELDS:
        raise _NotPlain
    pods, states = obj["PodUIDs"], obj["DriverState"]
    if pods.__class__ is not dict or states.__class__ is not dict:
        raise _NotPlain
    drivers = []
    for driver, state in states.items():
        if state.__class__ is not dict or state.keys() != {"Devices"}:
            raise _NotPlain
        listed = state["Devices"]
        if listed is not None and listed.__class__ is not list:
            raise _NotPlain
        drivers.append((driver, listed))
    return pods, drivers


def _fast_claim(obj: Any) -> RawClaim:
    """The claim as :func:`_claim` decodes it when it is exactly as the kubelet writes it; else _NotPlain.

    1,000 claims went through the field-by-field checks (case-folded names,
    each string's surrogates, a path for the message) in most of the file's
    reading time; the checks now run only for a claim that is not plain.
    """
    pods, states = _plain_claim(obj)
    drivers = [(driver, None if devices is None else tuple(map(_fast_device, devices))) for driver, devices in states]
    return RawClaim(
        uid=_plain(obj["ClaimUID"]),
        name=_plain(obj["ClaimName"]),
        namespace=_plain(obj["Namespace"]),
        pod_uids=tuple(pods),
        drivers=tuple(drivers),
    )


def _fast_model_claim(obj: Any) -> DraCheckpointClaim:
    """``model_claim(_fast_claim(obj))`` in one pass, without the RawClaim and RawDevice between; else _NotPlain.

    The same checks as :func:`_fast_claim` (:func:`_plain_claim` and
    :func:`_plain_device`; a repeated device is checked too, then counted):
    a third of ``ls``'s reading of 1,000 claims went into making the
    writer's form first.
    """
    pods, states = _plain_claim(obj)
    seen: dict[tuple[str, str, str], DraCheckpointDevice] = {}
    total = 0
    for driver, listed in states:
        for d in listed or ():
            pool, device, requests, cdi_ids, share_id = _plain_device(d)
            total += 1
            key = (driver, pool, device)
            if key not in seen:
                seen[key] = DraCheckpointDevice(driver, pool, device, requests or (), cdi_ids or (), share_id)
    return DraCheckpointClaim(  # positional, in the model's order (uid, name, namespace, pods, drivers, ...)
        _plain(obj["ClaimUID"]),
        _plain(obj["ClaimName"]),
        _plain(obj["Namespace"]),
        tuple(pods),
        tuple([driver for driver, _ in states]),
        tuple(seen.values()),
        total - len(seen),
    )


def _plain_device(d: Any) -> tuple[str, str, tuple[str, ...] | None, tuple[str, ...] | None, str | None]:
    """A device exactly as the kubelet writes it: (pool, device, requests, CDI IDs, share ID); else _NotPlain."""
    if d.__class__ is not dict or (d.keys() != _DEVICE_FIELDS and d.keys() != _SHARED_DEVICE_FIELDS):
        raise _NotPlain
    share = d.get("ShareID")
    return (
        _plain(d["PoolName"]),
        _plain(d["DeviceName"]),
        _plain_strings(d["RequestNames"]),
        _plain_strings(d["CDIDeviceIDs"]),
        None if share is None else _plain(share),
    )


def _fast_device(d: Any) -> RawDevice:
    pool, device, requests, cdi_ids, share_id = _plain_device(d)
    return RawDevice(pool=pool, device=device, requests=requests, cdi_ids=cdi_ids, share_id=share_id)


def _claim(value: Any, where: str) -> RawClaim:
    try:
        return _fast_claim(value)
    except _NotPlain:
        pass
    obj = _object(value, where)
    drivers: list[tuple[str, tuple[RawDevice, ...] | None]] = []
    for driver, state in _object(go_field(obj, "DriverState"), f"{where}.DriverState").items():
        state_where = f"{where}.DriverState[{driver}]"
        devices = go_field(_object(state, state_where), "Devices")
        if devices is not None and not isinstance(devices, list):
            raise Shape(f"{state_where}.Devices is {kind_of(devices)}, expected a list")
        parsed = (
            None if devices is None else tuple(_device(d, f"{state_where}.Devices[{i}]") for i, d in enumerate(devices))
        )
        drivers.append((driver, parsed))
    # The alpha format kept CDI names per driver without pools or devices.
    for driver, ids in _object(go_field(obj, "CDIDevices"), f"{where}.CDIDevices").items():
        if driver not in dict(drivers):
            drivers.append((driver, (RawDevice("", "", None, _strings(ids, f"{where}.CDIDevices[{driver}]")),)))
    return RawClaim(
        uid=go_text(go_field(obj, "ClaimUID"), f"{where}.ClaimUID"),
        name=go_text(go_field(obj, "ClaimName"), f"{where}.ClaimName"),
        namespace=go_text(go_field(obj, "Namespace"), f"{where}.Namespace"),
        pod_uids=tuple(_object(go_field(obj, "PodUIDs"), f"{where}.PodUIDs")),
        drivers=tuple(drivers),
    )


def _device(value: Any, where: str) -> RawDevice:
    obj = _object(value, where)
    share = go_field(obj, "ShareID")
    return RawDevice(
        pool=go_text(go_field(obj, "PoolName"), f"{where}.PoolName"),
        device=go_text(go_field(obj, "DeviceName"), f"{where}.DeviceName"),
        requests=_strings(go_field(obj, "RequestNames"), f"{where}.RequestNames"),
        cdi_ids=_strings(go_field(obj, "CDIDeviceIDs"), f"{where}.CDIDeviceIDs"),
        share_id=None if share is None else go_text(share, f"{where}.ShareID"),
    )
