"""Writing ``dra_manager_state`` as the kubelet's DRA manager does, byte for byte, for the simulated kubelet.

The kubelet marshals its DRACheckpoint struct with Go's encoding/json
(pkg/kubelet/cm/dra/state/checkpoint.go): compact, fields in declaration
order, map keys sorted, nil lists as ``null``, ``<``, ``>``, ``&`` escaped; then
it stores that text as the ``Data`` string beside its CRC-32 and marshals the
outer struct the same way. Parsing one of the kubelet's own files with
``devctl.node.dra_checkpoint.read_dra_raw`` and writing it here gives the
same bytes. Only the simulator writes node files.
"""

from __future__ import annotations

import json
from typing import Any

from devctl.node.checkpoint import GO_JSON_ESCAPES, write_atomically
from devctl.node.dra_checkpoint import API_VERSION, KIND, LIST_KEYS, RawClaim, RawDevice, RawDraData, crc32


def _go_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(GO_JSON_ESCAPES)


def _device(d: RawDevice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "PoolName": d.pool,
        "DeviceName": d.device,
        "RequestNames": None if d.requests is None else list(d.requests),
        "CDIDeviceIDs": None if d.cdi_ids is None else list(d.cdi_ids),
    }
    if d.share_id is not None:  # `json:"ShareID,omitempty"` (1.35+)
        out["ShareID"] = d.share_id
    return out


def _claim(c: RawClaim) -> dict[str, Any]:
    return {
        "ClaimUID": c.uid,
        "ClaimName": c.name,
        "Namespace": c.namespace,
        "PodUIDs": {uid: {} for uid in sorted(c.pod_uids)},
        "DriverState": {
            driver: {"Devices": None if devices is None else [_device(d) for d in devices]}
            for driver, devices in sorted(c.drivers)
        },
    }


def dump_dra_data(data: RawDraData) -> str:
    """The Data string: the DRACheckpoint document in Go's encoding (``legacy`` is never written)."""
    key = LIST_KEYS[data.format]
    claims = None if data.claims is None else [_claim(c) for c in data.claims]
    return _go_json({"kind": KIND, "apiVersion": API_VERSION, key: claims})


def dump_dra_checkpoint(data: RawDraData) -> bytes:
    """The whole file: the Data string and its CRC-32."""
    text = dump_dra_data(data)
    return _go_json({"Data": text, "Checksum": crc32(text)}).encode("utf-8", errors="surrogatepass")


def write_dra_checkpoint(path: str, claims: tuple[RawClaim, ...] | None) -> None:
    """Write the checkpoint atomically (a synced hidden file renamed over the old one, as the kubelet's file store)."""
    write_atomically(path, dump_dra_checkpoint(RawDraData("v1", claims)))
