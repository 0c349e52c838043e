"""dra_manager_state: the shared vectors verify, a changed byte fails, and the simulator's writer reproduces them.

The vectors in ../shared/testdata/dra are real (a live kubelet, the kubelet's own
checkpointer tests, the real v1.32 DRA manager), copied byte for byte.
"""

from __future__ import annotations

import json

import pytest
from shared_data import needs_shared, shared

from devctl.lab.sim.dra_state import dump_dra_checkpoint, write_dra_checkpoint
from devctl.node.dra_checkpoint import crc32, model_claim, read_dra_checkpoint, read_dra_raw
from devctl.node.gojson import CheckpointError

DATA = shared("dra")
pytestmark = needs_shared("dra")
GOOD = sorted(p.name for p in DATA.glob("*.dra_manager_state") if "incorrect" not in p.name)
CHECKSUMS = {  # from the vectors' README
    "kubelet-empty.dra_manager_state": 2361995144,
    "upstream-single-claim.dra_manager_state": 1656016162,
    "upstream-multiple-devices.dra_manager_state": 3369508096,
    "upstream-two-claims.dra_manager_state": 1582256999,
    "kubelet-1.32-two-devices.dra_manager_state": 2357394188,
    "kubelet-1.32-fresh-null.dra_manager_state": 4010664294,
}


@pytest.mark.parametrize("name", GOOD)
def test_each_real_vector_verifies(name):
    cp = read_dra_checkpoint(str(DATA / name))
    assert cp.checksum_ok is True
    assert cp.checksum == cp.computed_checksum == CHECKSUMS[name]
    assert cp.format == "v1"


def test_the_incorrect_checksum_vector_fails_and_still_decodes():
    cp = read_dra_checkpoint(str(DATA / "upstream-incorrect-checksum.dra_manager_state"))
    assert cp.checksum_ok is False
    assert cp.format == "entries"
    assert [c.name for c in cp.claims] == ["example-1", "example-2"]


@pytest.mark.parametrize("name", GOOD)
def test_the_writer_reproduces_each_vector_byte_for_byte(name):
    raw, _, _ = read_dra_raw(str(DATA / name))
    assert dump_dra_checkpoint(raw) == (DATA / name).read_bytes()


@pytest.mark.parametrize("offset", [0, 40, 200, -30])
def test_a_changed_byte_of_data_fails(tmp_path, offset):
    source = (DATA / "kubelet-1.32-two-devices.dra_manager_state").read_bytes()
    doc = json.loads(source)
    data = doc["Data"]
    i = offset % len(data)
    doc["Data"] = data[:i] + ("x" if data[i] != "x" else "y") + data[i + 1 :]
    path = tmp_path / "dra_manager_state"
    path.write_text(json.dumps(doc))
    try:
        cp = read_dra_checkpoint(str(path))
    except CheckpointError:
        return  # the change broke the document itself: refused, which also does not verify
    assert cp.checksum_ok is False


def test_claims_are_decoded():
    cp = read_dra_checkpoint(str(DATA / "kubelet-1.32-two-devices.dra_manager_state"))
    (claim,) = cp.claims
    assert (claim.namespace, claim.name, claim.uid) == (
        "default",
        "realdra-claim",
        "7265616c-6472-4100-8000-00000000c1a1",
    )
    assert claim.pod_uids == ("7265616c-6472-4100-8000-000000000001",)
    assert [(d.driver, d.pool, d.device, d.requests) for d in claim.devices] == [
        ("gpu.example.com", "node-dra", "gpu-0", ("req-0",)),
        ("gpu.example.com", "node-dra", "gpu-1", ("req-0",)),
    ]
    assert claim.devices[0].cdi_devices == ("k8s.gpu.example.com/claim=7265616c-6472-4100-8000-00000000c1a1-gpu-0",)


def test_a_null_list_and_null_devices_read_as_nothing(tmp_path):
    assert read_dra_checkpoint(str(DATA / "kubelet-1.32-fresh-null.dra_manager_state")).claims == ()
    raw, _, _ = read_dra_raw(str(DATA / "upstream-two-claims.dra_manager_state"))
    cp = read_dra_checkpoint(str(DATA / "upstream-two-claims.dra_manager_state"))
    assert cp.claims[1].devices[0].requests == () and cp.claims[1].devices[0].cdi_devices == ()
    assert raw.claims[1].drivers[0][1][0].requests is None  # kept for the writer


def test_repeated_devices_after_a_restart_are_counted_once(tmp_path):
    raw, _, _ = read_dra_raw(str(DATA / "upstream-single-claim.dra_manager_state"))
    claim = raw.claims[0]
    driver, devices = claim.drivers[0]
    doubled = type(claim)(claim.uid, claim.name, claim.namespace, claim.pod_uids, ((driver, devices + devices),))
    path = tmp_path / "dra_manager_state"
    write_dra_checkpoint(str(path), (doubled,))
    cp = read_dra_checkpoint(str(path))
    assert cp.checksum_ok is True
    assert len(cp.claims[0].devices) == 1 and cp.claims[0].duplicate_devices == 1


