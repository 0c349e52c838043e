"""The device manager checkpoint: the kubelet's checksum, the decoded allocations, and the file the simulator writes."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from helpers import call_as_nobody
from shared_data import shared

from devctl.model import Allocation, DeviceNode, Mount
from devctl.node.checkpoint import (
    CheckpointError,
    RawEntry,
    dump_checkpoint,
    fnv1a32,
    read_checkpoint,
    render_spew,
    write_checkpoint,
)
from devctl.node.convert import allocation_to_pb

VECTORS = shared("checkpoints")
CHECKSUMS = {
    "single-gpu-no-pods.json": 3952659280,
    "tegra-one-pod.json": 3660592824,
    "kubelet-1.32-empty-allocresp.json": 2905070527,
    "kubelet-1.32-env-numa0.json": 2772507460,
}

# go-spew's %#v of the tegra vector, written out by hand from go-spew's format rules.
TEGRA_RENDERING = (
    "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
    "[{PodUID:(string)bf52b2cd-b611-4e79-86b1-280b283185c3 ContainerName:(string)check "
    "ResourceName:(string)nvidia.com/gpu DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[tegra]] "
    "AllocResp:([]uint8)[10 31 10 22 78 86 73 68 73 65 95 86 73 83 73 66 76 69 95 68 69 86 73 67 69 83 "
    "18 5 116 101 103 114 97]}] RegisteredDevices:(map[string][]string)map[nvidia.com/gpu:[tegra]]}"
)

# A ContainerAllocateResponse with envs {"A": "GPU"}, serialized by hand.
ENV_A_GPU = bytes([10, 8, 10, 1, 65, 18, 3, 71, 80, 85])


def vector(name: str) -> str:
    if not VECTORS.is_dir():
        pytest.skip(f"shared test data not found at {VECTORS} (a checkout without ../shared)")
    return str(VECTORS / name)


def write_json(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return str(path)


# --- the shared vectors ------------------------------------------------------------


@pytest.mark.parametrize(("name", "checksum"), sorted(CHECKSUMS.items()))
def test_every_vector_verifies(name: str, checksum: int) -> None:
    cp = read_checkpoint(vector(name))
    assert cp.checksum_ok
    assert cp.checksum == checksum
    assert cp.computed_checksum == checksum
    assert cp.format == "v2"
    assert all(e.alloc_error is None for e in cp.entries)


def test_single_gpu_vector_has_no_entries_and_one_registered_gpu() -> None:
    cp = read_checkpoint(vector("single-gpu-no-pods.json"))
    assert cp.entries == ()
    assert cp.registered_devices == {"nvidia.com/gpu": ("GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0",)}


def test_tegra_vector_decodes_its_env_and_no_numa_node() -> None:
    cp = read_checkpoint(vector("tegra-one-pod.json"))
    (entry,) = cp.entries
    assert (entry.pod_uid, entry.container, entry.resource) == (
        "bf52b2cd-b611-4e79-86b1-280b283185c3",
        "check",
        "nvidia.com/gpu",
    )
    assert entry.device_ids == {"-1": ("tegra",)}
    assert entry.allocation == Allocation(envs={"NVIDIA_VISIBLE_DEVICES": "tegra"})


def test_empty_allocresp_decodes_to_an_empty_allocation() -> None:
    (entry,) = read_checkpoint(vector("kubelet-1.32-empty-allocresp.json")).entries
    assert entry.device_ids == {"1": ("ext-3",)}
    assert entry.allocation == Allocation()
    assert entry.alloc_error is None


def test_numa0_vector_decodes_its_env_and_four_registered_devices() -> None:
    cp = read_checkpoint(vector("kubelet-1.32-env-numa0.json"))
    (entry,) = cp.entries
    assert entry.device_ids == {"0": ("w-0",)}
    assert entry.allocation == Allocation(envs={"WIDGET_VISIBLE": "w-0"})
    assert cp.registered_devices == {"ceo-test.example/widget": ("w-0", "w-1", "w-2", "w-3")}


def test_render_spew_prints_what_go_spew_prints() -> None:
    data = json.loads(Path(vector("tegra-one-pod.json")).read_text())["Data"]
    assert render_spew(data) == TEGRA_RENDERING
    no_pods = json.loads(Path(vector("single-gpu-no-pods.json")).read_text())["Data"]
    assert render_spew(no_pods) == (
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)<nil> "
        "RegisteredDevices:(map[string][]string)map[nvidia.com/gpu:[GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0]]}"
    )


def test_nulls_render_as_go_nil_and_missing_keys_as_empty() -> None:
    nulls = {
        "PodDeviceEntries": [
            {"PodUID": "u", "ContainerName": "c", "ResourceName": "r", "DeviceIDs": {"0": None}, "AllocResp": None},
            None,
        ],
        "RegisteredDevices": {"r": None},
    }
    assert render_spew(nulls) == (
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
        "[{PodUID:(string)u ContainerName:(string)c ResourceName:(string)r "
        "DeviceIDs:(checkpoint.DevicesPerNUMA)map[0:<nil>] AllocResp:([]uint8)<nil>} "
        "{PodUID:(string) ContainerName:(string) ResourceName:(string) "
        "DeviceIDs:(checkpoint.DevicesPerNUMA)<nil> AllocResp:([]uint8)<nil>}] "
        "RegisteredDevices:(map[string][]string)map[r:<nil>]}"
    )
    # The kubelet unmarshals into an empty list and map, so absent keys stay empty, not nil.
    assert render_spew({}) == (
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[] "
        "RegisteredDevices:(map[string][]string)map[]}"
    )


@pytest.mark.parametrize(
    ("data", "value"),
    [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968), (TEGRA_RENDERING.encode(), 3660592824)],
)
def test_fnv1a32(data: bytes, value: int) -> None:
    assert fnv1a32(data) == value


def test_fnv1a32_agrees_with_the_one_byte_loop_at_every_length() -> None:
    data = bytes(range(256)) * 2
    for n in range(len(data)):
        h = 0x811C9DC5
        for byte in data[:n]:
            h = ((h ^ byte) * 0x01000193) % 2**32
        assert fnv1a32(data[:n]) == h, n


def mutations(text: str):
    """Every single-character change of a letter or digit inside the Data value."""
    start = text.index('"Data":') + len('"Data":')
    end = text.index(',"Checksum"')
    for i in range(start, end):
        c = text[i]
        if c.isdigit():
            new = "2" if c == "1" else "1"
        elif c.isalpha():
            new = "z" if c in "qQ" else "q"  # never a case change: Go matches keys ignoring case
        else:
            continue
        yield i, text[:i] + new + text[i + 1 :]


@pytest.mark.parametrize("name", sorted(CHECKSUMS))
def test_changing_any_byte_of_data_fails_the_checksum(name: str, tmp_path: Path) -> None:
    text = Path(vector(name)).read_text()
    path = tmp_path / "kubelet_internal_checkpoint"
    count = 0
    for i, changed in mutations(text):
        path.write_text(changed)
        try:
            cp = read_checkpoint(str(path))
        except CheckpointError:
            continue  # no longer JSON of the right shape: refused, which is also a failure to verify
        assert not cp.checksum_ok, f"changing {text[i]!r} at {i} still verifies"
        assert cp.checksum == CHECKSUMS[name]
        count += 1
    assert count > 50


def test_a_mismatch_is_reported_with_both_checksums_and_still_decoded(tmp_path: Path) -> None:
    text = Path(vector("tegra-one-pod.json")).read_text()
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_text(text.replace('"nvidia.com/gpu":["tegra"]', '"nvidia.com/gpu":["tegrb"]'))
    cp = read_checkpoint(str(path))
    assert not cp.checksum_ok
    assert cp.checksum == 3660592824
    assert cp.computed_checksum not in (None, 3660592824)
    assert cp.registered_devices == {"nvidia.com/gpu": ("tegrb",)}
    assert cp.entries[0].allocation == Allocation(envs={"NVIDIA_VISIBLE_DEVICES": "tegra"})


# --- writing ----------------------------------------------------------------------------


def raw_entries(vector_name: str) -> tuple[list[RawEntry], dict]:
    data = json.loads(Path(vector(vector_name)).read_text())["Data"]
    entries = [
        RawEntry(e["PodUID"], e["ContainerName"], e["ResourceName"], e["DeviceIDs"], base64.b64decode(e["AllocResp"]))
        for e in data["PodDeviceEntries"] or ()
    ]
    return entries, data["RegisteredDevices"]


@pytest.mark.parametrize("name", sorted(CHECKSUMS))
def test_dump_writes_the_vector_byte_for_byte(name: str) -> None:
    entries, registered = raw_entries(name)
    assert dump_checkpoint(entries, registered) == Path(vector(name)).read_bytes().rstrip(b"\n")


FULL_ALLOCATION = Allocation(
    envs={"B": "2", "A": "1"},
    mounts=(Mount("/usr/lib/x", "/opt/x/lib", True),),
    devices=(DeviceNode("/dev/x0", "/dev/x0", "rw"),),
    annotations={"example.com/a": "b"},
    cdi_devices=("example.com/gpu=x0",),
)


def test_round_trip_sorts_numa_keys_numerically(tmp_path: Path) -> None:
    entries = [
        RawEntry(
            "uid-1",
            "main",
            "example.com/gpu",
            {"10": ["g10"], "-1": ["gx"], "1": ["g1"], "0": ["g0"], "2": ["g2"]},
            allocation_to_pb(FULL_ALLOCATION).SerializeToString(),
        ),
        RawEntry("uid-2", "side", "example.com/nic", {"0": ["n<0>&"]}, b""),
    ]
    registered = {"example.com/nic": ["n<0>&", "n1"], "example.com/gpu": ["g0", "g1", "g2", "g10", "gx"]}
    path = tmp_path / "kubelet_internal_checkpoint"
    write_checkpoint(str(path), entries, registered)

    cp = read_checkpoint(str(path))
    assert cp.checksum_ok
    assert cp.format == "v2"
    assert list(cp.entries[0].device_ids) == ["-1", "0", "1", "2", "10"]
    assert cp.entries[0].allocation == Allocation(**{**FULL_ALLOCATION.__dict__, "envs": {"A": "1", "B": "2"}})
    assert cp.entries[1].device_ids == {"0": ("n<0>&",)}
    assert cp.entries[1].allocation == Allocation()
    assert list(cp.registered_devices) == ["example.com/gpu", "example.com/nic"]

    text = path.read_text()
    # go-spew sorts the NUMA keys as numbers; encoding/json writes them sorted as strings.
    assert "DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[gx] 0:[g0] 1:[g1] 2:[g2] 10:[g10]]" in render_spew(
        json.loads(text)["Data"]
    )
    assert '"DeviceIDs":{"-1":["gx"],"0":["g0"],"1":["g1"],"10":["g10"],"2":["g2"]}' in text
    assert '"n\\u003c0\\u003e\\u0026"' in text  # escaped the way Go's json.Marshal escapes
    assert '"AllocResp":""' in text


def test_no_entries_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    write_checkpoint(str(path), [], {"example.com/gpu": []})
    assert path.read_text().startswith('{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"example.com/gpu":[]}}')
    cp = read_checkpoint(str(path))
    assert cp.checksum_ok
    assert cp.entries == ()


def test_write_replaces_the_file_by_rename_and_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    write_checkpoint(str(path), [], {"a.example/x": ["x-0"]})
    first = path.stat()
    write_checkpoint(str(path), [], {"a.example/x": ["x-0", "x-1"]})
    second = path.stat()
    assert second.st_ino != first.st_ino  # a new file renamed into place, never rewritten in place
    assert second.st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["kubelet_internal_checkpoint"]
    assert read_checkpoint(str(path)).registered_devices == {"a.example/x": ("x-0", "x-1")}


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    write_checkpoint(str(path), [], {"a.example/x": ["x-0"]})
    before = path.read_bytes()
    with pytest.raises(ValueError, match="NUMA node key 'zero'"):
        write_checkpoint(str(path), [RawEntry("u", "c", "a.example/x", {"zero": ["x-0"]}, b"")], {})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["kubelet_internal_checkpoint"]


# --- the old format -------------------------------------------------------------------

# checkpointv1.go renders its own struct, then renames checkpointDataV1 and PodDevicesEntryV1.
V1_RENDERING = (
    "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)"
    "[{PodUID:(string)uid-old ContainerName:(string)cuda ResourceName:(string)nvidia.com/gpu "
    "DeviceIDs:([]string)[GPU-a GPU-b] AllocResp:([]uint8)[10 8 10 1 65 18 3 71 80 85]}] "
    "RegisteredDevices:(map[string][]string)map[nvidia.com/gpu:[GPU-a GPU-b]]}"
)


def v1_doc(device_ids: object, checksum: int) -> dict:
    entry = {
        "PodUID": "uid-old",
        "ContainerName": "cuda",
        "ResourceName": "nvidia.com/gpu",
        "DeviceIDs": device_ids,
        "AllocResp": base64.b64encode(ENV_A_GPU).decode(),
    }
    return {
        "Data": {"PodDeviceEntries": [entry], "RegisteredDevices": {"nvidia.com/gpu": ["GPU-a", "GPU-b"]}},
        "Checksum": checksum,
    }


def test_an_old_flat_list_file_reads_as_v1(tmp_path: Path) -> None:
    doc = v1_doc(["GPU-a", "GPU-b"], fnv1a32(V1_RENDERING.encode()))
    assert render_spew(doc["Data"]) == V1_RENDERING
    cp = read_checkpoint(write_json(tmp_path / "cp", doc))
    assert cp.format == "v1"
    assert cp.checksum_ok
    (entry,) = cp.entries
    assert entry.device_ids == {"-1": ("GPU-a", "GPU-b")}
    assert entry.allocation == Allocation(envs={"A": "GPU"})


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_null_device_ids_verify_as_whichever_format_the_checksum_was_made_for(fmt: str, tmp_path: Path) -> None:
    ids_type = "([]string)" if fmt == "v1" else "(checkpoint.DevicesPerNUMA)"
    rendering = V1_RENDERING.replace("([]string)[GPU-a GPU-b]", ids_type + "<nil>")
    cp = read_checkpoint(write_json(tmp_path / "cp", v1_doc(None, fnv1a32(rendering.encode()))))
    assert cp.checksum_ok
    assert cp.format == fmt
    assert cp.entries[0].device_ids == {}


# --- undecodable allocations ------------------------------------------------------------


def test_an_undecodable_allocresp_flags_only_its_entry(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    good = RawEntry("uid-1", "a", "example.com/gpu", {"0": ["g0"]}, ENV_A_GPU)
    bad = RawEntry("uid-2", "b", "example.com/gpu", {"0": ["g1"]}, b"\xff\xff\xff")
    write_checkpoint(str(path), [good, bad], {"example.com/gpu": ["g0", "g1"]})
    cp = read_checkpoint(str(path))
    assert cp.checksum_ok  # the bytes are what the kubelet stored; only their meaning is lost
    first, second = cp.entries
    assert first.allocation == Allocation(envs={"A": "GPU"})
    assert first.alloc_error is None
    assert second.allocation is None
    assert "not a ContainerAllocateResponse" in second.alloc_error
    assert second.device_ids == {"0": ("g1",)}


def test_an_allocresp_that_is_not_base64_flags_its_entry_and_cannot_verify(tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    good = RawEntry("uid-1", "a", "example.com/gpu", {"0": ["g0"]}, ENV_A_GPU)
    bad = RawEntry("uid-2", "b", "example.com/gpu", {"0": ["g1"]}, b"")
    write_checkpoint(str(path), [good, bad], {"example.com/gpu": ["g0", "g1"]})
    doc = json.loads(path.read_text())
    doc["Data"]["PodDeviceEntries"][1]["AllocResp"] = "%%%"
    cp = read_checkpoint(write_json(path, doc))
    assert not cp.checksum_ok
    assert cp.computed_checksum is None
    assert cp.checksum == doc["Checksum"]
    assert cp.entries[0].allocation == Allocation(envs={"A": "GPU"})
    assert cp.entries[1].allocation is None
    assert "not base64" in cp.entries[1].alloc_error


# --- files that cannot be read ----------------------------------------------------------


def assert_one_line(err: CheckpointError, path: str, fragment: str) -> None:
    message = str(err)
    assert message.startswith(path + ": ")
    assert fragment in err.reason
    assert "\n" not in message


def test_a_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "kubelet_internal_checkpoint")
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert_one_line(err.value, path, "no such file")


def test_a_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(str(tmp_path))
    assert_one_line(err.value, str(tmp_path), "not a regular file but a directory")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "not JSON: the file is empty"),
        ("  \n", "not JSON: the file is empty"),
        ('{"Data": {', "not JSON: Expecting property name enclosed in double quotes at line 1 column 11"),
        ('{"Data":{},"Checksum":NaN}', "not JSON: NaN is not a JSON value"),
        ('{"Data":{}} trailing', "not JSON: Extra data"),
    ],
)
def test_not_json(text: str, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(str(path))
    assert_one_line(err.value, str(path), fragment)


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([], "the file holds a list, expected an object"),
        ({"Checksum": 1}, "it has no Data object"),
        ({"Data": "x"}, "Data is a string, expected an object"),
        ({"Data": {"PodDeviceEntries": {}}}, "Data.PodDeviceEntries is an object, expected a list"),
        ({"Data": {"PodDeviceEntries": [7]}}, "Data.PodDeviceEntries[0] is a number, expected an object"),
        ({"Data": {"PodDeviceEntries": [{"PodUID": 5}]}}, "Data.PodDeviceEntries[0].PodUID is a number"),
        ({"Data": {"PodDeviceEntries": [{"DeviceIDs": 3}]}}, "Data.PodDeviceEntries[0].DeviceIDs is a number"),
        ({"Data": {"PodDeviceEntries": [{"DeviceIDs": {"x": []}}]}}, 'has the key "x", expected a NUMA node'),
        ({"Data": {"PodDeviceEntries": [{"DeviceIDs": {" 1": []}}]}}, 'has the key " 1"'),
        ({"Data": {"PodDeviceEntries": [{"DeviceIDs": {"0": "g0"}}]}}, 'DeviceIDs["0"] is a string, expected a list'),
        (
            {"Data": {"PodDeviceEntries": [{"DeviceIDs": {"0": []}}, {"DeviceIDs": []}]}},
            "mixes NUMA maps and old flat DeviceIDs lists",
        ),
        ({"Data": {"RegisteredDevices": []}}, "Data.RegisteredDevices is a list, expected an object"),
        ({"Data": {"RegisteredDevices": {"r": [1]}}}, 'Data.RegisteredDevices["r"][0] is a number, expected a string'),
        ({"Data": {}, "Checksum": "12"}, "Checksum is a string, expected an unsigned 64-bit integer"),
        ({"Data": {}, "Checksum": -1}, "Checksum is -1"),
        ({"Data": {}, "Checksum": 2**64}, f"Checksum is {2**64}"),
        ({"Data": {}, "Checksum": 1.5}, "Checksum is 1.5"),
    ],
)
def test_json_of_the_wrong_shape(doc: object, fragment: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "kubelet_internal_checkpoint", doc)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert_one_line(err.value, path, "not a device manager checkpoint: ")
    assert fragment in err.value.reason


def test_missing_checksum_is_a_mismatch_not_an_error(tmp_path: Path) -> None:
    doc = json.loads(Path(vector("tegra-one-pod.json")).read_text())
    del doc["Checksum"]
    cp = read_checkpoint(write_json(tmp_path / "cp", doc))
    assert not cp.checksum_ok
    assert cp.checksum is None
    assert cp.computed_checksum == 3660592824


def test_keys_match_fields_ignoring_case_as_go_does(tmp_path: Path) -> None:
    text = Path(vector("tegra-one-pod.json")).read_text().replace('"PodUID"', '"poduid"')
    path = tmp_path / "cp"
    path.write_text(text)
    cp = read_checkpoint(str(path))
    assert cp.checksum_ok
    assert cp.entries[0].pod_uid == "bf52b2cd-b611-4e79-86b1-280b283185c3"


# --- permission denied, as an ordinary user sees a root-owned 0600 file -------------------


def reason_as_nobody(path: str) -> str:
    """The CheckpointError reason of reading ``path`` as user 65534."""

    def reason() -> str:
        try:
            read_checkpoint(path)
        except CheckpointError as err:
            return err.reason
        return "read without error"

    return call_as_nobody(reason)["value"]


def test_permission_denied(short_root: Path) -> None:
    short_root.chmod(0o755)  # the directory is open; only the file is not
    path = short_root / "kubelet_internal_checkpoint"
    path.write_bytes(Path(vector("tegra-one-pod.json")).read_bytes())
    path.chmod(0o600 if os.geteuid() == 0 else 0o000)
    assert reason_as_nobody(str(path)) == "permission denied"