def test_the_legacy_alpha_format_is_read_and_said(tmp_path):
    path = tmp_path / "dra_manager_state"
    entry = {
        "DriverName": "gpu.example.com",
        "ClaimUID": "u1",
        "ClaimName": "c1",
        "Namespace": "ns",
        "PodUIDs": {"p1": {}},
        "CDIDevices": {"gpu.example.com": ["example.com/gpu=g0"]},
    }
    path.write_text(json.dumps({"version": "v1", "entries": [entry], "checksum": 123}))
    cp = read_dra_checkpoint(str(path))
    assert (cp.format, cp.checksum_ok, cp.checksum) == ("legacy", None, 123)
    assert cp.claims[0].devices[0].cdi_devices == ("example.com/gpu=g0",)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "empty"),
        (b"[]", "expected an object"),
        (b'{"Data": 3, "Checksum": 1}', "Data is a number"),
        (b'{"Data": "{\\"kind\\":\\"Other\\"}", "Checksum": 1}', "kind"),
        (b'{"Data": "not json", "Checksum": 1}', "Data is not JSON"),
        (b'{"Data": "{\\"kind\\":\\"DRACheckpoint\\",\\"ClaimInfoStateList\\":{}}", "Checksum": 1}', "expected a list"),
    ],
)
def test_what_is_not_a_dra_checkpoint_is_one_line(tmp_path, content, words):
    path = tmp_path / "dra_manager_state"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as err:
        read_dra_checkpoint(str(path))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_crc32_is_over_the_string_as_stored():
    assert (
        crc32('{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[]}')
        == 2361995144
    )


def _raw_claims(tmp_path, claims):
    data = json.dumps(
        {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": claims}
    )
    path = tmp_path / "dra_manager_state"
    path.write_text(json.dumps({"Data": data, "Checksum": crc32(data)}))
    return read_dra_raw(str(path))[0].claims


@pytest.mark.parametrize("name", GOOD)
def test_a_claim_as_the_kubelet_writes_it_reads_as_the_field_by_field_checks_read_it(tmp_path, name):
    # Claims exactly as the kubelet writes them take a fast path; a field Go ignores sends the same claim
    # through every check, which must give the same values.
    raw = json.loads(json.loads((DATA / name).read_text())["Data"])
    claims = raw.get("ClaimInfoStateList") or []
    for c in claims:
        for state in c["DriverState"].values():
            for d in state["Devices"] or []:
                d["ShareID"] = "share-1"
    variants = [claims, [{**c, "Unknown": 1} for c in claims]]
    assert _raw_claims(tmp_path, variants[0]) == _raw_claims(tmp_path, variants[1])


def test_names_a_fast_path_cannot_take_are_still_read_as_go_reads_them(tmp_path):
    claim = {
        "ClaimUID": "u1",
        "ClaimName": "c\ud800",  # a lone surrogate: Go reads U+FFFD
        "Namespace": "ns",
        "PodUIDs": {"p1": {}},
        "DriverState": {
            "d": {"Devices": [{"PoolName": "p", "devicename": "x", "RequestNames": None, "CDIDeviceIDs": None}]}
        },
    }
    (got,) = _raw_claims(tmp_path, [claim])
    assert got.name == "c\ufffd"
    assert got.drivers[0][1][0].device == "x"  # a field name in another case, as encoding/json matches it


def _written(tmp_path, claims, name="dra_manager_state"):
    data = json.dumps(
        {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": claims}
    )
    path = tmp_path / name
    path.write_text(json.dumps({"Data": data, "Checksum": crc32(data)}))
    return str(path)


def _device(name, **extra):
    return {"PoolName": "p", "DeviceName": name, "RequestNames": ["r"], "CDIDeviceIDs": [f"v/c={name}"], **extra}


def _via_raw(path):
    """The model's claims made the writer's way: each RawClaim of read_dra_raw through model_claim."""
    return tuple(model_claim(c) for c in read_dra_raw(path)[0].claims or ())


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.dra_manager_state")))
def test_the_model_s_claims_are_the_raw_claims_modelled(name):
    # The reader makes the model's claims straight from the JSON; the writer's form must model to the same.
    path = str(DATA / name)
    assert read_dra_checkpoint(path).claims == _via_raw(path)


def test_the_model_s_claims_are_the_raw_claims_modelled_for_each_shape(tmp_path):
    plain = {"ClaimUID": "u", "ClaimName": "c", "Namespace": "ns", "PodUIDs": {"p1": {}, "p2": {}}}
    shapes = {
        "two drivers, a device repeated": {
            "DriverState": {
                "a.example.com": {"Devices": [_device("x"), _device("y"), _device("x", ShareID="s-2")]},
                "b.example.com": {"Devices": [_device("x", ShareID="s-1")]},
            }
        },
        "a failed prepare": {"DriverState": {"a.example.com": {"Devices": None}}},
        "null names": {"DriverState": {"a.example.com": {"Devices": [{**_device("x"), "CDIDeviceIDs": None}]}}},
        "a field Go ignores": {"DriverState": {"a.example.com": {"Devices": [{**_device("x"), "Extra": 1}]}}},
        "a name not ASCII": {"DriverState": {"a.example.com": {"Devices": [_device("gpu-é")]}}},
        "a repeat not plain": {"DriverState": {"a.example.com": {"Devices": [_device("x"), _device("x", Extra=1)]}}},
        "the alpha CDIDevices": {"DriverState": {}, "CDIDevices": {"a.example.com": ["v/c=x"]}},
    }
    for what, fields in shapes.items():
        path = _written(tmp_path, [{**plain, **fields}, {**plain, "ClaimName": "other", **fields}])
        claims = read_dra_checkpoint(path).claims
        assert claims == _via_raw(path), what
        assert len(claims) == 2, what
    repeated = _written(tmp_path, [{**plain, **shapes["two drivers, a device repeated"]}])
    (claim,) = read_dra_checkpoint(repeated).claims
    assert claim.drivers == ("a.example.com", "b.example.com") and claim.duplicate_devices == 1
    assert [(d.driver, d.device, d.share_id) for d in claim.devices] == [
        ("a.example.com", "x", None),
        ("a.example.com", "y", None),
        ("b.example.com", "x", "s-1"),
    ]
